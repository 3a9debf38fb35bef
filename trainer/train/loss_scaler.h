/* SPDX-License-Identifier: Apache-2.0 */
/* loss_scaler: dynamic loss scaling for fp16 mixed precision. The loss gradient is multiplied by
 * the scale before backward; a step whose gradients overflow is skipped and the scale backs off;
 * after `window` clean steps in a row the scale grows. Pure state: the trainer owns the checks. */
#ifndef DLT_LOSS_SCALER_H
#define DLT_LOSS_SCALER_H

#include <stdint.h>

typedef struct {
    int enabled; /* 0: scale stays 1 and no step is ever skipped */
    double scale;
    double growth;  /* factor after a clean window (2) */
    double backoff; /* factor after an overflow (0.5) */
    int window;     /* clean steps before growing (2000) */
    double min_scale, max_scale;
    int clean;       /* clean steps since the last change */
    int64_t skipped; /* steps skipped for overflow, in total */
    int64_t grown;   /* times the scale grew */
} dlt_loss_scaler;

/* initial <= 0: 65536 (2^16). window <= 0: 2000. */
void dlt_loss_scaler_init(dlt_loss_scaler *s, int enabled, double initial, int window);

/* Records the outcome of a step's gradient check. Returns 1 when the update may be applied,
 * 0 when the step must be skipped (overflow: the scale has backed off). */
int dlt_loss_scaler_update(dlt_loss_scaler *s, int overflow);

/* The factor the summed gradients are multiplied by to undo the scale (and average over world). */
static inline double dlt_loss_scaler_unscale(const dlt_loss_scaler *s, int world)
{
    return 1.0 / (s->scale * (double)world);
}

#endif
