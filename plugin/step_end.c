/* SPDX-License-Identifier: Apache-2.0 */
/* step_end: a step ended from a thread, a grace after the cause. */
#include "config.h"

#include "step_end.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"

static void *_run(void *arg)
{
    dlt_step_end *e = arg;
    int rc, code;
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &e->at, NULL) == EINTR)
        ;
    errno = 0;
    rc = e->end(e->job, e->step);
    code = errno;
    if (e->said)
        e->said(rc == 0, rc == 0 ? 0 : code, e->what);
    return NULL;
}

int dlt_step_end_after(dlt_step_end *e, double delay_s, uint32_t job, uint32_t step, const char *what,
                       dlt_step_end_fn end, dlt_step_end_said_fn said)
{
    int rc;
    if (e->started)
        return 0;
    memset(e, 0, sizeof(*e));
    e->at = dlt_deadline_after(delay_s > 0 ? delay_s : 0);
    e->job = job;
    e->step = step;
    e->end = end;
    e->said = said;
    snprintf(e->what, sizeof(e->what), "%s", what);
    if ((rc = pthread_create(&e->thread, NULL, _run, e)) != 0)
        return -rc;
    e->started = 1;
    return 0;
}

void dlt_step_end_finish(dlt_step_end *e)
{
    if (!e->started)
        return;
    pthread_join(e->thread, NULL);
    e->started = 0;
}
