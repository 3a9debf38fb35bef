/* SPDX-License-Identifier: Apache-2.0 */
/* cuda_fused: the convolution + batch-norm chain of a training step (--fuse-bn on, fp16/bf16), the
 * six entries backend.h describes, in the form NVIDIA's MLPerf ResNet-50 takes through cuDNN's
 * graph API: each convolution writes its output's per-channel sum and sum of squares
 * (ConvBNfprop's genstats), a small kernel turns them into the batch norm's scale and bias (and
 * the running statistics), and a convolution that alone reads a batch norm + ReLU applies them to
 * its input on the fly (the prologue), so that batch norm's output is never stored, and its filter
 * gradient through the same prologue (ConvBNwgrad). The batch norms whose output is stored (before
 * a residual join, a downsample's, the stem's) are applied by one elementwise kernel; every batch
 * norm's backward is two passes over x and dy (cuda_kernels.cu), its ReLU mask recomputed from
 * x * scale + bias where the output was never stored.
 *
 * Each geometry's graphs are planned once, from the heuristics (engines shipped compiled first,
 * else ones cuDNN compiles at run time; deterministic ones under --deterministic), each plan run on
 * buffers of the shape before it is kept: cuDNN may finalize a plan it then refuses to execute. A geometry cuDNN has no
 * plan for is refused (-ENOTSUP, said once per run and per geometry under the network's summary), and the network runs
 * that convolution and its batch norm on their own; the legacy algorithms stay planned for every convolution (the data
 * gradient, and inference, use them). */
#include "config.h"

#include <cudnn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/backend/cuda_backend.h"
#include "trainer/backend/cuda_internal.h"
#include "trainer/backend/cuda_kernels.h"

/* Candidate plans per graph: the heuristics' best ranked; the first that runs is kept. */
#define FU_PLANS 3

void dlt_cu_fused_free(algo_entry *e)
{
    for (int f = 0; f < 2; f++)
        if (e->fu[f].pool) {
            dlt_cg_pool_free(e->fu[f].pool);
            free(e->fu[f].pool);
            e->fu[f].pool = NULL;
        }
}

/* Buffers of one geometry for trying its plans: every input a moderate 16-bit pattern (each byte
 * 0x3c: 1.05 in fp16, 0.011 in bf16). */
typedef struct {
    void *x, *w, *y, *sb, *dw;
    float *stats;
} fu_buffers;

static void _buffers_free(cuda_backend *c, fu_buffers *b)
{
    if (b->x || b->w || b->y || b->sb || b->dw || b->stats)
        cudaStreamSynchronize(c->s); /* the tries on them are done */
    cudaFree(b->x), cudaFree(b->w), cudaFree(b->y), cudaFree(b->sb), cudaFree(b->dw), cudaFree(b->stats);
    memset(b, 0, sizeof(*b));
}

static int _buffers(cuda_backend *c, const dlt_conv_shape *s, fu_buffers *b)
{
    size_t xn = (size_t)s->n * s->h * s->w * s->c, yn = (size_t)s->n * s->oh * s->ow * s->k,
           wn = (size_t)s->k * s->r * s->s * s->c;
    memset(b, 0, sizeof(*b));
    if (cudaMalloc(&b->x, xn * 2) != cudaSuccess || cudaMalloc(&b->w, wn * 2) != cudaSuccess ||
        cudaMalloc(&b->y, yn * 2) != cudaSuccess || cudaMalloc(&b->sb, (size_t)s->c * 4) != cudaSuccess ||
        cudaMalloc(&b->dw, wn * sizeof(float)) != cudaSuccess ||
        cudaMalloc((void **)&b->stats, (size_t)s->k * 2 * sizeof(float)) != cudaSuccess ||
        cudaMemsetAsync(b->x, 0x3c, xn * 2, c->s) != cudaSuccess ||
        cudaMemsetAsync(b->w, 0x3c, wn * 2, c->s) != cudaSuccess ||
        cudaMemsetAsync(b->y, 0x3c, yn * 2, c->s) != cudaSuccess ||
        cudaMemsetAsync(b->sb, 0x3c, (size_t)s->c * 4, c->s) != cudaSuccess) {
        cudaGetLastError();
        _buffers_free(c, b);
        return -1;
    }
    return 0;
}

