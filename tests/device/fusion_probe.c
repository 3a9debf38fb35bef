/* SPDX-License-Identifier: Apache-2.0 */
/* fusion_probe: which of ResNet-50's convolution + batch-norm fusions cuDNN's graph API offers on
 * this GPU in fp16, and what they cost against today's unfused ops, measured before the trainer
 * is changed (issue: conv + BN fused through the graph API). For each shape, NHWC fp16 at batch B:
 *   conv      cudnnConvolutionForward alone (the trainer's op; its algorithm from cuDNN's ranking)
 *   bn        cudnnBatchNormalizationForwardTraining on its output (spatial persistent): the
 *             statistics pass and the apply pass a fusion would remove
 *   conv+gs   graph: Y = conv(X, W) with per-channel sum and sum of squares of Y (genstats)
 *   sbr+conv+gs graph: X' = relu(X * scale + bias) (the previous layer's batch norm applied in
 *             this convolution's prologue), Y = conv(X', W), genstats(Y): cuDNN's ConvBNfprop
 *             (the trainer's --fuse-bn on runs conv+gs and this graph)
 *   wgrad-f32 graph: the filter gradient written in fp32 from fp16 X and dY, against the legacy
 *             fp16 one (which the trainer then casts to its fp32 gradient: a pass the graph saves;
 *             the trainer's --wgrad-fp32 runs this graph)
 *   sbr+wgrad-f32 graph: the same with X' = relu(X * scale + bias) applied in its prologue (cuDNN's
 *             ConvBNwgrad: with sbr+conv+gs, the batch norm's output is never stored; --fuse-bn on
 *             runs it, or NVIDIA's sample's form with an fp16 dW where only that is offered), on the
 *             prologue shapes, against the legacy one on X' prepared on the host
 * Each graph is built as cuDNN's documentation names the pattern (virtual fp32 intermediates,
 * fp32 statistics [1,C,1,1]); its engines come from heuristics mode A, then the fallback list; the
 * first execution plan that finalizes is run. A graph cuDNN refuses is printed as refused with
 * cuDNN's own message (cudnnGetLastErrorString), not counted as a failure: that is the finding.
 * A graph that runs is checked: Y against the legacy convolution of the same (host-prepared) input
 * (max |d| / max |ref| <= 1e-2), the sums against double sums of the Y it wrote (1e-3 of the sum
 * of |y|). Prints one line per shape and graph, a total, "N passed, M failed"; exits 0 as skipped
 * without a GPU. --self-test checks the host fp16 conversions (no GPU needed).
 * Usage: fusion_probe [--batch B] [--all] [--budget SECONDS] | --self-test */
#include "config.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime.h>
#include <cudnn.h>

#include "trainer/backend/cudnn_graph.h"

typedef struct {
    const char *name;
    int c, k, h, r, stride; /* input channels, output channels, input size, filter size, stride */
    int prologue;           /* its input is relu(bn(previous conv)), no residual: ConvBNfprop's prologue applies (a
                             * block's first convolution reads relu(bn + identity), the first one the pooling) */
} conv_shape;

/* ResNet-50's convolutions that a batch norm follows, one per distinct geometry (torchvision's
 * v1.5: the stride on the 3x3); the first six are the default set (layer1 and layer3's heaviest
 * in activation traffic), --all runs every one. */
static const conv_shape g_shapes[] = {
    {"layer1 1x1 64->64", 64, 64, 56, 1, 1, 0},
    {"layer1 3x3 64->64", 64, 64, 56, 3, 1, 1},
    {"layer1 1x1 64->256", 64, 256, 56, 1, 1, 1},
    {"layer1 1x1 256->64", 256, 64, 56, 1, 1, 0},
    {"layer3 3x3 256->256", 256, 256, 14, 3, 1, 1},
    {"layer3 1x1 256->1024", 256, 1024, 14, 1, 1, 1},
    {"stem 7x7 3->64 (4 padded)", 4, 64, 224, 7, 2, 0},
    {"layer2 1x1 256->128", 256, 128, 56, 1, 1, 0},
    {"layer2 3x3 128->128 s2", 128, 128, 56, 3, 2, 1},
    {"layer2 1x1 128->512", 128, 512, 28, 1, 1, 1},
    {"layer2 down 1x1 256->512 s2", 256, 512, 56, 1, 2, 0},
    {"layer2 3x3 128->128", 128, 128, 28, 3, 1, 1},
    {"layer3 1x1 512->256", 512, 256, 28, 1, 1, 0},
    {"layer3 3x3 256->256 s2", 256, 256, 28, 3, 2, 1},
    {"layer3 down 1x1 512->1024 s2", 512, 1024, 28, 1, 2, 0},
    {"layer4 1x1 1024->512", 1024, 512, 14, 1, 1, 0},
    {"layer4 3x3 512->512 s2", 512, 512, 14, 3, 2, 1},
    {"layer4 1x1 512->2048", 512, 2048, 7, 1, 1, 1},
    {"layer4 down 1x1 1024->2048 s2", 1024, 2048, 14, 1, 2, 0},
    {"layer4 3x3 512->512", 512, 512, 7, 3, 1, 1},
};
#define DEFAULT_SHAPES 6

