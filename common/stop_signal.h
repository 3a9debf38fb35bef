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

/* Installs the handlers for TERM, USR1 and INT. */
void dlt_stop_signal_install(void);

/* The requesting signal's number (0: none), written only by the handler. */
volatile sig_atomic_t *dlt_stop_signal_flag(void);

#endif
