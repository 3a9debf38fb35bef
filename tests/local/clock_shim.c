/* SPDX-License-Identifier: Apache-2.0 */
/* A wall clock set off by DLT_SHIM_REALTIME_OFFSET seconds (LD_PRELOAD): as a node whose clock is
 * ahead or behind, or one stepped by an administrator, looks to the program. CLOCK_MONOTONIC is
 * left alone. The kernel's own realtime waits (a condition variable on CLOCK_REALTIME) keep the
 * true clock, so a deadline computed from the shifted clock is off by the offset there, as after a
 * real step. Built by tests/local/clock_skew.sh. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>

static double _offset(void)
{
    const char *v = getenv("DLT_SHIM_REALTIME_OFFSET");
    return v ? strtod(v, NULL) : 0.0;
}

int clock_gettime(clockid_t id, struct timespec *ts)
{
    static int (*real)(clockid_t, struct timespec *);
    int rc;
    if (!real)
        real = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
    rc = real(id, ts);
    if (rc == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE)) {
        double o = _offset();
        long long ns = (long long)ts->tv_nsec + (long long)((o - (double)(long long)o) * 1e9);
        ts->tv_sec += (time_t)(long long)o;
        while (ns < 0) {
            ns += 1000000000LL;
            ts->tv_sec--;
        }
        while (ns >= 1000000000LL) {
            ns -= 1000000000LL;
            ts->tv_sec++;
        }
        ts->tv_nsec = (long)ns;
    }
    return rc;
}

int gettimeofday(struct timeval *tv, void *tz)
{
    struct timespec ts;
    (void)tz;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
        return -1;
    tv->tv_sec = ts.tv_sec;
    tv->tv_usec = ts.tv_nsec / 1000;
    return 0;
}

time_t time(time_t *t)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (t)
        *t = ts.tv_sec;
    return ts.tv_sec;
}