typedef struct {
    cudnnHandle_t h;
    cudaStream_t s;
    int passed, failed;
    char err[512];
} probe;

/* ------------------------------------------------------------------ host fp16 */

static uint16_t _f2h(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u, mant = x & 0x7fffffu;
    int exp = (int)((x >> 23) & 0xff) - 127 + 15;
    if (((x >> 23) & 0xff) == 0xff)
        return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0));
    if (exp >= 31)
        return (uint16_t)(sign | 0x7c00u);
    if (exp <= 0) { /* subnormal or zero: shift the implicit bit in, round to nearest even */
        if (exp < -10)
            return (uint16_t)sign;
        mant |= 0x800000u;
        int shift = 14 - exp;
        uint32_t h = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1)))
            h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = ((uint32_t)exp << 10) | (mant >> 13), rem = mant & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1)))
        h++; /* a carry into the exponent is the right rounding, to infinity included */
    return (uint16_t)(sign | h);
}

static float _h2f(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ffu, x;
    float f;
    if (exp == 0)
        return (sign ? -1.f : 1.f) * ldexpf((float)mant, -24);
    x = exp == 31 ? sign | 0x7f800000u | (mant << 13) : sign | ((exp - 15 + 127) << 23) | (mant << 13);
    memcpy(&f, &x, 4);
    return f;
}

/* ------------------------------------------------------------------ checks */

static int _cuda(probe *p, cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return 0;
    snprintf(p->err, sizeof(p->err), "%s: %s", what, cudaGetErrorString(e));
    return -1;
}

/* A cuDNN call's failure, with cuDNN's own last message (which names the rule a graph broke). */
static int _dnn(probe *p, cudnnStatus_t st, const char *what)
{
    if (st == CUDNN_STATUS_SUCCESS)
        return 0;
    dlt_cg_status_words(st, what, p->err, sizeof(p->err));
    return -1;
}
#define DNN(p, call) _dnn((p), (call), #call)
#define CU(p, call) _cuda((p), (call), #call)

/* The larger of a running worst difference and d, a NaN kept (fmax would drop it, and a graph that
 * wrote NaNs would pass its check). */
static double _worst(double w, double d)
{
    return (d > w || isnan(d)) ? d : w;
}

/* ------------------------------------------------------------------ graph API (cudnn_graph.h) */

/* The probe's shape as the trainer's convolution shape ("same" padding, square). */
static dlt_conv_shape _cs(const conv_shape *s, int n)
{
    dlt_conv_shape cs = {n, s->c, s->h, s->h, s->k, s->r, s->r, s->stride, s->r / 2, 0, 0};
    cs.oh = cs.ow = dlt_out_size(s->h, s->r, s->stride, s->r / 2);
    return cs;
}

/* ------------------------------------------------------------------ one shape */

typedef struct {
    void *x, *xp, *w, *y, *yref, *scale, *bias, *ws, *dwh; /* dwh: the legacy fp16 filter gradient */
    float *dw;                                             /* the graph's fp32 one */
    float *sum, *sq, *bn_mean, *bn_inv, *gamma, *beta;
    size_t ws_size;
} buffers;

/* ms per call of fn over iters calls after 3 warm ones, on the probe's stream. */
typedef int (*timed_fn)(probe *p, void *arg);
static double _time(probe *p, timed_fn fn, void *arg, int iters)
{
    cudaEvent_t a, b;
    float ms = -1;
    if (CU(p, cudaEventCreate(&a)) || CU(p, cudaEventCreate(&b)))
        return -1;
    for (int i = 0; i < 3; i++)
        if (fn(p, arg))
            goto out;
    cudaEventRecord(a, p->s);
    for (int i = 0; i < iters; i++)
        if (fn(p, arg))
            goto out;
    cudaEventRecord(b, p->s);
    if (CU(p, cudaEventSynchronize(b)) || CU(p, cudaEventElapsedTime(&ms, a, b)))
        ms = -1;
    else
        ms /= (float)iters;
out:
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return ms;
}

