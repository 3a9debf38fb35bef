/* SPDX-License-Identifier: Apache-2.0 */
/* schedule: the learning rate of Goyal et al.: peak = base x global batch / 256, linear warm-up
 * from peak/warmup_steps, then steps of 0.1 at given epochs or a cosine decay to zero. */
#ifndef DLT_SCHEDULE_H
#define DLT_SCHEDULE_H

#include <stdint.h>

typedef struct {
    double peak;
    int64_t steps_per_epoch;
    double warmup_epochs;
    int cosine; /* else step decay */
    int total_epochs;
    int milestones[8];
    int nmilestones;
} dlt_schedule;

double dlt_schedule_lr(const dlt_schedule *s, int64_t step);

#endif
