/* SPDX-License-Identifier: Apache-2.0 */
/* step_end: ending a step a few seconds from now, from a thread of slurmstepd's, unless its tasks
 * have ended by then: for a task that failed before it joined the job's bootstrap, whose peers may
 * be failing alike and saying why (a grace lets them finish that line) or waiting for it. */
#ifndef DLT_STEP_END_H
#define DLT_STEP_END_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

/* Seconds between a task's failure before it joined and the end of its step. */
#define DLT_STEP_END_GRACE_S 3.0

/* Ends step job.step (slurm_kill_job_step in slurmstepd): 0, or -1 with errno. */
typedef int (*dlt_step_end_fn)(uint32_t job, uint32_t step);
/* Says what came of it (slurmd's log): ended 1 the step was ended, 0 it was over already (code:
 * the errno of the refusal). */
typedef void (*dlt_step_end_said_fn)(int ended, int code, const char *what);

typedef struct {
    pthread_t thread;
    int started;        /* the thread runs (or ran): dlt_step_end_finish joins it */
    struct timespec at; /* when, on CLOCK_MONOTONIC */
    uint32_t job, step;
    char what[256]; /* the cause, for the log line ("node n2: task 3 exited with status 3 ...") */
    dlt_step_end_fn end;
    dlt_step_end_said_fn said;
} dlt_step_end;

/* Ends job.step delay_s from now, once: a second call while one is pending changes nothing. 0, or
 * -errno when the thread cannot start (the caller then ends the step at once itself). */
int dlt_step_end_after(dlt_step_end *e, double delay_s, uint32_t job, uint32_t step, const char *what,
                       dlt_step_end_fn end, dlt_step_end_said_fn said);
/* At the plugin's exit in slurmstepd (its code is about to be unloaded): a pending end is carried
 * out at its time (this node's tasks are over, but the peers on other nodes may still wait), and the
 * thread joined. Nothing pending: returns at once. */
void dlt_step_end_finish(dlt_step_end *e);

#endif
