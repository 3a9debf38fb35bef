/* SPDX-License-Identifier: Apache-2.0 */
/* loss_scaler: the dynamic loss-scale state machine. */
#include "config.h"

#include "trainer/train/loss_scaler.h"

#include <string.h>

#include "common/tunables.h"

void dlt_loss_scaler_init(dlt_loss_scaler *s, int enabled, double initial, int window)
{
    memset(s, 0, sizeof(*s));
    s->enabled = enabled;
    s->growth = 2.0;
    s->backoff = 0.5;
    s->window = window > 0 ? window : DLT_DEFAULT_LOSS_SCALE_WINDOW;
    s->min_scale = 1.0;
    s->max_scale = 16777216.0; /* 2^24: beyond it fp32 master updates gain nothing */
    s->scale = enabled ? (initial > 0 ? initial : 65536.0) : 1.0;
    if (s->scale > s->max_scale)
        s->scale = s->max_scale;
}

int dlt_loss_scaler_update(dlt_loss_scaler *s, int overflow)
{
    if (!s->enabled)
        return !overflow;
    if (overflow) {
        s->skipped++;
        s->clean = 0;
        s->scale *= s->backoff;
        if (s->scale < s->min_scale)
            s->scale = s->min_scale;
        return 0;
    }
    if (++s->clean >= s->window) {
        s->clean = 0;
        if (s->scale * s->growth <= s->max_scale) {
            s->scale *= s->growth;
            s->grown++;
        }
    }
    return 1;
}