typedef struct {
    cudnnTensorDescriptor_t xd, yd, bnd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
    cudnnConvolutionFwdAlgo_t algo;
    cudnnBatchNormMode_t bn_mode; /* persistent, or spatial where cuDNN refuses persistent */
    buffers *b;
    const void *x;
    void *y;
} legacy;

static int _legacy_conv(probe *p, void *arg)
{
    legacy *l = arg;
    float one = 1.f, zero = 0.f;
    return DNN(p, cudnnConvolutionForward(p->h, &one, l->xd, l->x, l->wd, l->b->w, l->cd, l->algo, l->b->ws,
                                          l->b->ws_size, &zero, l->yd, l->y));
}

static int _legacy_bn(probe *p, void *arg)
{
    legacy *l = arg;
    float one = 1.f, zero = 0.f;
    cudnnStatus_t st = cudnnBatchNormalizationForwardTraining(p->h, l->bn_mode, &one, &zero, l->yd, l->y, l->yd,
                                                              l->b->yref, l->bnd, l->b->gamma, l->b->beta, 0., NULL,
                                                              NULL, 1e-5, l->b->bn_mean, l->b->bn_inv);
    if (CUDNN_STATUS_CATEGORY(st) == CUDNN_STATUS_NOT_SUPPORTED && l->bn_mode == CUDNN_BATCHNORM_SPATIAL_PERSISTENT) {
        l->bn_mode = CUDNN_BATCHNORM_SPATIAL; /* as the trainer's probe falls back */
        return _legacy_bn(p, arg);
    }
    return _dnn(p, st, "cudnnBatchNormalizationForwardTraining");
}

typedef struct {
    dlt_cg_pool *pool;
    cudnnBackendDescriptor_t plan;
    const int64_t *uids;
    void **ptrs;
    int n;
    void *ws;
} graph_run;

static int _graph_exec(probe *p, void *arg)
{
    graph_run *r = arg;
    if (dlt_cg_execute(r->pool, p->h, r->plan, r->n, r->uids, r->ptrs, r->ws) == CUDNN_STATUS_SUCCESS)
        return 0;
    snprintf(p->err, sizeof(p->err), "%s", r->pool->err);
    return -1;
}

static double _now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Graph g made ready and run once: its plan (printed as refused when cuDNN has none: returns 1)
 * within the probe's workspace, over the cnt tensors; 0 with *r set, or -1 after printing and
 * counting the failure. */
static int _ready(probe *p, dlt_cg_pool *pool, cudnnBackendDescriptor_t g, const char *name, const char *label,
                  const int64_t *uids, void **ptrs, int cnt, buffers *b, graph_run *r, int64_t *engine, int *proposed)
{
    double t0 = _now();
    dlt_cg_plan plan;
    if (dlt_cg_plans(pool, p->h, g, b->ws_size, 0, &plan, 1, proposed) != 1) {
        printf("fusion: %-30s %-12s refused: %d engine configuration(s) proposed, none finalized: %s\n", name, label,
               *proposed, pool->err);
        return 1;
    }
    *engine = plan.engine;
    /* What the trainer's --wgrad-fp32 auto would make of this engine, and the plan's cost to make. */
    printf("fusion: %-30s %-12s engine %lld%s%s%s, plan made in %.2f s\n", name, label, (long long)plan.engine,
           plan.lacks & DLT_CG_PRECOMPILED ? ", compiled at run time" : ", shipped compiled",
           plan.lacks & DLT_CG_DETERMINISTIC ? ", non-deterministic" : "",
           plan.lacks & DLT_CG_FULL_PRECISION ? ", reduced precision" : "", _now() - t0);
    r->pool = pool, r->plan = plan.plan, r->uids = uids, r->ptrs = ptrs, r->n = cnt, r->ws = b->ws;
    if (_graph_exec(p, r) || CU(p, cudaStreamSynchronize(p->s))) {
        printf("fusion: %-30s %-12s FAIL run (engine %lld): %s\n", name, label, (long long)*engine, p->err);
        p->failed++;
        return -1;
    }
    return 0;
}

/* Runs one graph (prologue or not) on the shape, checks it, prints its line. Returns its ms, or
 * -1 when cuDNN refused it (said) or it failed (counted). */