/* The tensors of a forward (with or without the prologue) or a prologue's filter gradient, and the
 * pointers bound to them. sb: c scales then c biases of the run's type. */
static int _bind_fwd(const dlt_conv_shape *s, const void *x, const void *w, void *y, float *stats, const void *sb,
                     int64_t *uids, void **ptrs)
{
    int n = 0;
    uids[n] = DLT_CG_X, ptrs[n++] = (void *)x;
    uids[n] = DLT_CG_W, ptrs[n++] = (void *)w;
    uids[n] = DLT_CG_Y, ptrs[n++] = y;
    uids[n] = DLT_CG_SUM, ptrs[n++] = stats;
    uids[n] = DLT_CG_SQSUM, ptrs[n++] = stats + s->k;
    if (sb) {
        uids[n] = DLT_CG_SCALE, ptrs[n++] = (void *)sb;
        uids[n] = DLT_CG_BIAS, ptrs[n++] = (char *)sb + (size_t)s->c * 2;
    }
    return n;
}

static int _bind_wgrad(const dlt_conv_shape *s, const void *x, const void *sb, const void *dy, float *dw, int64_t *uids,
                       void **ptrs)
{
    uids[0] = DLT_CG_X, ptrs[0] = (void *)x;
    uids[1] = DLT_CG_Y, ptrs[1] = (void *)dy;
    uids[2] = DLT_CG_DW, ptrs[2] = dw;
    uids[3] = DLT_CG_SCALE, ptrs[3] = (void *)sb;
    uids[4] = DLT_CG_BIAS, ptrs[4] = (char *)sb + (size_t)s->c * 2;
    return 5;
}

/* The first of graph g's plans that runs on b (its engine into *engine), or NULL with why. */
static cudnnBackendDescriptor_t _first_that_runs(dlt_backend *be, dlt_cg_pool *pool, cudnnBackendDescriptor_t g,
                                                 int wgrad, const dlt_conv_shape *s, fu_buffers *b, int64_t *engine,
                                                 int *compiled, char *why, size_t wlen)
{
    cuda_backend *c = _cu(be);
    dlt_cg_plan plans[FU_PLANS];
    int64_t uids[8];
    void *ptrs[8];
    const int k = wgrad ? _bind_wgrad(s, b->x, b->sb, b->y, b->dw, uids, ptrs)
                        : _bind_fwd(s, b->x, b->w, b->y, b->stats, b->sb, uids, ptrs);
    int proposed = 0, n;
    /* Engines shipped compiled first; else the ones cuDNN compiles at run time (NVRTC: seconds per
     * graph at each launch, which the chain, asked for by name, is worth over a training run). */
    for (int pass = 0; pass < 2 && g; pass++) {
        unsigned need = (pass ? 0 : DLT_CG_PRECOMPILED) | (c->cfg.deterministic ? DLT_CG_DETERMINISTIC : 0);
        n = dlt_cg_plans(pool, c->dnn, g, c->ws_limit, need, plans, FU_PLANS, &proposed);
        for (int i = 0; i < n; i++) {
            if ((pass && !(plans[i].lacks & DLT_CG_PRECOMPILED)) || dlt_cu_workspace(be, plans[i].workspace) != 0)
                continue; /* the second pass's shipped-compiled plans were tried in the first */
            if (dlt_cudnn_ok(dlt_cg_execute(pool, c->dnn, plans[i].plan, k, uids, ptrs, c->ws)) &&
                cudaStreamSynchronize(c->s) == cudaSuccess) {
                *engine = plans[i].engine;
                *compiled = pass;
                return plans[i].plan;
            }
            cudaGetLastError();
        }
    }
    snprintf(why, wlen, "%s: %d engine configuration(s) proposed, none ran: %s",
             wgrad ? "the filter gradient through the prologue" : "the forward with statistics", proposed,
             pool->err[0] ? pool->err : "no plan");
    return NULL;
}

