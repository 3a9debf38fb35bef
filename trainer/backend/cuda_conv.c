/* SPDX-License-Identifier: Apache-2.0 */
/* cuda_conv: the CUDA backend's convolutions. cuDNN NHWC convolutions with the fastest algorithms
 * found once per geometry (cached across the layers that share it; by cuDNN's heuristics under
 * --deterministic) in one shared workspace; filters read in place from the float parameter buffer
 * (fp32/tf32) or its low-precision twin; the 3-channel image input padded to 4 channels. */
#include "config.h"

#include <cudnn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/backend/algo_cache.h"
#include "trainer/backend/cuda_backend.h"
#include "trainer/backend/cuda_internal.h"
#include "trainer/backend/cuda_kernels.h"

/* The fastest successful algorithm within the workspace limit from cuDNN's measured list (sorted
 * by time), except that a deterministic one within DLT_CUDNN_DETERMINISTIC_SLACK of a faster
 * non-deterministic one is preferred. Non-deterministic algorithms accumulate with atomics, and
 * cudnnFind times each alone on its own buffers: on an H200 the one such pick seen (ResNet-50's
 * 64->64 1x1 backward-filter, algorithm 0) trained 1-14% slower in four A/B pairs than the
 * deterministic algorithm 1 cudnnFind had ranked just behind it, and its bits differ between runs.
 * Under --deterministic only deterministic ones qualify. */
