/* SPDX-License-Identifier: Apache-2.0 */
/* poll: a bounded busy-wait with backoff. */
#include "config.h"

#include "common/poll.h"

#include <errno.h>
#include <sched.h>
#include <time.h>

#include "common/clock.h"
#include "common/tunables.h"

int dlt_poll(int (*done)(void *arg), void *arg, double timeout_s)
{
    const double end = timeout_s > 0 ? dlt_now() + timeout_s : 0;
    for (unsigned spin = 0;; spin++) {
        int r = done(arg);
        if (r != 0)
            return r > 0 ? 0 : r;
        if (timeout_s > 0 && dlt_now() > end)
            return -ETIMEDOUT;
        if (spin < DLT_POLL_SPINS) {
            sched_yield();
        } else {
            struct timespec ts = {0, DLT_POLL_SLEEP_NS};
            nanosleep(&ts, NULL);
        }
    }
}