/* Plans geometry e's form `prologue` once: its forward with statistics, and with the prologue its
 * filter gradient (fp32, into the parameter gradient directly). */
static void _decide(dlt_backend *be, dlt_op *op, algo_entry *e, int prologue)
{
    cuda_backend *c = _cu(be);
    const dlt_conv_shape *s = &op->cs;
    cudnnBackendDescriptor_t g;
    fu_buffers b;
    int had = be->err->code != 0;
    fused_form *f = &e->fu[prologue];
    int rt[2] = {0, 0}; /* the plans kept compile at run time */
    f->state = -1;
    if (!(f->pool = calloc(1, sizeof(*f->pool)))) {
        snprintf(f->why, sizeof(f->why), "out of host memory");
        return;
    }
    if (_buffers(c, s, &b) != 0) {
        snprintf(f->why, sizeof(f->why), "no device memory to try its plans");
        return;
    }
    g = dlt_cg_fprop_stats_graph(f->pool, c->dnn, s, c->cdt, prologue);
    if (!g)
        snprintf(f->why, sizeof(f->why), "the forward with statistics: %s", f->pool->err);
    else if ((f->fwd = _first_that_runs(be, f->pool, g, 0, s, &b, &f->fwd_engine, &rt[0], f->why, sizeof(f->why))) &&
             prologue) {
        /* The filter gradient in fp32 straight into the parameter gradient; else as NVIDIA's
         * ConvBNwgrad sample builds it (intermediates and dW in the run's type), cast after into
         * the gradient through the shared scratch, as the legacy filter gradient is. */
        for (int lowp = 0; lowp < 2 && !f->wgrad; lowp++) {
            g = dlt_cg_wgrad_graph(f->pool, c->dnn, s, c->cdt, lowp ? c->cdt : CUDNN_DATA_FLOAT,
                                   lowp ? DLT_CG_PRO_LOWP : DLT_CG_PRO_F32);
            if (!g)
                snprintf(f->why, sizeof(f->why), "the filter gradient through the prologue: %s", f->pool->err);
            else if ((f->wgrad =
                          _first_that_runs(be, f->pool, g, 1, s, &b, &f->wgrad_engine, &rt[1], f->why, sizeof(f->why))))
                f->wgrad_lowp = lowp;
        }
        if (f->wgrad_lowp &&
            _grow(be, &c->dw_scratch, NULL, &c->dw_scratch_size, (size_t)s->k * s->r * s->s * s->c * 2, c->s) != 0) {
            f->wgrad = NULL;
            snprintf(f->why, sizeof(f->why), "no device memory for its filter gradient's cast");
        }
    }
    _buffers_free(c, &b);
    if (f->fwd && (!prologue || f->wgrad)) {
        f->state = 1;
        if ((rt[0] || rt[1]) && !c->fu_runtime++)
            fprintf(stderr,
                    "dltrain: convolution + batch-norm chain: cuDNN has no engine shipped compiled for convolution "
                    "%d->%d %dx%d/%d%s; it compiles one at run time (NVRTC: seconds per geometry at each launch; "
                    "said once)\n",
                    s->c, s->k, s->r, s->s, s->stride, prologue ? " with the batch norm before" : "");
    }
    if (!had)
        dlt_err_clear(be->err); /* a failure here is a refusal, said by the caller */
}

