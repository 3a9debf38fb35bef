/* SPDX-License-Identifier: Apache-2.0 */
/* watchdog: abort a run whose current phase exceeds its bound. */
#include "config.h"

#include "trainer/train/watchdog.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/tunables.h"

const char *dlt_phase_name(dlt_phase p)
{
    static const char *n[] = {"idle", "data loading", "forward/backward", "gradient all-reduce", "checkpoint"};
    return p <= DLT_PHASE_CHECKPOINT ? n[p] : "?";
}

static void *_abort_thread(void *arg)
{
    dlt_watchdog *w = arg;
    w->abort_fn(w->abort_arg);
    __atomic_store_n(&w->abort_returned, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* The abort runs on a thread of its own and the process ends after at most abort_wait_s whatever
 * it does: ncclCommAbort can block for good (a CUDA graph holding the communicator, which this
 * thread cannot destroy while the main thread may be replaying it: NCCL's commDestroySync waits
 * for every graph that references the communicator), and a stalled rank must still exit so its
 * peers see it gone. */
static void _abort_bounded(dlt_watchdog *w)
{
    pthread_t t;
    pthread_attr_t at;
    double end = dlt_now() + w->abort_wait_s;
    if (!w->abort_fn || pthread_attr_init(&at) != 0)
        return;
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &at, _abort_thread, w) == 0)
        while (!__atomic_load_n(&w->abort_returned, __ATOMIC_ACQUIRE) && dlt_now() < end) {
            struct timespec ts = {0, 10000000L};
            nanosleep(&ts, NULL);
        }
    pthread_attr_destroy(&at);
    if (!__atomic_load_n(&w->abort_returned, __ATOMIC_ACQUIRE)) {
        fprintf(stderr,
                "dltrain: watchdog: rank %d: the communicator's abort did not return within %.0f s: exiting "
                "without it\n",
                w->rank, w->abort_wait_s);
        fflush(stderr);
    }
}

static void *_run(void *arg)
{
    dlt_watchdog *w = arg;
    double tick = w->limit_s / 4 < 1.0 ? w->limit_s / 4 : 1.0, last = dlt_now();
    pthread_mutex_lock(&w->mu);
    while (!w->stop) {
        struct timespec ts;
        double now = dlt_now(), gap = now - last;
        /* This thread wakes every tick: a much longer gap is time the process did not run (SIGSTOP,
         * `scontrol suspend`, gang scheduling, PreemptMode=SUSPEND; every rank of a suspended job
         * sees it). It is not a stall: the phase's clock skips it. */
        if (gap > tick + DLT_WATCHDOG_STOPPED_GAP_S) {
            if (w->phase != DLT_PHASE_IDLE)
                w->since += gap - tick;
            if (w->rank == 0) {
                fprintf(stderr,
                        "dltrain: watchdog: the process did not run for %.0f s (stopped or suspended): not "
                        "counted as a stall\n",
                        gap - tick);
                fflush(stderr);
            }
        }
        last = now;
        if (w->phase != DLT_PHASE_IDLE && now - w->since > w->limit_s) {
            /* A rank blocked in a collective is waiting for a peer that stopped (SIGSTOP, a hang, a
             * lost node): naming its own phase would blame the wrong rank. MPI cannot say which
             * peer; a peer stuck in its own work says so itself if its watchdog still runs. */
            if (w->in_collective && __atomic_load_n(w->in_collective, __ATOMIC_RELAXED) > 0)
                fprintf(stderr,
                        "dltrain: watchdog: rank %d on %s has waited for its peers in a collective (during %s) for "
                        "%.0f s at step %lld (limit %.0f s, --stall-timeout): a peer stopped responding (stopped, "
                        "hung or lost; not this rank): aborting the step\n",
                        w->rank, w->host, dlt_phase_name(w->phase), now - w->since, (long long)w->step, w->limit_s);
            else
                fprintf(stderr,
                        "dltrain: watchdog: rank %d on %s stuck in %s for %.0f s at step %lld (limit %.0f s, "
                        "--stall-timeout): aborting the step\n",
                        w->rank, w->host, dlt_phase_name(w->phase), now - w->since, (long long)w->step, w->limit_s);
            fflush(stderr);
            fflush(stdout);
            _abort_bounded(w);
            _exit(DLT_EXIT_STALLED);
        }
        /* the condition variable's clock: a wall clock step cannot stretch the tick */
        ts = dlt_deadline_after(tick);
        pthread_cond_timedwait(&w->cv, &w->mu, &ts);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

static void _test_hooks_parse(dlt_watchdog *w)
{
#ifdef DLT_TEST_HOOKS
    static const struct {
        const char *name;
        dlt_phase phase;
    } names[] = {{"data", DLT_PHASE_DATA},
                 {"compute", DLT_PHASE_COMPUTE},
                 {"allreduce", DLT_PHASE_ALLREDUCE},
                 {"checkpoint", DLT_PHASE_CHECKPOINT}};
    const char *spec = getenv("DLT_TEST_STALL"), *who = getenv("DLT_TEST_STALL_RANK");
    const char *slow = getenv("DLT_TEST_SLOW_COMPUTE"), *slow_who = getenv("DLT_TEST_SLOW_RANK");
    const char *fault = getenv("DLT_TEST_FAULT");
    char p[16];
    long long step;
    unsigned secs;
    double factor;
    if (slow && sscanf(slow, "%lf", &factor) == 1 && factor > 1 && factor <= 100 &&
        (!slow_who || atoi(slow_who) == w->rank)) {
        w->slow_factor = factor;
        w->slow_step = -1;
    }
    if (fault && sscanf(fault, "%lld", &step) == 1 && step > 0)
        w->fault_step = step;
    if (!spec || sscanf(spec, "%15[a-z]:%lld:%u", p, &step, &secs) != 3 || (who && atoi(who) != w->rank))
        return;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (!strcmp(p, names[i].name)) {
            w->stall_phase = names[i].phase;
            w->stall_step = step;
            w->stall_s = secs;
        }
#else
    (void)w;
#endif
}

/* The test hooks' sleeps: the whole time, signals or not (a stop request arriving in a stall must
 * not end it). */
static void _sleep_whole(double s)
{
    struct timespec left = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&left, &left) != 0 && errno == EINTR)
        ;
}