static double _probe_graph(probe *p, const conv_shape *s, int n, int prologue, buffers *b, legacy *ref, size_t ysz)
{
    dlt_cg_pool pool = {.n = 0};
    dlt_conv_shape cs = _cs(s, n);
    cudnnBackendDescriptor_t g;
    int64_t engine = -1;
    int proposed = 0;
    double ms = -1;
    const char *label = prologue ? "sbr+conv+gs" : "conv+gs";
    if (!(g = dlt_cg_fprop_stats_graph(&pool, p->h, &cs, CUDNN_DATA_HALF, prologue))) {
        printf("fusion: %-30s %-12s refused at its graph: %s\n", s->name, label, pool.err);
        goto out;
    }
    {
        int64_t uids[] = {DLT_CG_X, DLT_CG_W, DLT_CG_Y, DLT_CG_SUM, DLT_CG_SQSUM, DLT_CG_SCALE, DLT_CG_BIAS};
        void *ptrs[] = {b->x, b->w, b->y, b->sum, b->sq, b->scale, b->bias};
        graph_run r;
        if (_ready(p, &pool, g, s->name, label, uids, ptrs, prologue ? 7 : 5, b, &r, &engine, &proposed))
            goto out;
        /* The check: Y against the legacy convolution of the same input (X, or X' prepared on the
         * host for the prologue), the sums against double sums of this Y. */
        {
            size_t ny = ysz / 2;
            uint16_t *hy = malloc(ysz), *hr = malloc(ysz);
            float *hs = malloc((size_t)s->k * 4), *hq = malloc((size_t)s->k * 4);
            double *ds = calloc((size_t)s->k, sizeof(double)), *dq = calloc((size_t)s->k, sizeof(double)),
                   *da = calloc((size_t)s->k, sizeof(double));
            double dmax = 0, rmax = 1e-30, serr = 0;
            ref->x = prologue ? b->xp : b->x;
            ref->y = b->yref;
            if (!hy || !hr || !hs || !hq || !ds || !dq || !da || _legacy_conv(p, ref) ||
                CU(p, cudaMemcpy(hy, b->y, ysz, cudaMemcpyDeviceToHost)) ||
                CU(p, cudaMemcpy(hr, b->yref, ysz, cudaMemcpyDeviceToHost)) ||
                CU(p, cudaMemcpy(hs, b->sum, (size_t)s->k * 4, cudaMemcpyDeviceToHost)) ||
                CU(p, cudaMemcpy(hq, b->sq, (size_t)s->k * 4, cudaMemcpyDeviceToHost))) {
                printf("fusion: %-30s %-12s FAIL its check: %s\n", s->name, label,
                       p->err[0] ? p->err : "out of memory");
                p->failed++;
            } else {
                for (size_t i = 0; i < ny; i++) {
                    double v = _h2f(hy[i]), rv = _h2f(hr[i]);
                    int c = (int)(i % (size_t)s->k);
                    dmax = _worst(dmax, fabs(v - rv));
                    rmax = fmax(rmax, fabs(rv));
                    ds[c] += v, dq[c] += v * v, da[c] += fabs(v);
                }
                for (int c = 0; c < s->k; c++)
                    serr = _worst(_worst(serr, fabs(hs[c] - ds[c]) / (da[c] + 1e-30)),
                                  fabs(hq[c] - dq[c]) / (dq[c] + 1e-30));
                ms = _time(p, _graph_exec, &r, 20);
                if (dmax / rmax <= 1e-2 && serr <= 1e-3 && ms > 0) {
                    printf("fusion: %-30s %-12s ok   engine %lld of %d proposed, %.3f ms, Y %.1e, sums %.1e\n", s->name,
                           label, (long long)engine, proposed, ms, dmax / rmax, serr);
                    p->passed++;
                } else {
                    printf(
                        "fusion: %-30s %-12s FAIL engine %lld: Y %.1e (bound 1e-2), sums %.1e (bound 1e-3), %.3f ms\n",
                        s->name, label, (long long)engine, dmax / rmax, serr, ms);
                    p->failed++;
                    ms = -1;
                }
            }
            free(hy), free(hr), free(hs), free(hq), free(ds), free(dq), free(da);
        }
    }
out:
    dlt_cg_pool_free(&pool);
    return ms;
}

/* The host fp16 conversions the checks rest on, against their definition (no GPU needed): every
 * half widens and narrows back to itself; the midpoint of every two neighbouring halves narrows to
 * the even one, and a nudge either side of it to the nearer; past the largest half, infinity from
 * 65520 on (its midpoint with the next power of two). Returns the number of disagreements. */
