/* SPDX-License-Identifier: Apache-2.0 */
/* schedule: warm-up then step or cosine decay of the learning rate. */
#include "trainer/train/schedule.h"

#include <math.h>

double dlt_schedule_lr(const dlt_schedule *s, int64_t step)
{
    double spe = s->steps_per_epoch > 0 ? (double)s->steps_per_epoch : 1.0;
    double epoch = (double)step / spe;
    double warm_steps = s->warmup_epochs * spe;
    if (warm_steps >= 1.0 && (double)step < warm_steps)
        return s->peak * ((double)step + 1.0) / warm_steps;
    if (s->cosine) {
        double span = (double)s->total_epochs - s->warmup_epochs;
        double t = span > 0 ? (epoch - s->warmup_epochs) / span : 1.0;
        if (t > 1.0)
            t = 1.0;
        return 0.5 * s->peak * (1.0 + cos(M_PI * t));
    }
    {
        double lr = s->peak;
        for (int i = 0; i < s->nmilestones; i++)
            if (epoch >= (double)s->milestones[i])
                lr *= 0.1;
        return lr;
    }
}