#ifdef DLT_TEST_HOOKS
/* The slow rank of the tests: compute is entered once from the data phase (and again after the
 * all-reduce, to settle the step: not a new start); entering the all-reduce ends it. */
static void _test_slow(dlt_watchdog *w, dlt_phase phase, int64_t step)
{
    double now = dlt_now();
    if (phase == DLT_PHASE_COMPUTE && step != w->slow_step) {
        w->slow_step = step;
        w->slow_since = now;
    } else if (phase == DLT_PHASE_ALLREDUCE && step == w->slow_step && w->slow_since > 0) {
        double extra = (w->slow_factor - 1) * (now - w->slow_since);
        w->slow_since = 0;
        _sleep_whole(extra);
    }
}
#endif

int dlt_watchdog_start(dlt_watchdog *w, double limit_s, int rank, const char *host, void (*abort_fn)(void *), void *arg)
{
    memset(w, 0, sizeof(*w));
    w->limit_s = limit_s;
    w->rank = rank;
    snprintf(w->host, sizeof(w->host), "%.63s", host ? host : "?");
    w->abort_fn = abort_fn;
    w->abort_arg = arg;
    w->abort_wait_s = DLT_WATCHDOG_ABORT_WAIT_S;
    _test_hooks_parse(w);
    if (limit_s <= 0)
        return 0;
    pthread_mutex_init(&w->mu, NULL);
    dlt_cond_init_monotonic(&w->cv);
    {
        int e = pthread_create(&w->thread, NULL, _run, w); /* returns its error; errno is not set */
        if (e != 0) {
            pthread_mutex_destroy(&w->mu);
            pthread_cond_destroy(&w->cv);
            return -e;
        }
    }
    w->running = 1;
    return 0;
}

void dlt_watchdog_watch_comm(dlt_watchdog *w, const int *in_collective)
{
    if (w->running)
        pthread_mutex_lock(&w->mu);
    w->in_collective = in_collective;
    if (w->running)
        pthread_mutex_unlock(&w->mu);
}

void dlt_watchdog_phase(dlt_watchdog *w, dlt_phase phase, int64_t step)
{
    if (w->running) {
        pthread_mutex_lock(&w->mu);
        w->phase = phase;
        w->step = step;
        w->since = dlt_now();
        pthread_mutex_unlock(&w->mu);
    }
#ifdef DLT_TEST_HOOKS
    if (w->slow_factor > 1)
        _test_slow(w, phase, step);
    if (w->fault_step > 0 && phase == DLT_PHASE_COMPUTE && step == w->fault_step) {
        int *volatile nowhere = NULL; /* volatile: the compiler cannot see the null, the CPU faults */
        *nowhere = 1;
    }
#endif
    /* STEP -1: the first time the phase is entered, whatever the step (a stop's checkpoint) */
    if (w->stall_s && phase == w->stall_phase && (step == w->stall_step || w->stall_step == -1)) {
        unsigned s = w->stall_s;
        w->stall_s = 0; /* once */
        _sleep_whole(s);
    }
}

void dlt_watchdog_stop(dlt_watchdog *w)
{
    if (!w->running)
        return;
    pthread_mutex_lock(&w->mu);
    w->stop = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    w->running = 0;
}