static int _self_test(void)
{
    int bad = 0;
    for (uint32_t h = 0; h < 0x10000u; h++) {
        uint16_t a = (uint16_t)h, b = (uint16_t)(h + 1);
        float fa = _h2f(a), fb, mid;
        if ((a & 0x7c00u) == 0x7c00u)
            continue; /* infinities and NaNs */
        if (_f2h(fa) != a)
            bad++;
        if ((b & 0x7c00u) == 0x7c00u || (a & 0x7fffu) == 0x7fffu)
            continue;
        fb = _h2f(b);
        mid = (float)(((double)fa + (double)fb) / 2); /* exact: one bit past a half's 11 */
        if (_f2h(mid) != ((a & 1) ? b : a) || _f2h(nextafterf(mid, fa)) != a || _f2h(nextafterf(mid, fb)) != b)
            bad++;
    }
    if (_f2h(65519.99f) != 0x7bffu || _f2h(65520.f) != 0x7c00u || _f2h(-65520.f) != 0xfc00u || _h2f(0x7bffu) != 65504.f)
        bad++;
    return bad;
}

typedef struct {
    legacy *l;
    cudnnConvolutionBwdFilterAlgo_t algo;
    const void *x; /* X, or X' prepared on the host for the prologue's reference */
} legacy_wgrad;

static int _legacy_wgrad(probe *p, void *arg)
{
    legacy_wgrad *lw = arg;
    legacy *l = lw->l;
    float one = 1.f, zero = 0.f;
    return DNN(p, cudnnConvolutionBackwardFilter(p->h, &one, l->xd, lw->x, l->yd, l->b->y, l->cd, lw->algo, l->b->ws,
                                                 l->b->ws_size, &zero, l->wd, l->b->dwh));
}

/* The filter gradient in fp32 from the graph (wgrad-f32) against the legacy fp16 one the trainer
 * computes and then casts, on the same X and dY (Y's buffer, refilled): max |d| / max |ref| <= 1e-2
 * (the legacy side rounds to fp16). With prologue (sbr+wgrad-f32, cuDNN's ConvBNwgrad) the graph
 * reads X and applies relu(X * scale + bias) itself; the legacy reference reads X' prepared on the
 * host. Prints its line; *t_legacy gets the legacy call's ms. */
static double _probe_wgrad(probe *p, const conv_shape *s, int n, int prologue, buffers *b, legacy *l, size_t nw,
                           double *t_legacy)
{
    const char *label = prologue ? "sbr+wgrad-f32" : "wgrad-f32";
    dlt_cg_pool pool = {.n = 0};
    dlt_conv_shape cs = _cs(s, n);
    cudnnBackendDescriptor_t g;
    cudnnConvolutionBwdFilterAlgoPerf_t perf[8];
    legacy_wgrad lw = {l, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, prologue ? b->xp : b->x};
    int64_t engine = -1, uids[] = {DLT_CG_X, DLT_CG_Y, DLT_CG_DW, DLT_CG_SCALE, DLT_CG_BIAS};
    void *ptrs[] = {b->x, b->y, b->dw, b->scale, b->bias};
    int proposed = 0, algos = 0;
    double ms = -1;
    graph_run r;
    *t_legacy = -1;
    if (DNN(p, cudnnGetConvolutionBackwardFilterAlgorithm_v7(p->h, l->xd, l->yd, l->cd, l->wd, 8, &algos, perf))) {
        printf("fusion: %-30s %-12s FAIL the legacy ranking: %s\n", s->name, label, p->err);
        p->failed++;
        return -1;
    }
    for (int i = 0; i < algos; i++)
        if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= b->ws_size) {
            lw.algo = perf[i].algo; /* with its own math type, as the trainer's per-direction descriptors */
            if (DNN(p, cudnnSetConvolutionMathType(l->cd, perf[i].mathType))) {
                printf("fusion: %-30s %-12s FAIL the legacy math type: %s\n", s->name, label, p->err);
                p->failed++;
                return -1;
            }
            break;
        }
    if (!(g = dlt_cg_wgrad_graph(&pool, p->h, &cs, CUDNN_DATA_HALF, CUDNN_DATA_FLOAT, prologue))) {
        printf("fusion: %-30s %-12s refused at its graph: %s\n", s->name, label, pool.err);
        goto out;
    }
    if (_ready(p, &pool, g, s->name, label, uids, ptrs, prologue ? 5 : 3, b, &r, &engine, &proposed))
        goto out;
    {
        uint16_t *hr = malloc(nw * 2);
        float *hg = malloc(nw * 4);
        double dmax = 0, rmax = 1e-30;
        if (!hr || !hg || _legacy_wgrad(p, &lw) || CU(p, cudaMemcpy(hr, b->dwh, nw * 2, cudaMemcpyDeviceToHost)) ||
            CU(p, cudaMemcpy(hg, b->dw, nw * 4, cudaMemcpyDeviceToHost))) {
            printf("fusion: %-30s %-12s FAIL its check: %s\n", s->name, label, p->err[0] ? p->err : "out of memory");
            p->failed++;
        } else {
            for (size_t i = 0; i < nw; i++) {
                dmax = _worst(dmax, fabs((double)hg[i] - _h2f(hr[i])));
                rmax = fmax(rmax, fabs((double)_h2f(hr[i])));
            }
            ms = _time(p, _graph_exec, &r, 20);
            *t_legacy = _time(p, _legacy_wgrad, &lw, 20);
            if (dmax / rmax <= 1e-2 && ms > 0 && *t_legacy > 0) {
                printf("fusion: %-30s %-12s ok   engine %lld of %d proposed, %.3f ms (fp16 dW %.3f ms, then its "
                       "cast), dW %.1e\n",
                       s->name, label, (long long)engine, proposed, ms, *t_legacy, dmax / rmax);
                p->passed++;
            } else {
                printf("fusion: %-30s %-12s FAIL engine %lld: dW %.1e (bound 1e-2), %.3f ms\n", s->name, label,
                       (long long)engine, dmax / rmax, ms);
                p->failed++;
                ms = -1;
            }
        }
        free(hr), free(hg);
    }
