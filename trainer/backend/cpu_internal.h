/* SPDX-License-Identifier: Apache-2.0 */
/* cpu_internal: what the two files of the CPU backend share: cpu_onednn.c (oneDNN primitives:
 * convolutions, batch norm, max pooling; memory; lifetime) and cpu_loops.c (the plain loops:
 * elementwise work, average pooling, input, loss, results, the optimizer, the FC layer and its
 * GEMM), and oneDNN's check. Not for use outside trainer/backend/cpu_*.c. */
#ifndef DLT_CPU_INTERNAL_H
#define DLT_CPU_INTERNAL_H

#include <errno.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdint.h>
#include <string.h>

#include "common/status.h"
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
    /* Two staging buffers for the convolutions that run in oneDNN's blocked activation layout
     * (cpu_onednn.c, staged_arg): each call reorders its NHWC inputs in and its outputs out, so
     * only one call's copies exist at a time; sized for the largest at planning. */
    void *stage[2];
    size_t stage_size[2];
    /* --precision bf16: activations (and their gradients) are bfloat16 between every op, as
     * PyTorch's CPU autocast keeps them; parameters, their gradients, BN statistics and the
     * optimizer stay float. The FC layer and the loss widen their few activations to float in
     * fc_scratch (grown as needed). */
    int bf16;
    float *fc_scratch;
    size_t fc_scratch_n;
} cpu_backend;

/* bfloat16 as the CPU backend stores it: the top half of an IEEE float. Widening is exact. */
typedef uint16_t dlt_bf16;

static inline float _bf16_to_f32(dlt_bf16 h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof(f));
    return f;
}

/* Round to nearest, ties to even (oneDNN's and PyTorch's rounding); a NaN stays a NaN (quiet),
 * where the rounding carry would otherwise turn some into infinities. */
static inline dlt_bf16 _f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (dlt_bf16)((u >> 16) | 0x40u);
    return (dlt_bf16)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* n bf16 activations at act widened into floats, and n floats rounded into bf16 activations:
 * act_to_float / act_from_float, and the few activations the FC layer and the loss compute on in
 * float. */
static inline void _bf16_widen(const void *act, float *f, size_t n)
{
    const dlt_bf16 *h = act;
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++)
        f[i] = _bf16_to_f32(h[i]);
}

static inline void _bf16_narrow(const float *f, void *act, size_t n)
{
    dlt_bf16 *h = act;
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++)
        h[i] = _f32_to_bf16(f[i]);
}

static inline cpu_backend *_cpu(dlt_backend *be)
{
    return (cpu_backend *)be;
}

static inline const char *_dnnl_status_str(dnnl_status_t s)
{
    switch (s) {
    case dnnl_out_of_memory: return "out of memory";
    case dnnl_invalid_arguments: return "invalid arguments";
    case dnnl_unimplemented: return "unimplemented (no kernel for this shape/layout/type on this CPU)";
    case dnnl_iterator_ends: return "iterator ends";
    case dnnl_runtime_error: return "runtime error";
    case dnnl_not_required: return "not required";
    default: return "unknown oneDNN status";
    }
}

/* oneDNN's check: 0, or -EIO with err saying file:line, the call and oneDNN's status. */
static inline int _dnnl_check_at(dlt_err *err, dnnl_status_t s, const char *file, int line, const char *call)
{
    if (s == dnnl_success)
        return 0;
    return dlt_fail_at(err, file, line, -EIO, 0, "%s:%d: %s failed: %s", file, line, call, _dnnl_status_str(s));
}
#define DLT_DNNL_CHECK(err, call) _dnnl_check_at((err), (call), __FILE__, __LINE__, #call)

/* cpu_loops.c: its entries of the ops table (and dlt_backend_cpu_gemm, the FC layer's). */
void dlt_cpu_loop_ops(dlt_backend_ops *ops);
/* Two of them, which the batch norm's ReLU forms (cpu_onednn.c) call directly where oneDNN cannot
 * fuse the ReLU (after a residual add): the ops table's add_relu and relu_bwd. */
int dlt_cpu_add_relu(dlt_backend *be, float *y, const float *add, size_t n);
int dlt_cpu_relu_bwd(dlt_backend *be, const float *y, const float *dy, float *dz, size_t n);

#endif
