/* SPDX-License-Identifier: Apache-2.0 */
/* clock: the one monotonic clock of the trainer and libdltpmix (phase timers, deadlines, rates). */
#ifndef DLT_CLOCK_H
#define DLT_CLOCK_H

#include <time.h>

/* Seconds on CLOCK_MONOTONIC. */
static inline double dlt_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