out:
    dlt_cg_pool_free(&pool);
    return ms;
}

/* Fills n halves with uniform values in [-a, a) from a small LCG (reproducible). */
static int _fill(probe *p, void *dev, size_t n, float a, uint32_t seed, uint16_t *keep)
{
    uint16_t *h = keep ? keep : malloc(n * 2);
    int rc;
    if (!h)
        return -1;
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        h[i] = _f2h(a * ((float)(seed >> 8) / 8388608.f - 1.f));
    }
    rc = CU(p, cudaMemcpy(dev, h, n * 2, cudaMemcpyHostToDevice));
    if (!keep)
        free(h);
    return rc;
}

static int _shape(probe *p, const conv_shape *s, int n, double *tot)
{
    int oh = (s->h + 2 * (s->r / 2) - s->r) / s->stride + 1, algos = 0;
    size_t nx = (size_t)n * s->c * s->h * s->h, nw = (size_t)s->k * s->c * s->r * s->r, ny = (size_t)n * s->k * oh * oh;
    buffers b;
    legacy l;
    cudnnConvolutionFwdAlgoPerf_t perf[8];
    uint16_t *hx = malloc(nx * 2), *hsc = malloc((size_t)s->c * 2), *hbi = malloc((size_t)s->c * 2);
    double t_conv = -1, t_bn = -1, t_gs = -1, t_sbr = -1, t_wg = -1, t_wl = -1, t_swg = -1, t_swl = -1;
    int rc = -1;
    memset(&b, 0, sizeof(b));
    memset(&l, 0, sizeof(l));
    p->err[0] = 0;
    b.ws_size = (size_t)512 << 20;
    if (!hx || !hsc || !hbi || CU(p, cudaMalloc(&b.x, nx * 2)) || CU(p, cudaMalloc(&b.xp, nx * 2)) ||
        CU(p, cudaMalloc(&b.w, nw * 2)) || CU(p, cudaMalloc(&b.y, ny * 2)) || CU(p, cudaMalloc(&b.yref, ny * 2)) ||
        CU(p, cudaMalloc(&b.dwh, nw * 2)) || CU(p, cudaMalloc((void **)&b.dw, nw * 4)) ||
        CU(p, cudaMalloc(&b.scale, (size_t)s->c * 2)) || CU(p, cudaMalloc(&b.bias, (size_t)s->c * 2)) ||
        CU(p, cudaMalloc(&b.ws, b.ws_size)) || CU(p, cudaMalloc((void **)&b.sum, (size_t)s->k * 4)) ||
        CU(p, cudaMalloc((void **)&b.sq, (size_t)s->k * 4)) ||
        CU(p, cudaMalloc((void **)&b.bn_mean, (size_t)s->k * 4)) ||
        CU(p, cudaMalloc((void **)&b.bn_inv, (size_t)s->k * 4)) ||
        CU(p, cudaMalloc((void **)&b.gamma, (size_t)s->k * 4)) ||
        CU(p, cudaMalloc((void **)&b.beta, (size_t)s->k * 4)) || _fill(p, b.x, nx, 2.f, 1u, hx) ||
        _fill(p, b.w, nw, 0.1f, 2u, NULL) || _fill(p, b.scale, (size_t)s->c, 1.f, 3u, hsc) ||
        _fill(p, b.bias, (size_t)s->c, 0.5f, 4u, hbi) || CU(p, cudaMemset(b.gamma, 0, (size_t)s->k * 4)) ||
        CU(p, cudaMemset(b.beta, 0, (size_t)s->k * 4)))
        goto out;
    /* X' = relu(X * scale + bias) on the host, rounded once to fp16: the prologue's reference input. */
    for (size_t i = 0; i < nx; i++) {
        int c = (int)(i % (size_t)s->c);
        float v = _h2f(hx[i]) * _h2f(hsc[c]) + _h2f(hbi[c]);
        hx[i] = _f2h(v > 0.f ? v : 0.f);
    }
    if (CU(p, cudaMemcpy(b.xp, hx, nx * 2, cudaMemcpyHostToDevice)) || DNN(p, cudnnCreateTensorDescriptor(&l.xd)) ||
        DNN(p, cudnnCreateTensorDescriptor(&l.yd)) || DNN(p, cudnnCreateTensorDescriptor(&l.bnd)) ||
        DNN(p, cudnnCreateFilterDescriptor(&l.wd)) || DNN(p, cudnnCreateConvolutionDescriptor(&l.cd)) ||
        DNN(p, cudnnSetTensor4dDescriptor(l.xd, CUDNN_TENSOR_NHWC, CUDNN_DATA_HALF, n, s->c, s->h, s->h)) ||
        DNN(p, cudnnSetTensor4dDescriptor(l.yd, CUDNN_TENSOR_NHWC, CUDNN_DATA_HALF, n, s->k, oh, oh)) ||
        DNN(p, cudnnSetTensor4dDescriptor(l.bnd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, s->k, 1, 1)) ||
        DNN(p, cudnnSetFilter4dDescriptor(l.wd, CUDNN_DATA_HALF, CUDNN_TENSOR_NHWC, s->k, s->c, s->r, s->r)) ||
        DNN(p, cudnnSetConvolution2dDescriptor(l.cd, s->r / 2, s->r / 2, s->stride, s->stride, 1, 1,
                                               CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT)) ||
        DNN(p, cudnnSetConvolutionMathType(l.cd, CUDNN_TENSOR_OP_MATH)) ||
        DNN(p, cudnnGetConvolutionForwardAlgorithm_v7(p->h, l.xd, l.wd, l.cd, l.yd, 8, &algos, perf)))
        goto out;
    /* cuDNN's first ranked algorithm that runs within the workspace, with the math type it was
     * ranked with (as the trainer's search sets it); implicit precomputed GEMM when none says so. */
    l.algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
    for (int i = 0; i < algos; i++)
        if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= b.ws_size) {
            l.algo = perf[i].algo;
            if (DNN(p, cudnnSetConvolutionMathType(l.cd, perf[i].mathType)))
                goto out;
            break;
        }
    l.b = &b, l.x = b.x, l.y = b.y, l.bn_mode = CUDNN_BATCHNORM_SPATIAL_PERSISTENT;
    t_conv = _time(p, _legacy_conv, &l, 20);
    t_bn = _time(p, _legacy_bn, &l, 20);
    if (t_conv < 0 || t_bn < 0)
        goto out;
    printf("fusion: %-30s %-12s %.3f ms conv (algo %d), %.3f ms batch norm (training forward%s)\n", s->name, "unfused",
           t_conv, (int)l.algo, t_bn, l.bn_mode == CUDNN_BATCHNORM_SPATIAL ? ", spatial" : "");
    t_gs = _probe_graph(p, s, n, 0, &b, &l, ny * 2);
    if (s->prologue)
        t_sbr = _probe_graph(p, s, n, 1, &b, &l, ny * 2);
    if (_fill(p, b.y, ny, 1.f, 5u, NULL)) /* dY for the filter gradient */
        goto out;
    t_wg = _probe_wgrad(p, s, n, 0, &b, &l, nw, &t_wl);
    if (s->prologue)
        t_swg = _probe_wgrad(p, s, n, 1, &b, &l, nw, &t_swl);
    tot[0] += t_conv, tot[1] += t_bn;
    if (t_gs > 0)
        tot[2] += t_gs, tot[3] += t_conv;
    if (t_sbr > 0)
        tot[4] += t_sbr, tot[5] += t_conv + t_bn;
    if (t_wg > 0)
        tot[6] += t_wg, tot[7] += t_wl;
    if (t_swg > 0)
        tot[8] += t_swg, tot[9] += t_swl;
    rc = 0;