static int _fuse_plan(dlt_backend *be, dlt_op *op, int prologue)
{
    cuda_backend *c = _cu(be);
    const dlt_conv_shape *s = &op->cs;
    algo_entry *e = (algo_entry *)op->algo;
    const char *why = NULL;
    prologue = !!prologue;
    if (!e)
        return dlt_fail(be->err, -EPROTO, "a convolution + batch-norm chain asked of an unplanned convolution");
    if (c->dt == DLT_DT_F32)
        why = "fp32 and tf32 keep each op on its own";
    else if (op->cp != s->c)
        why = "the padded image input";
    else if (s->c % 8 || s->k % 8)
        why = "channels not a multiple of 8 (16-byte per-channel vectors)";
    else if (!e->fu[prologue].state)
        _decide(be, op, e, prologue);
    if (!why && e->fu[prologue].state < 0)
        why = e->fu[prologue].why;
    if (why) {
        /* cuDNN's refusals once per geometry and form; the shapes this file refuses itself once per
         * run (the padded stem, always refused, is documented, not said); the network's summary
         * counts them all. */
        int *said = !e->fu[prologue].state ? &c->fu_said_shape : &e->fu[prologue].said;
        if (op->cp == s->c && !*said) {
            *said = 1;
            fprintf(stderr,
                    "dltrain: convolution %d->%d %dx%d/%d on %dx%d: no fused convolution + batch norm%s (%s); %s\n",
                    s->c, s->k, s->r, s->s, s->stride, s->h, s->w, prologue ? " with the batch norm before" : "", why,
                    prologue ? "that batch norm's output is stored instead" : "it and its batch norm run on their own");
        }
        return dlt_fail(be->err, -ENOTSUP, "%s", why);
    }
    return 0;
}

/* The planned form of op into *f, its weights bound to the current plan and every pointer aligned to
 * 16 bytes as the graphs' tensors declare; else a negative status with err saying what is wrong. */
static int _form(dlt_backend *be, const dlt_op *op, int prologue, const void *const *ptrs, int n, const fused_form **f)
{
    int rc;
    for (int i = 0; i < n; i++)
        if ((uintptr_t)ptrs[i] % 16)
            return dlt_fail(be->err, -EINVAL,
                            "the convolution + batch-norm chain: a buffer not 16-byte aligned (%p) for convolution "
                            "%d->%d",
                            ptrs[i], op->cs.c, op->cs.k);
    if ((rc = dlt_cu_conv_weights_ok(be, op)) != 0)
        return rc;
    if (!op->algo || op->algo->fu[prologue].state != 1)
        return dlt_fail(be->err, -EPROTO,
                        "the convolution + batch-norm chain's %s of a convolution it was not planned for",
                        prologue ? "prologue" : "statistics");
    *f = &op->algo->fu[prologue];
    return 0;
}

static int _executed(dlt_backend *be, const dlt_cg_pool *pool, cudnnStatus_t st, const char *what)
{
    if (dlt_cudnn_ok(st))
        return 0;
    return dlt_fail(be->err, -EIO, "%s through cuDNN's graph API: %s", what, pool->err);
}

static int _conv_fwd_stats(dlt_backend *be, dlt_op *op, const float *x, const float *sb, float *y, float *stats)
{
    cuda_backend *c = _cu(be);
    const dlt_conv_shape *s = &op->cs;
    int64_t uids[8];
    void *ptrs[8];
    const int n = _bind_fwd(s, x, op->w, y, stats, sb, uids, ptrs);
    const fused_form *f = NULL;
    int rc = _form(be, op, sb != NULL, (const void *const *)ptrs, n, &f);
    if (rc != 0)
        return rc;
    /* The statistics start from zero: cuDNN does not say whether genstats writes or adds, and its
     * samples zero them. */
    DLT_TRY(be->err, DLT_CUDA_CHECK(be->err, cudaMemsetAsync(stats, 0, (size_t)s->k * 2 * sizeof(float), c->s)));
    return _executed(be, f->pool, dlt_cg_execute(f->pool, c->dnn, f->fwd, n, uids, ptrs, c->ws),
                     "the convolution with its batch norm's statistics");
}