#define DLT_CUDNN_DETERMINISTIC_SLACK 1.10f
#define PICK(results, count, limit, out, math, mem)                                                                    \
    do {                                                                                                               \
        int found_ = -1;                                                                                               \
        for (int i_ = 0; i_ < (count) && found_ < 0; i_++)                                                             \
            if (dlt_cudnn_ok((results)[i_].status) && (results)[i_].memory <= (limit) &&                               \
                (!c->cfg.deterministic || (results)[i_].determinism == CUDNN_DETERMINISTIC))                           \
                found_ = i_;                                                                                           \
        if (found_ >= 0 && (results)[found_].determinism != CUDNN_DETERMINISTIC)                                       \
            for (int i_ = found_ + 1; i_ < (count); i_++)                                                              \
                if (dlt_cudnn_ok((results)[i_].status) && (results)[i_].memory <= (limit) &&                           \
                    (results)[i_].determinism == CUDNN_DETERMINISTIC &&                                                \
                    (results)[i_].time <= (results)[found_].time * DLT_CUDNN_DETERMINISTIC_SLACK) {                    \
                    found_ = i_;                                                                                       \
                    break;                                                                                             \
                }                                                                                                      \
        if (found_ < 0) {                                                                                              \
            dlt_fail(be->err, -ENOTSUP,                                                                                \
                     "cuDNN found no %s%s algorithm for this convolution within "                                      \
                     "%zu MiB of workspace",                                                                           \
                     c->cfg.deterministic ? "deterministic " : "", #out, (size_t)(limit) >> 20);                       \
            return -ENOTSUP;                                                                                           \
        }                                                                                                              \
        (out) = (results)[found_].algo;                                                                                \
        (math) = (results)[found_].mathType;                                                                           \
        (mem) = (results)[found_].memory;                                                                              \
    } while (0)

/* A convolution descriptor of op's geometry with the given math type. */
static int _conv_descriptor(dlt_backend *be, const dlt_op *op, cudnnMathType_t math, cudnnConvolutionDescriptor_t *d)
{
    const dlt_conv_shape *s = &op->cs;
    DLT_TRY(be->err, DLT_CUDNN_CHECK(be->err, cudnnCreateConvolutionDescriptor(d)));
    DLT_TRY(be->err,
            DLT_CUDNN_CHECK(be->err, cudnnSetConvolution2dDescriptor(*d, s->pad, s->pad, s->stride, s->stride, 1, 1,
                                                                     CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT)));
    DLT_TRY(be->err, DLT_CUDNN_CHECK(be->err, cudnnSetConvolutionMathType(*d, math)));
    return 0;
}

/* One descriptor per direction, each with the math type its algorithm was timed with. */
static int _direction_descriptors(dlt_backend *be, dlt_op *op)
{
    const algo_entry *e = op->algo;
    int rc;
    if ((rc = _conv_descriptor(be, op, e->fwd_math, &op->conv_fwd)) != 0 ||
        (rc = _conv_descriptor(be, op, e->bwd_filter_math, &op->conv_bwd_filter)) != 0)
        return rc;
    return e->bwd_data_ok ? _conv_descriptor(be, op, e->bwd_data_math, &op->conv_bwd_data) : 0;
}

/* cudnnFind* for the three directions of op's geometry into e. */
static int _search_algos(dlt_backend *be, dlt_op *op, algo_entry *e)
{
    cuda_backend *c = _cu(be);
    cudnnConvolutionFwdAlgoPerf_t fr[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    cudnnConvolutionBwdDataAlgoPerf_t dr[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    cudnnConvolutionBwdFilterAlgoPerf_t wr[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    int nf = 0, nd = 0, nw = 0;
    size_t mf = 0, md = 0, mw = 0;
    if (c->cfg.deterministic) {
        /* --deterministic: cuDNN's heuristics rank the candidates without timing them, so every
         * process of the same GPU, cuDNN and shape picks the same algorithms (cudnnFind's timing
         * can differ between two runs and with it the bits); PICK keeps the deterministic ones.
         * This is not what PyTorch does: with deterministic=True and benchmark=False it skips
         * both search and heuristics and runs fixed default algorithms (Conv_v7.cpp,
         * AlgoIterator::onlyDefaultAlgorithm: IMPLICIT_PRECOMP_GEMM forward, ALGO_1 for both
         * backward directions). Those are the fallback here when cuDNN refuses a heuristic pick
         * when it runs (_default_on_refusal). */
        DLT_TRY(be->err, DLT_CUDNN_CHECK(be->err, cudnnGetConvolutionForwardAlgorithm_v7(
                                                      c->dnn, op->xd, op->wd, op->conv, op->yd,
                                                      CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &nf, fr)));
        if (op->cs.c == 3 ||
            !dlt_cudnn_ok(cudnnGetConvolutionBackwardDataAlgorithm_v7(c->dnn, op->wd, op->yd, op->conv, op->xd,
                                                                      CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &nd, dr)))
            nd = 0;
        DLT_TRY(be->err, DLT_CUDNN_CHECK(be->err, cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                                                      c->dnn, op->xd, op->yd, op->conv, op->wd,
                                                      CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &nw, wr)));
    } else {
        /* cuDNN times each candidate on scratch buffers of its own. */
        DLT_TRY(be->err, DLT_CUDNN_CHECK(
                             be->err, cudnnFindConvolutionForwardAlgorithm(c->dnn, op->xd, op->wd, op->conv, op->yd,
                                                                           CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &nf, fr)));
        /* The stem's data gradient is never computed (the images need none): no search for it. */
        if (op->cs.c == 3 ||
            !dlt_cudnn_ok(cudnnFindConvolutionBackwardDataAlgorithm(c->dnn, op->wd, op->yd, op->conv, op->xd,
                                                                    CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &nd, dr)))
            nd = 0;
        DLT_TRY(be->err, DLT_CUDNN_CHECK(be->err, cudnnFindConvolutionBackwardFilterAlgorithm(
                                                      c->dnn, op->xd, op->yd, op->conv, op->wd,
                                                      CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &nw, wr)));
    }
    PICK(fr, nf, c->ws_limit, e->fwd, e->fwd_math, mf);
    PICK(wr, nw, c->ws_limit, e->bwd_filter, e->bwd_filter_math, mw);
    /* The data gradient may have no algorithm at all (the stem needs none): found or not, no error. */
    for (int i = 0; i < nd && !e->bwd_data_ok; i++)
        if (dlt_cudnn_ok(dr[i].status) && dr[i].memory <= c->ws_limit &&
            (!c->cfg.deterministic || dr[i].determinism == CUDNN_DETERMINISTIC))
            e->bwd_data_ok = 1;
    if (e->bwd_data_ok)
        PICK(dr, nd, c->ws_limit, e->bwd_data, e->bwd_data_math, md);
    e->ws = mf > md ? mf : md;
    e->ws = mw > e->ws ? mw : e->ws;
    return 0;
}

/* The workspace the chosen algorithms need with their own descriptors (heuristic results carry an
 * estimate; PyTorch asks cudnnGet*WorkspaceSize for an algorithm it did not time, too). */
static int _exact_ws(dlt_backend *be, const dlt_op *op, algo_entry *e)
{
    cuda_backend *c = _cu(be);
    size_t f = 0, d = 0, w = 0;
    DLT_TRY(be->err, DLT_CUDNN_CHECK(be->err, cudnnGetConvolutionForwardWorkspaceSize(
                                                  c->dnn, op->xd, op->wd, op->conv_fwd, op->yd, e->fwd, &f)));
    if (e->bwd_data_ok)
        DLT_TRY(be->err,
                DLT_CUDNN_CHECK(be->err, cudnnGetConvolutionBackwardDataWorkspaceSize(
                                             c->dnn, op->wd, op->yd, op->conv_bwd_data, op->xd, e->bwd_data, &d)));
    DLT_TRY(be->err,
            DLT_CUDNN_CHECK(be->err, cudnnGetConvolutionBackwardFilterWorkspaceSize(
                                         c->dnn, op->xd, op->yd, op->conv_bwd_filter, op->wd, e->bwd_filter, &w)));
    f = f > d ? f : d;
    f = f > w ? f : w;
    e->ws = f > e->ws ? f : e->ws;
    return 0;
}

/* --cudnn-cache: the key of op's choice on this GPU, cuDNN and precision. */
static void _cache_key(const cuda_backend *c, const dlt_op *op, dlt_algo_key *k)
{
    memset(k, 0, sizeof(*k));
    snprintf(k->device, sizeof(k->device), "%s", c->gpu_name);
    k->cc = c->cc;
    k->library = (long)cudnnGetVersion();
    k->dtype = (int)c->cdt;
    k->math = (int)c->math;
    k->deterministic = c->cfg.deterministic;
    k->ws_limit = c->ws_limit;
    k->s = op->cs;
    k->channels = op->cp;
}

/* A cache file that cannot be read or written costs a search, never the run: said once. */
static void _cache_warn(cuda_backend *c, const char *what)
{
    if (!c->cache_warned)
        fprintf(stderr, "dltrain: warning: %s; the cuDNN algorithms are searched instead\n", what);
    c->cache_warned = 1;
}

static int _cache_lookup(dlt_backend *be, const dlt_algo_key *k, dlt_algo_choice *ch)
{
    cuda_backend *c = _cu(be);
    dlt_err err = DLT_ERR_INIT;
    int damaged = 0, rc = dlt_algo_cache_lookup(c->cfg.algo_cache, k, ch, &damaged, &err);
    if (rc < 0)
        _cache_warn(c, err.msg);
    else if (damaged && !c->cache_warned) {
        snprintf(err.msg, sizeof(err.msg), "--cudnn-cache %s: %d damaged line%s skipped", c->cfg.algo_cache, damaged,
                 damaged == 1 ? "" : "s");
        fprintf(stderr, "dltrain: warning: %s\n", err.msg);
        c->cache_warned = 1;
    }
    return rc;
}

static void _cache_store(dlt_backend *be, const dlt_op *op, const algo_entry *e)
{
    cuda_backend *c = _cu(be);
    dlt_algo_key k;
    dlt_algo_choice ch = {(int)e->fwd,        (int)e->fwd_math,        (int)e->bwd_data, (int)e->bwd_data_math,
                          (int)e->bwd_filter, (int)e->bwd_filter_math, e->bwd_data_ok};
    dlt_err err = DLT_ERR_INIT;
    if (!e->bwd_data_ok)
        ch.data = ch.data_math = 0;
    _cache_key(c, op, &k);
    if (dlt_algo_cache_store(c->cfg.algo_cache, &k, &ch, &err) != 0)
        _cache_warn(c, err.msg);
}

void dlt_cu_conv_free_descriptors(dlt_op *op)
{
    if (op->conv_fwd)
        cudnnDestroyConvolutionDescriptor(op->conv_fwd);
    if (op->conv_bwd_data)
        cudnnDestroyConvolutionDescriptor(op->conv_bwd_data);
    if (op->conv_bwd_filter)
        cudnnDestroyConvolutionDescriptor(op->conv_bwd_filter);
    op->conv_fwd = op->conv_bwd_data = op->conv_bwd_filter = NULL;
}

/* --wgrad-fp32: in fp16/bf16 the legacy filter gradient is written in the run's type into the
 * shared scratch and cast to the float gradient by a kernel of its own; cuDNN's graph API can write
 * it in fp32 directly (cudnn-frontend's conv_wgrad node takes the output type apart from the
 * inputs'). Which one a geometry runs is decided once, at planning, by timing both on buffers of its
 * shape: the heuristics' first WG_PLANS plans (mode A, then the fallback list) against the legacy
 * algorithm the search chose plus its cast, WG_REPS calls each after one warm call; engines whose
 * numerical notes say reduced precision or down-converted inputs are never taken (the point is an
 * fp32 gradient), and auto tries only engines shipped compiled: one compiled at run time (NVRTC)
 * costs seconds per plan at finalize, every run, which the few microseconds a step saved here
 * would not pay back in a benchmark's launch; on takes those too. The padded stem keeps the legacy
 * path (its gradient is unpadded as it is cast), and so does --deterministic unless --wgrad-fp32 on
 * (then only engines without cuDNN's non-deterministic note). The choice is not kept by
 * --cudnn-cache: each run times it again. */
#define WG_PLANS 3
#define WG_REPS 5

typedef struct {
    dlt_backend *be;
    dlt_op *op;
    const void *x, *dy;
    float *dw;
    cudnnBackendDescriptor_t plan; /* NULL: the legacy call and its cast */
} wg_run;

static int _wgrad_legacy(dlt_backend *be, dlt_op *op, const void *x, const void *dy, float *dw);

/* dw = the fp32 filter gradient of op's geometry by plan (op's entry's pool gets cuDNN's words). */
static cudnnStatus_t _wgrad_graph(cuda_backend *c, const dlt_op *op, cudnnBackendDescriptor_t plan, const void *x,
                                  const void *dy, float *dw)
{
    int64_t uids[3] = {DLT_CG_X, DLT_CG_Y, DLT_CG_DW};
    void *ptrs[3] = {(void *)x, (void *)dy, dw};
    return dlt_cg_execute(op->algo->wg_pool, c->dnn, plan, 3, uids, ptrs, c->ws);
}

static int _wg_once(wg_run *r)
{
    if (!r->plan)
        return _wgrad_legacy(r->be, r->op, r->x, r->dy, r->dw);
    return dlt_cudnn_ok(_wgrad_graph(_cu(r->be), r->op, r->plan, r->x, r->dy, r->dw)) ? 0 : -1;
}

/* ms per call of r (after one warm call), or a negative value when a call failed. */
static float _wg_time(wg_run *r, cudaEvent_t a, cudaEvent_t b)
{
    cuda_backend *c = _cu(r->be);
    float ms = -1;
    if (_wg_once(r) != 0 || cudaEventRecord(a, c->s) != cudaSuccess)
        return -1;
    for (int i = 0; i < WG_REPS; i++)
        if (_wg_once(r) != 0)
            return -1;
    if (cudaEventRecord(b, c->s) != cudaSuccess || cudaEventSynchronize(b) != cudaSuccess ||
        cudaEventElapsedTime(&ms, a, b) != cudaSuccess)
        return -1;
    return ms / WG_REPS;
}

/* A geometry kept on the legacy path for a reason worth saying (cuDNN refused, a call failed): said
 * for the first such geometry of the run, or for each under --wgrad-fp32 on. */
static void _wg_refused(cuda_backend *c, const dlt_op *op, const char *why)
{
    if (c->cfg.wgrad_fp32 < 1 && c->wg_said)
        return;
    c->wg_said = 1;
    fprintf(stderr,
            "dltrain: convolution %d->%d %dx%d/%d on %dx%d: no fp32 filter gradient from cuDNN's graph API (%s); "
            "the %s gradient and its cast%s\n",
            op->cs.c, op->cs.k, op->cs.r, op->cs.s, op->cs.stride, op->cs.h, op->cs.w, why,
            c->dt == DLT_DT_BF16 ? "bf16" : "fp16", c->cfg.wgrad_fp32 >= 1 ? "" : " (said once)");
}

/* e's filter-gradient path for op's geometry (the legacy algorithm already chosen). Never an error
 * of the run: whatever goes wrong keeps the legacy path. Each plan runs on timing buffers of the
 * shape before it is kept, so a plan cuDNN finalizes but will not run is found here, not in a step;
 * the workspace grows for a plan only when that plan is tried. Under auto, as PICK does for the
 * legacy algorithms, a deterministic plan within DLT_CUDNN_DETERMINISTIC_SLACK of a faster
 * non-deterministic one is preferred, and the graph must beat the legacy call and its cast. */
static void _wg_decide(dlt_backend *be, dlt_op *op, algo_entry *e)
{
    cuda_backend *c = _cu(be);
    const dlt_conv_shape *s = &op->cs;
    dlt_cg_plan plans[WG_PLANS];
    cudnnBackendDescriptor_t g;
    cudaEvent_t a = NULL, b = NULL;
    void *x = NULL, *dy = NULL;
    float *dw = NULL, legacy = -1, t[WG_PLANS] = {0};
    int n = 0, proposed = 0, had = be->err->code != 0, pick = -1;
    /* on (1) and the checks' mode (2) take the first plan that runs, untimed; 2 among auto's candidates */
    const int untimed = c->cfg.wgrad_fp32 == 1 || c->cfg.wgrad_fp32 == 2;
    unsigned need = DLT_CG_FULL_PRECISION | (c->cfg.deterministic ? DLT_CG_DETERMINISTIC : 0) |
                    (c->cfg.wgrad_fp32 == 1 ? 0 : DLT_CG_PRECOMPILED);
    size_t xn = (size_t)s->n * s->h * s->w * s->c, yn = (size_t)s->n * s->oh * s->ow * s->k,
           wn = (size_t)s->k * s->r * s->s * s->c;
    if (c->dt == DLT_DT_F32 || op->cp != s->c || c->cfg.wgrad_fp32 == 0 || (c->cfg.deterministic && !untimed))
        return;
    c->wg_planned++;
    if (!(e->wg_pool = calloc(1, sizeof(*e->wg_pool)))) {
        _wg_refused(c, op, "out of host memory");
        return;
    }
    if (!(g = dlt_cg_wgrad_graph(e->wg_pool, c->dnn, s, c->cdt, CUDNN_DATA_FLOAT, 0)) ||
        (n = dlt_cg_plans(e->wg_pool, c->dnn, g, c->ws_limit, need, plans, untimed ? 1 : WG_PLANS, &proposed)) == 0) {
        char why[600];
        snprintf(why, sizeof(why), "%d engine configuration(s) proposed, none usable: %s", proposed, e->wg_pool->err);
        _wg_refused(c, op, why);
        goto out;
    }
    /* Buffers of the shape (a 16-bit pattern of moderate values: every byte 0x3c), freed after: a
     * geometry that cannot have them keeps the legacy path. */
    if (cudaMalloc(&x, xn * 2) != cudaSuccess || cudaMalloc(&dy, yn * 2) != cudaSuccess ||
        cudaMalloc((void **)&dw, wn * sizeof(float)) != cudaSuccess || cudaMemsetAsync(x, 0x3c, xn * 2, c->s) ||
        cudaMemsetAsync(dy, 0x3c, yn * 2, c->s) || cudaEventCreate(&a) != cudaSuccess ||
        cudaEventCreate(&b) != cudaSuccess) {
        cudaGetLastError();
        _wg_refused(c, op, "no device memory to try it");
        goto out;
    }
    {
        wg_run r = {be, op, x, dy, dw, NULL};
        if (!untimed && (legacy = _wg_time(&r, a, b)) < 0) {
            cudaGetLastError(); /* the legacy path itself failed: its own run will say why */
            goto out;
        }
        for (int i = 0; i < n; i++) {
            t[i] = -1;
            if (dlt_cu_workspace(be, plans[i].workspace) != 0)
                continue;
            r.plan = plans[i].plan;
            if (untimed) {
                if (_wg_once(&r) == 0 && cudaStreamSynchronize(c->s) == cudaSuccess) {
                    pick = i;
                    break;
                }
                continue;
            }
            if ((t[i] = _wg_time(&r, a, b)) < 0)
                continue;
            if (pick < 0 || t[i] < t[pick])
                pick = i;
        }
        cudaGetLastError();
        if (pick >= 0 && !untimed && !plans[pick].deterministic)
            for (int i = 0; i < n; i++)
                if (t[i] >= 0 && plans[i].deterministic && t[i] <= t[pick] * DLT_CUDNN_DETERMINISTIC_SLACK) {
                    pick = i;
                    break;
                }
        if (pick < 0)
            _wg_refused(c, op, e->wg_pool->err[0] ? e->wg_pool->err : "no plan ran");
        else if (untimed || t[pick] < legacy)
            e->wg_plan = plans[pick].plan, e->wg_engine = plans[pick].engine;
    }
out:
    if (e->wg_plan)
        c->wg_graph++;
    if (a)
        cudaEventDestroy(a);
    if (b)
        cudaEventDestroy(b);
    if (x || dy || dw)
        cudaStreamSynchronize(c->s); /* the calls on the buffers are done */
    cudaFree(x), cudaFree(dy), cudaFree(dw);
    if (!had)
        dlt_err_clear(be->err); /* a failure here is handled here */
}

/* A new geometry's entry, its legacy algorithms chosen: the workspace they need, then its
 * filter-gradient path. */
static int _entry_ready(dlt_backend *be, dlt_op *op, algo_entry *e)
{
    int rc = dlt_cu_workspace(be, e->ws);
    if (rc == 0)
        _wg_decide(be, op, e);
    return rc;
}

/* The algorithms of op's geometry: from the cache, or searched and cached. */
static int _find_algos(dlt_backend *be, dlt_op *op)
{
    cuda_backend *c = _cu(be);
    algo_entry *e;
    int rc;
    for (e = c->algos; e; e = e->next)
        if (!memcmp(&e->s, &op->cs, sizeof(op->cs))) {
            op->algo = e;
            return _direction_descriptors(be, op);
        }
    e = calloc(1, sizeof(*e));
    if (!e) {
        return dlt_fail(be->err, -ENOMEM, "out of memory");
    }
    e->s = op->cs;
    op->algo = e;
    if (c->cfg.algo_cache) {
        dlt_algo_key key;
        dlt_algo_choice ch;
        _cache_key(c, op, &key);
        if ((rc = _cache_lookup(be, &key, &ch)) == 1) {
            e->fwd = (cudnnConvolutionFwdAlgo_t)ch.fwd;
            e->fwd_math = (cudnnMathType_t)ch.fwd_math;
            e->bwd_data = (cudnnConvolutionBwdDataAlgo_t)ch.data;
            e->bwd_data_math = (cudnnMathType_t)ch.data_math;
            e->bwd_data_ok = ch.data_ok;
            e->bwd_filter = (cudnnConvolutionBwdFilterAlgo_t)ch.filter;
            e->bwd_filter_math = (cudnnMathType_t)ch.filter_math;
            /* The workspace from cuDNN itself: a choice it no longer accepts is searched again. */
            int had = be->err->code != 0; /* a failure below is handled here: forgotten unless it was there before */
            if (_direction_descriptors(be, op) == 0 && _exact_ws(be, op, e) == 0) {
                e->next = c->algos;
                c->algos = e;
                return _entry_ready(be, op, e);
            }
            dlt_cu_conv_free_descriptors(op);
            memset(e, 0, sizeof(*e));
            e->s = op->cs;
            if (!had)
                dlt_err_clear(be->err);
        }
    }
    if (c->searched == 0)
        dlt_progress_start(&c->search, stderr, !c->cfg.progress, "cuDNN algorithm search:", "convolution shapes", 0);
    dlt_progress_plain(&c->search);
    rc = _search_algos(be, op, e);
    dlt_progress_update(&c->search, ++c->searched);
    if (rc != 0) {
        free(e); /* not cached: a later plan of this shape searches again */
        op->algo = NULL;
        return rc;
    }
    e->next = c->algos;
    c->algos = e;
    if ((rc = _direction_descriptors(be, op)) != 0 || (c->cfg.deterministic && (rc = _exact_ws(be, op, e)) != 0))
        return rc;
    if (c->cfg.algo_cache)
        _cache_store(be, op, e);
    return _entry_ready(be, op, e);
}

void dlt_cu_conv_free_algos(cuda_backend *c)
{
    while (c->algos) {
        algo_entry *n = c->algos->next;
        if (c->algos->wg_pool) {
            dlt_cg_pool_free(c->algos->wg_pool);
            free(c->algos->wg_pool);
        }
        dlt_cu_fused_free(c->algos);
        free(c->algos);
        c->algos = n;
    }
}

static int _conv_plan(dlt_backend *be, const dlt_conv_shape *s, dlt_op **out)
{
    cuda_backend *c = _cu(be);
    dlt_op *op = calloc(1, sizeof(*op));
    int n, ch, h, w, rc;
    size_t wn;
    *out = op;
    if (!op) {
        return dlt_fail(be->err, -ENOMEM, "out of memory");
    }
    op->cs = *s;
    /* Tensor-core NHWC kernels want channel counts that are multiples of 4 or 8: the 3-channel
     * image input is padded to 4 (a zero channel, zero weights), as the MLPerf ResNet-50 GPU
     * implementations do. The padding lives here only; checkpoints keep 3 channels. */
    op->cp = s->c == 3 && c->stem_pad ? 4 : s->c;
    wn = (size_t)s->k * op->cp * s->r * s->s;
    if ((rc = dlt_cu_nhwc(be, &op->xd, s->n, op->cp, s->h, s->w)) != 0 ||
        (rc = dlt_cu_nhwc(be, &op->yd, s->n, s->k, s->oh, s->ow)))
        return rc;
    /* An NHWC filter descriptor is KRSC: in fp32/tf32 cuDNN reads the float parameter buffer
     * itself, in fp16/bf16 its twin. */
    DLT_TRY(be->err, DLT_CUDNN_CHECK(be->err, cudnnCreateFilterDescriptor(&op->wd)));
    DLT_TRY(be->err, DLT_CUDNN_CHECK(be->err, cudnnSetFilter4dDescriptor(op->wd, c->cdt, CUDNN_TENSOR_NHWC, s->k,
                                                                         op->cp, s->r, s->s)));
    if ((rc = _conv_descriptor(be, op, c->math, &op->conv)) != 0)
        return rc;
    if (op->cp != s->c) {
        DLT_TRY(be->err,
                DLT_CUDA_CHECK(be->err, cudaMalloc(&op->x_pad, (size_t)s->n * s->h * s->w * op->cp * _dt_size(c->dt))));
        /* The pad channel's weights stay zero: the optimizer and params_loaded write channels
         * 0..2 only. Queued on the compute stream, so ordered before every later writer. */
        DLT_TRY(be->err, DLT_CUDA_CHECK(be->err, cudaMalloc(&op->w_pad, wn * _dt_size(c->dt))));
        DLT_TRY(be->err, DLT_CUDA_CHECK(be->err, cudaMemsetAsync(op->w_pad, 0, wn * _dt_size(c->dt), c->s)));
    }
    DLT_TRY(be->err,
            DLT_CUDNN_CHECK(be->err, cudnnGetConvolution2dForwardOutputDim(op->conv, op->xd, op->wd, &n, &ch, &h, &w)));
    if (n != s->n || ch != s->k || h != s->oh || w != s->ow) {
        return dlt_fail(be->err, -EINVAL, "cuDNN output %dx%dx%dx%d differs from the model's %dx%dx%dx%d", n, ch, h, w,
                        s->n, s->k, s->oh, s->ow);
    }
    /* The shared filter-gradient scratch grows at planning time only, like the workspace. */
    if ((c->dt != DLT_DT_F32 || op->cp != s->c) &&
        (rc = _grow(be, &c->dw_scratch, NULL, &c->dw_scratch_size, wn * _dt_size(c->dt), c->s)) != 0)
        return rc;
    return _find_algos(be, op);
}

/* Filters read in place inside the parameter buffer (or its twin) must be as aligned as the
 * buffers cudnnFind timed the algorithms on: cuDNN 9 refuses misaligned pointers for some
 * (CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER), and PyTorch keys its cuDNN plans on alignment
 * (aten/src/ATen/native/cudnn/Conv_v8.cpp). Every offset of a model whose base width 64 x --width
 * is a multiple of 8 is 16-byte aligned. */
static int _filter_aligned(dlt_backend *be, const dlt_op *op)
{
    if ((uintptr_t)op->w % 16 == 0)
        return 0;
    return dlt_fail(
        be->err, -EINVAL,
        "convolution weights %d->%d %dx%d lie at an address not 16-byte aligned in the "
        "parameter buffer (the model's --width makes 64 x width channels not a multiple of 8): choose a width "
        "giving a multiple of 8 (0.125, 0.25, 0.5, 1, ...)",
        op->cs.c, op->cs.k, op->cs.r, op->cs.s);
}

static int _conv_bind_weights(dlt_backend *be, dlt_op *op, const float *w)
{
    cuda_backend *c = _cu(be);
    const dlt_conv_shape *s = &op->cs;
    size_t wn = (size_t)s->k * s->r * s->s * s->c, off;
    int rc;
    if (c->dt == DLT_DT_F32 && op->cp == s->c) {
        op->w = w; /* float KRSC, read in place: no copy to keep up to date */
        op->w_gen = 0;
        return _filter_aligned(be, op);
    }
    if ((rc = dlt_cu_param_offset(be, w, wn, "convolution weights", &off)) != 0)
        return rc;
    op->w_gen = c->plan_gen;
    if (op->cp == s->c) {
        op->w = (const char *)c->twin + off * _dt_size(c->dt);
        return _filter_aligned(be, op);
    }
    if (c->stem_op && c->stem_op != op) {
        return dlt_fail(be->err, -ENOTSUP,
                        "a second convolution with a padded 3-channel input (the optimizer keeps one "
                        "padded stem; run with --stem-pad off)");
    }
    c->stem_op = op;
    c->stem_lo = off;
    c->stem_hi = off + wn;
    op->w = op->w_pad;
    return 0;
}

int dlt_cu_conv_weights_ok(dlt_backend *be, const dlt_op *op)
{
    if (!op->w) {
        return dlt_fail(be->err, -EINVAL, "convolution %d->%d %dx%d run before conv_bind_weights", op->cs.c, op->cs.k,
                        op->cs.r, op->cs.s);
    }
    if (op->w_gen && op->w_gen != _cu(be)->plan_gen) {
        return dlt_fail(be->err, -EINVAL,
                        "convolution %d->%d %dx%d: its weights were bound before the last sgd_plan "
                        "(bind them again)",
                        op->cs.c, op->cs.k, op->cs.r, op->cs.s);
    }
    return 0;
}

enum { DIR_FWD, DIR_DATA, DIR_FILTER };

/* A direction's algorithm refused when it runs (a NOT_SUPPORTED about the configuration, not an
 * install problem: cudnn_status.h) under --deterministic: the shape's entry takes PyTorch's
 * deterministic default for that direction (see _search_algos), whose workspace is made to fit,
 * said once per shape and direction. 1: switched, call again; 0: not applicable; <0: error. */
static int _default_on_refusal(dlt_backend *be, dlt_op *op, int dir, cudnnStatus_t st)
{
    cuda_backend *c = _cu(be);
    algo_entry *e = (algo_entry *)op->algo; /* the shape's entry in c->algos, owned by the backend */
    static const char *const names[] = {"forward", "backward-data", "backward-filter"};
    size_t need = 0;
    int old;
    if (!c->cfg.deterministic || dlt_cudnn_probe_answer(st) != 1 || c->capturing)
        return 0;
    if (dir == DIR_FWD) {
        if (e->fwd == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM)
            return 0;
        DLT_TRY(be->err, DLT_CUDNN_CHECK(be->err, cudnnGetConvolutionForwardWorkspaceSize(
                                                      c->dnn, op->xd, op->wd, op->conv_fwd, op->yd,
                                                      CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, &need)));
        old = (int)e->fwd;
        e->fwd = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
    } else if (dir == DIR_DATA) {
        if (e->bwd_data == CUDNN_CONVOLUTION_BWD_DATA_ALGO_1)
            return 0;
        DLT_TRY(be->err, DLT_CUDNN_CHECK(be->err, cudnnGetConvolutionBackwardDataWorkspaceSize(
                                                      c->dnn, op->wd, op->yd, op->conv_bwd_data, op->xd,
                                                      CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, &need)));
        old = (int)e->bwd_data;
        e->bwd_data = CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
    } else {
        if (e->bwd_filter == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1)
            return 0;
        DLT_TRY(be->err, DLT_CUDNN_CHECK(be->err, cudnnGetConvolutionBackwardFilterWorkspaceSize(
                                                      c->dnn, op->xd, op->yd, op->conv_bwd_filter, op->wd,
                                                      CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, &need)));
        old = (int)e->bwd_filter;
        e->bwd_filter = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1;
    }
    fprintf(stderr,
            "dltrain: convolution %d->%d %dx%d/%d on %dx%d: cuDNN refused its deterministic %s algorithm %d "
            "(%s); PyTorch's deterministic default for it from now on\n",
            op->cs.c, op->cs.k, op->cs.r, op->cs.s, op->cs.stride, op->cs.h, op->cs.w, names[dir], old,
            cudnnGetErrorString(st));
    if (need > e->ws)
        e->ws = need;
    return dlt_cu_workspace(be, need) == 0 ? 1 : -ENOMEM;
}

/* Runs a direction's call; under --deterministic once more after a refusal switched its algorithm. */
#define CONV_RUN(be, op, dir, call)                                                                                    \
    do {                                                                                                               \
        cudnnStatus_t st_ = (call);                                                                                    \
        int r_;                                                                                                        \
        if (!dlt_cudnn_ok(st_) && (r_ = _default_on_refusal(be, op, dir, st_)) != 0) {                                 \
            if (r_ < 0)                                                                                                \
                return r_;                                                                                             \
            st_ = (call);                                                                                              \
        }                                                                                                              \
        if (!dlt_cudnn_ok(st_))                                                                                        \
            return dlt_cuda_fail((be)->err, __FILE__, __LINE__, #call, cudnnGetErrorString(st_));                      \
    } while (0)

static int _conv_fwd(dlt_backend *be, dlt_op *op, const float *x, float *y)
{
    cuda_backend *c = _cu(be);
    int rc;
    if ((rc = dlt_cu_conv_weights_ok(be, op)) != 0)
        return rc;
    if (op->x_pad) {
        const dlt_conv_shape *s = &op->cs;
        DLT_TRY(be->err, DLT_CUDA_CHECK(be->err, dlt_k_pad_channels(x, op->x_pad, c->dt, (size_t)s->n * s->h * s->w,
                                                                    s->c, op->cp, (dlt_stream)c->s)));
        x = op->x_pad;
    }
    CONV_RUN(be, op, DIR_FWD,
             cudnnConvolutionForward(c->dnn, &g_one, op->xd, x, op->wd, op->w, op->conv_fwd, op->algo->fwd, c->ws,
                                     c->ws_size, &g_zero, op->yd, y));
    return 0;
}

/* dx = beta dx + the data gradient (beta 0 or 1: cuDNN's blend, in the convolution's own epilogue). */
static int _conv_bwd_data_blend(dlt_backend *be, dlt_op *op, const float *dy, float *dx, const float *beta)
{
    cuda_backend *c = _cu(be);
    int rc;
    if (op->x_pad) {
        return dlt_fail(be->err, -ENOTSUP, "the padded stem convolution has no data gradient (the images need none)");
    }
    if (!op->algo->bwd_data_ok) {
        return dlt_fail(be->err, -ENOTSUP,
                        "cuDNN has no backward-data algorithm for this convolution (%d->%d "
                        "channels, %dx%d)",
                        op->cs.c, op->cs.k, op->cs.r, op->cs.s);
    }
    if ((rc = dlt_cu_conv_weights_ok(be, op)) != 0)
        return rc;
    CONV_RUN(be, op, DIR_DATA,
             cudnnConvolutionBackwardData(c->dnn, &g_one, op->wd, op->w, op->yd, dy, op->conv_bwd_data,
                                          op->algo->bwd_data, c->ws, c->ws_size, beta, op->xd, dx));
    return 0;
}

static int _conv_bwd_data(dlt_backend *be, dlt_op *op, const float *dy, float *dx)
{
    return _conv_bwd_data_blend(be, op, dy, dx, &g_zero);
}

static int _conv_bwd_data_add(dlt_backend *be, dlt_op *op, const float *dy, float *dx)
{
    return _conv_bwd_data_blend(be, op, dy, dx, &g_one);
}

/* dw is KRSC float like the weights: cuDNN writes it directly in fp32/tf32; otherwise it writes
 * its own type (and the stem's 4 channels) into the scratch, and one contiguous cast (or
 * cast-and-unpad) makes the float gradient: no re-layout. */
static int _wgrad_legacy(dlt_backend *be, dlt_op *op, const void *x, const void *dy, float *dw)
{
    cuda_backend *c = _cu(be);
    const dlt_conv_shape *s = &op->cs;
    const int direct = c->dt == DLT_DT_F32 && op->cp == s->c;
    size_t pixels = (size_t)s->k * s->r * s->s;
    CONV_RUN(be, op, DIR_FILTER,
             cudnnConvolutionBackwardFilter(c->dnn, &g_one, op->xd, x, op->yd, dy, op->conv_bwd_filter,
                                            op->algo->bwd_filter, c->ws, c->ws_size, &g_zero, op->wd,
                                            direct ? (void *)dw : c->dw_scratch));
    if (direct)
        return 0;
    if (op->cp == s->c)
        DLT_TRY(be->err,
                DLT_CUDA_CHECK(be->err, dlt_k_cast_to_f32(c->dw_scratch, c->dt, dw, pixels * s->c, (dlt_stream)c->s)));
    else
        DLT_TRY(be->err, DLT_CUDA_CHECK(be->err, dlt_k_unpad_to_f32(c->dw_scratch, c->dt, dw, pixels, op->cp, s->c,
                                                                    (dlt_stream)c->s)));
    return 0;
}

/* The geometry's graph plan when planning chose it (--wgrad-fp32): dw written in fp32 by cuDNN. A
 * refusal when it runs (outside a capture) puts the geometry back on the legacy path, said. */
static int _conv_bwd_weights(dlt_backend *be, dlt_op *op, const float *x, const float *dy, float *dw)
{
    cuda_backend *c = _cu(be);
    algo_entry *e = (algo_entry *)op->algo; /* the shape's entry in c->algos, owned by the backend */
    if (op->x_pad)
        x = op->x_pad; /* padded by the forward of this step: the input has not changed since */
    /* The graph's tensors were declared 16-byte aligned: any other pointer takes the legacy path. */
    if (e->wg_plan && !(((uintptr_t)x | (uintptr_t)dy | (uintptr_t)dw) & 15)) {
        cudnnStatus_t st = _wgrad_graph(c, op, e->wg_plan, x, dy, dw);
        if (dlt_cudnn_ok(st))
            return 0;
        if (dlt_cudnn_probe_answer(st) != 1 || c->capturing)
            return dlt_fail(be->err, -EIO, "convolution %d->%d %dx%d: the fp32 filter gradient (cuDNN engine %lld): %s",
                            op->cs.c, op->cs.k, op->cs.r, op->cs.s, (long long)e->wg_engine, e->wg_pool->err);
        fprintf(stderr,
                "dltrain: convolution %d->%d %dx%d: cuDNN refused its fp32 filter-gradient engine %lld when it ran "
                "(%s); the legacy gradient and its cast from now on\n",
                op->cs.c, op->cs.k, op->cs.r, op->cs.s, (long long)e->wg_engine, e->wg_pool->err);
        e->wg_plan = NULL;
        c->wg_graph--;
    }
    return _wgrad_legacy(be, op, x, dy, dw);
}

int dlt_backend_cuda_wgrad_fp32(const dlt_backend *be, const dlt_op *op)
{
    (void)be;
    return op && op->algo && op->algo->wg_plan ? 1 : 0;
}

void dlt_cu_conv_ops(dlt_backend_ops *ops)
{
    ops->conv_plan = _conv_plan;
    ops->conv_bind_weights = _conv_bind_weights;
    ops->conv_fwd = _conv_fwd;
    ops->conv_bwd_data = _conv_bwd_data;
    ops->conv_bwd_data_add = _conv_bwd_data_add;
    ops->conv_bwd_weights = _conv_bwd_weights;
}
