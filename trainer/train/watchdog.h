/* SPDX-License-Identifier: Apache-2.0 */
/* watchdog: a thread that aborts the run when one phase of a step (data, compute, all-reduce,
 * checkpoint) takes longer than a bound, naming the phase, rank, host and step, so a lost peer
 * or a wedged collective ends the job step instead of hanging it (Caffe2's trainer did the same). */
#ifndef DLT_WATCHDOG_H
#define DLT_WATCHDOG_H

#include <pthread.h>
#include <stdint.h>

#include "common/exit_status.h"

typedef enum {
    DLT_PHASE_IDLE = 0,
    DLT_PHASE_DATA,
    DLT_PHASE_COMPUTE,
    DLT_PHASE_ALLREDUCE,
    DLT_PHASE_CHECKPOINT
} dlt_phase;

typedef struct {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int running, stop;
    dlt_phase phase;
    double since;
    int64_t step;
    double limit_s;
    int rank;
    char host[64];
    void (*abort_fn)(void *arg); /* tears the communicator down before the process exits */
    void *abort_arg;
    double abort_wait_s; /* the process exits this long after abort_fn started, at most */
    int abort_returned;
    const int *in_collective; /* > 0 while this rank waits inside a host collective (comm.h), or NULL */
    /* Fault injection for the tests (DLT_TEST_STALL=PHASE:STEP:SECONDS, PHASE data, compute or
     * allreduce; DLT_TEST_STALL_RANK picks one rank): entering that phase of that step sleeps. */
    dlt_phase stall_phase;
    int64_t stall_step;
    unsigned stall_s;
    /* A slow rank for the tests (DLT_TEST_SLOW_COMPUTE=FACTOR, DLT_TEST_SLOW_RANK picks one rank):
     * each step's compute, from entering it to entering the all-reduce, takes FACTOR times as long
     * (it sleeps the difference), so the rank stays that much slower whatever else loads the CPUs. */
    double slow_factor;
    int64_t slow_step;
    double slow_since;
    /* A real fault for the crash report's test (DLT_TEST_FAULT=STEP): entering the compute phase of
     * that step writes through a null pointer, in the training thread. 0: none. */
    int64_t fault_step;
} dlt_watchdog;

/* limit_s <= 0: no thread (phases are still marked for the fault injection). */
int dlt_watchdog_start(dlt_watchdog *w, double limit_s, int rank, const char *host, void (*abort_fn)(void *),
                       void *arg);
/* The communicator's in-collective count: a stall while it is above 0 is a wait for peers, said as
 * such ("a peer stopped responding"), never blamed on this rank's phase. */
void dlt_watchdog_watch_comm(dlt_watchdog *w, const int *in_collective);
void dlt_watchdog_phase(dlt_watchdog *w, dlt_phase phase, int64_t step);
void dlt_watchdog_stop(dlt_watchdog *w);
const char *dlt_phase_name(dlt_phase p);

#endif