static int _conv_bwd_weights_pro(dlt_backend *be, dlt_op *op, const float *x, const float *sb, const float *dy,
                                 float *dw)
{
    cuda_backend *c = _cu(be);
    int64_t uids[8];
    void *ptrs[8];
    const fused_form *pf = op->algo ? &op->algo->fu[1] : NULL;
    const int lowp = pf && pf->wgrad_lowp;
    const size_t wn = (size_t)op->cs.k * op->cs.r * op->cs.s * op->cs.c;
    const int n = _bind_wgrad(&op->cs, x, sb, dy, lowp ? (float *)c->dw_scratch : dw, uids, ptrs);
    const fused_form *f = NULL;
    int rc = _form(be, op, 1, (const void *const *)ptrs, n, &f);
    if (rc == 0)
        rc = _executed(be, f->pool, dlt_cg_execute(f->pool, c->dnn, f->wgrad, n, uids, ptrs, c->ws),
                       "the filter gradient through the batch norm before");
    if (rc == 0 && lowp) /* dW in the run's type (the ConvBNwgrad sample's form): into the float gradient */
        DLT_TRY(be->err, DLT_CUDA_CHECK(be->err, dlt_k_cast_to_f32(c->dw_scratch, c->dt, dw, wn, (dlt_stream)c->s)));
    return rc;
}

static size_t _pixels(const dlt_op *op)
{
    return (size_t)op->as.n * op->as.h * op->as.w;
}

static int _bn_finalize(dlt_backend *be, dlt_op *op, const float *stats, const float *gamma, const float *beta,
                        float *mean, float *var, float *sb)
{
    cuda_backend *c = _cu(be);
    const double m = (double)_pixels(op);
    DLT_TRY(be->err, DLT_CUDA_CHECK(be->err, dlt_k_bn_finalize(stats, gamma, beta, op->as.c, m, op->eps, mean, var, sb,
                                                               c->dt, op->run_mean, op->run_var, (float)op->run_factor,
                                                               m > 1 ? (float)(m / (m - 1)) : 1.f, (dlt_stream)c->s)));
    return 0;
}

static int _bn_apply(dlt_backend *be, dlt_op *op, const float *x, const float *sb, const float *z, const float *zsb,
                     int relu, float *y)
{
    DLT_TRY(be->err, DLT_CUDA_CHECK(be->err, dlt_k_bn_apply(x, sb, z, zsb, relu, y, _cu(be)->dt, _pixels(op), op->as.c,
                                                            (dlt_stream)_cu(be)->s)));
    return 0;
}

static int _bn_bwd_fused(dlt_backend *be, dlt_op *op, const float *x, const float *y, const float *sb, int relu,
                         const float *dy, const float *gamma, const float *mean, const float *var, float *dx, float *dz,
                         float *dgamma, float *dbeta)
{
    cuda_backend *c = _cu(be);
    if (!c->fu_scratch || c->fu_scratch_size < dlt_k_bn_bwd_scratch(op->as.c))
        return dlt_fail(be->err, -EPROTO, "the batch norm's backward has no scratch: planned without --fuse-bn");
    DLT_TRY(be->err,
            DLT_CUDA_CHECK(be->err, dlt_k_bn_bwd(x, y, sb, relu, dy, dz, mean, var, gamma, op->eps, dx, dgamma, dbeta,
                                                 c->dt, _pixels(op), op->as.c, c->fu_scratch, (dlt_stream)c->s)));
    return 0;
}

void dlt_cu_fused_ops(dlt_backend_ops *ops)
{
    ops->conv_fuse_plan = _fuse_plan;
    ops->conv_fwd_stats = _conv_fwd_stats;
    ops->conv_bwd_weights_pro = _conv_bwd_weights_pro;
    ops->bn_finalize = _bn_finalize;
    ops->bn_apply = _bn_apply;
    ops->bn_bwd_fused = _bn_bwd_fused;
}
