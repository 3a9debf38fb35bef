/* SPDX-License-Identifier: Apache-2.0 */
/* clock: the one monotonic clock of the trainer and libdltpmix (phase timers, deadlines, rates). */
#ifndef DLT_CLOCK_H
#define DLT_CLOCK_H

#include <pthread.h>
#include <time.h>

/* Seconds on CLOCK_MONOTONIC. */
static inline double dlt_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The absolute CLOCK_MONOTONIC time seconds (>= 0, fractions kept) from now: a deadline for
 * clock_nanosleep(TIMER_ABSTIME) and for a condition variable made by dlt_cond_init_monotonic. */
static inline struct timespec dlt_deadline_after(double seconds)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += (time_t)seconds;
    ts.tv_nsec += (long)((seconds - (double)(time_t)seconds) * 1e9);
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

/* A condition variable whose timed waits run on CLOCK_MONOTONIC: a wall clock stepped back or
 * forward neither stretches nor cuts them. */
static inline void dlt_cond_init_monotonic(pthread_cond_t *cv)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(cv, &attr);
    pthread_condattr_destroy(&attr);
}

#endif
