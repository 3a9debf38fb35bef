/* SPDX-License-Identifier: Apache-2.0 */
/* cpu_internal: what the two files of the CPU backend share: cpu_onednn.c (oneDNN primitives:
 * convolutions, batch norm, max pooling; memory; lifetime) and cpu_loops.c (the plain loops:
 * elementwise work, average pooling, input, loss, results, the optimizer, the FC layer). Not for
 * use outside trainer/backend/cpu_*.c. */
#ifndef DLT_CPU_INTERNAL_H
#define DLT_CPU_INTERNAL_H

#include <oneapi/dnnl/dnnl.h>

#include "trainer/backend/backend.h"

typedef struct {
    dlt_backend base;
    dlt_backend_ops ops; /* g_cpu_ops and the entries of cpu_loops.c */
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    double results[DLT_RES_COUNT];
    /* The flat optimizer's buffer and segments (sgd_plan). */
    float *params;
    size_t nparams;
    dlt_param_segment *segs;
    int nsegs;
    /* Batches staged by input_stage, oldest first. */
    struct {
        const uint8_t *src;
        size_t pixels;
    } staged[DLT_INPUT_STAGED];
    int nstaged;
    /* Convolutions with bound weights: their blocked copies follow every update. */
    dlt_op **bound;
    int nbound, bound_cap;
    /* cpu_onednn.c's refresh of those copies, for sgd_step (cpu_loops.c) to call after an update:
     * given at creation, so that cpu_loops.c needs nothing of cpu_onednn.c's (the two files form a
     * tree: cpu_onednn.c creates the backend and takes cpu_loops.c's entries), and called directly,
     * not through the ops table, so a step makes exactly the table calls it counts. */
    int (*refresh_bound)(dlt_backend *be);
} cpu_backend;

static inline cpu_backend *_cpu(dlt_backend *be)
{
    return (cpu_backend *)be;
}

/* cpu_loops.c: its entries of the ops table. */
void dlt_cpu_loop_ops(dlt_backend_ops *ops);

#endif
