/* SPDX-License-Identifier: Apache-2.0 */
/* stop_signal: SIGTERM, SIGUSR1 (Slurm's --signal before a time limit or preemption) and SIGINT
 * (Ctrl-C) as a request to stop, installed as the first thing `dltrain train` does, so that a
 * signal during start-up (bootstrap, data scan, preflight, resume) is a request like any other,
 * not the default action that ends the task with no checkpoint and a status no job script
 * requeues on. The training loop reads the request at step boundaries; a second Ctrl-C quits at
 * once. A signal handler's state is the process's: this module owns the one flag. */
#ifndef DLT_STOP_SIGNAL_H
#define DLT_STOP_SIGNAL_H

#include <signal.h>

/* Installs the handlers for TERM, USR1 and INT. Start-up begins: see dlt_stop_signal_stage. */
void dlt_stop_signal_install(void);

/* Start-up answers a stop request only where it can (before the first step); a read blocked in the
 * kernel (a FIFO, a hung NFS mount) would keep it waiting. So while start-up lasts a stop signal
 * also arms a timer: the grace (dlt_stop_signal_startup_grace) later the process ends with the
 * start-up status, saying which signal came, how long ago, and the stage it was in (nothing was
 * trained, so nothing is lost). stage: what start-up is doing now, copied (up to 255 bytes); the
 * caller names each stage as it enters it. */
void dlt_stop_signal_stage(const char *stage);
/* The grace in whole seconds, 1 to DLT_STOP_STARTUP_GRACE_MAX_S (the default); dltrain train gives
 * its --stall-timeout. */
void dlt_stop_signal_startup_grace(double seconds);
/* The status that ending in start-up exits with (DLT_EXIT_PREEMPTED where a checkpoint folder
 * keeps the run resumable, else DLT_EXIT_STOPPED_UNSAVED, the default). */
void dlt_stop_signal_startup_status(int exit_status);
/* Start-up is over (the training loop answers requests at each step, the stall watchdog bounds
 * each phase): the timer is cancelled and no longer armed. */
void dlt_stop_signal_startup_end(void);

/* The requesting signal's number (0: none), written only by the handler. */
volatile sig_atomic_t *dlt_stop_signal_flag(void);

#endif