out:
    if (rc) {
        printf("fusion: %-30s FAIL the shape's set-up: %s\n", s->name, p->err[0] ? p->err : "out of host memory");
        p->failed++;
    }
    cudnnDestroyTensorDescriptor(l.xd), cudnnDestroyTensorDescriptor(l.yd), cudnnDestroyTensorDescriptor(l.bnd);
    cudnnDestroyFilterDescriptor(l.wd), cudnnDestroyConvolutionDescriptor(l.cd);
    void *dev[] = {b.x,   b.xp, b.w,       b.y,      b.yref,  b.scale, b.bias, b.ws,
                   b.sum, b.sq, b.bn_mean, b.bn_inv, b.gamma, b.beta,  b.dwh,  b.dw};
    for (size_t i = 0; i < sizeof(dev) / sizeof(dev[0]); i++)
        cudaFree(dev[i]);
    free(hx), free(hsc), free(hbi);
    return rc;
}

int main(int argc, char **argv)
{
    probe p = {0};
    int n = 256, nshapes = DEFAULT_SHAPES, devs = 0;
    double budget = 60, t0 = _now(), tot[10] = {0};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--batch") && i + 1 < argc)
            n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--all"))
            nshapes = (int)(sizeof(g_shapes) / sizeof(g_shapes[0]));
        else if (!strcmp(argv[i], "--budget") && i + 1 < argc)
            budget = atof(argv[++i]);
        else if (!strcmp(argv[i], "--self-test")) {
            int bad = _self_test();
            printf("fusion_probe: host fp16 conversions: %s (%d disagreements over every half and midpoint)\n",
                   bad ? "FAIL" : "ok", bad);
            return bad ? 1 : 0;
        } else {
            fprintf(stderr, "usage: fusion_probe [--batch B] [--all] [--budget SECONDS] | --self-test\n");
            return 2;
        }
    }
    if (n < 1 || n > 4096 || budget <= 0) {
        fprintf(stderr, "fusion_probe: --batch must be 1..4096 and --budget positive\n");
        return 2;
    }
    if (cudaGetDeviceCount(&devs) != cudaSuccess || devs == 0) {
        printf("fusion_probe: SKIP: the CUDA runtime sees no GPU\n");
        return 0;
    }
    if (CU(&p, cudaStreamCreate(&p.s)) || DNN(&p, cudnnCreate(&p.h)) || DNN(&p, cudnnSetStream(p.h, p.s))) {
        fprintf(stderr, "fusion_probe: %s\n", p.err);
        return 1;
    }
    {
        struct cudaDeviceProp prop;
        cudaGetDeviceProperties(&prop, 0);
        printf("fusion: %s (sm_%d%d), cuDNN %zu, batch %d, fp16 NHWC, fp32 statistics\n", prop.name, prop.major,
               prop.minor, cudnnGetVersion(), n);
    }
    for (int i = 0; i < nshapes; i++) {
        if (_now() - t0 > budget) {
            printf("fusion: budget of %.0f s reached: %d of %d shapes probed\n", budget, i, nshapes);
            break;
        }
        _shape(&p, &g_shapes[i], n, tot);
    }
    printf("fusion: total over the shapes probed: conv %.3f + batch norm %.3f ms unfused; conv+gs %.3f ms where "
           "its conv alone took %.3f; sbr+conv+gs %.3f ms where conv + batch norm took %.3f; wgrad-f32 %.3f ms "
           "where the fp16 filter gradient took %.3f before its cast; sbr+wgrad-f32 %.3f ms where the fp16 one on a "
           "stored X' took %.3f\n",
           tot[0], tot[1], tot[2], tot[3], tot[4], tot[5], tot[6], tot[7], tot[8], tot[9]);
    printf("%d passed, %d failed\n", p.passed, p.failed);
    cudnnDestroy(p.h);
    cudaStreamDestroy(p.s);
    return p.failed ? 1 : 0;
}
