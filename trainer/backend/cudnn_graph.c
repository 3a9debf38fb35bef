/* SPDX-License-Identifier: Apache-2.0 */
/* cudnn_graph: cuDNN's graph API for the convolution patterns (cudnn_graph.h). */
#include "config.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "trainer/backend/cudnn_graph.h"

void dlt_cg_pool_free(dlt_cg_pool *pool)
{
    while (pool->n > 0)
        cudnnBackendDestroyDescriptor(pool->d[--pool->n]);
}

void dlt_cg_status_words(cudnnStatus_t st, const char *what, char *out, size_t len)
{
    char last[256] = "";
    cudnnGetLastErrorString(last, sizeof(last));
    snprintf(out, len, "%s: %s%s%s", what, cudnnGetErrorString(st), last[0] ? ": " : "", last);
    for (char *c = out; *c; c++)
        if (*c == '\n')
            *c = ' ';
}

/* A cuDNN call's failure into pool->err. 0 on success, -1 else. */
static int _dnn(dlt_cg_pool *pool, cudnnStatus_t st, const char *what)
{
    if (st == CUDNN_STATUS_SUCCESS)
        return 0;
    if (pool)
        dlt_cg_status_words(st, what, pool->err, sizeof(pool->err));
    return -1;
}
#define DNN(pool, call) _dnn((pool), (call), #call)
#define SET(pool, d, attr, type, n, val) DNN(pool, cudnnBackendSetAttribute((d), (attr), (type), (n), (val)))

static cudnnBackendDescriptor_t _new(dlt_cg_pool *pool, cudnnBackendDescriptorType_t type)
{
    cudnnBackendDescriptor_t d = NULL;
    if (pool->n == DLT_CG_MAX_DESC) {
        snprintf(pool->err, sizeof(pool->err), "more than %d cuDNN descriptors in one pool", DLT_CG_MAX_DESC);
        return NULL;
    }
    if (DNN(pool, cudnnBackendCreateDescriptor(type, &d)))
        return NULL;
    pool->d[pool->n++] = d;
    return d;
}

/* A 4-d tensor [n, c, h, w] laid out NHWC (per-channel ones [1, c, 1, 1]), of type dt; virtual: an
 * intermediate no pointer is bound to. 16-byte aligned, as the backend's buffers are. */
static cudnnBackendDescriptor_t _tensor(dlt_cg_pool *pool, int64_t uid, cudnnDataType_t dt, int64_t n, int64_t c,
                                        int64_t h, int64_t w, bool virt)
{
    cudnnBackendDescriptor_t d = _new(pool, CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    int64_t dims[4] = {n, c, h, w}, str[4] = {c * h * w, 1, w * c, c}, align = 16;
    if (!d || SET(pool, d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt) ||
        SET(pool, d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims) ||
        SET(pool, d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, str) ||
        SET(pool, d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid) ||
        SET(pool, d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align) ||
        SET(pool, d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &virt) || DNN(pool, cudnnBackendFinalize(d)))
        return NULL;
    return d;
}

/* A pointwise operation y = mode(x[, b]) computed in fp32. */
static cudnnBackendDescriptor_t _pointwise(dlt_cg_pool *pool, cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x,
                                           cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t y)
{
    cudnnBackendDescriptor_t pw = _new(pool, CUDNN_BACKEND_POINTWISE_DESCRIPTOR), op;
    cudnnDataType_t prec = CUDNN_DATA_FLOAT;
    if (!pw || SET(pool, pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode) ||
        SET(pool, pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec) ||
        DNN(pool, cudnnBackendFinalize(pw)))
        return NULL;
    op = _new(pool, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    if (!op || SET(pool, op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw) ||
        SET(pool, op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x) ||
        (b && SET(pool, op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &b)) ||
        SET(pool, op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y) ||
        DNN(pool, cudnnBackendFinalize(op)))
        return NULL;
    return op;
}

/* The shape's convolution: 2-d cross-correlation with fp32 accumulation, its padding and stride. */
static cudnnBackendDescriptor_t _conv(dlt_cg_pool *pool, const dlt_conv_shape *s)
{
    int64_t two = 2, pads[2] = {s->pad, s->pad}, strides[2] = {s->stride, s->stride}, dil[2] = {1, 1};
    cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    cudnnBackendDescriptor_t conv = _new(pool, CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
    if (!conv || SET(pool, conv, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &two) ||
        SET(pool, conv, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32) ||
        SET(pool, conv, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode) ||
        SET(pool, conv, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pads) ||
        SET(pool, conv, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, pads) ||
        SET(pool, conv, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dil) ||
        SET(pool, conv, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, strides) ||
        DNN(pool, cudnnBackendFinalize(conv)))
        return NULL;
    return conv;
}

/* An operation graph of ops on handle h. */
static cudnnBackendDescriptor_t _graph(dlt_cg_pool *pool, cudnnHandle_t h, cudnnBackendDescriptor_t *ops, int64_t n)
{
    cudnnBackendDescriptor_t g = _new(pool, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    if (!g || SET(pool, g, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, n, ops) ||
        SET(pool, g, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h) || DNN(pool, cudnnBackendFinalize(g)))
        return NULL;
    return g;
}

/* X' = relu(X * scale + bias) into three virtual intermediates of X's shape (fp32, or of type t
 * for DLT_CG_PRO_LOWP), its three operations appended to ops; NULL with pool->err on a refusal. */
static cudnnBackendDescriptor_t _prologue(dlt_cg_pool *pool, cudnnBackendDescriptor_t x, const dlt_conv_shape *s,
                                          cudnnDataType_t t, int kind, cudnnBackendDescriptor_t *ops, int *nops)
{
    cudnnDataType_t vt = kind == DLT_CG_PRO_LOWP ? t : CUDNN_DATA_FLOAT;
    cudnnBackendDescriptor_t sc = _tensor(pool, DLT_CG_SCALE, t, 1, s->c, 1, 1, false),
                             bi = _tensor(pool, DLT_CG_BIAS, t, 1, s->c, 1, 1, false),
                             v1 = _tensor(pool, DLT_CG_VIRTUAL, vt, s->n, s->c, s->h, s->w, true),
                             v2 = _tensor(pool, DLT_CG_VIRTUAL + 1, vt, s->n, s->c, s->h, s->w, true),
                             v3 = _tensor(pool, DLT_CG_VIRTUAL + 2, vt, s->n, s->c, s->h, s->w, true);
    if (!sc || !bi || !v1 || !v2 || !v3 || !(ops[(*nops)++] = _pointwise(pool, CUDNN_POINTWISE_MUL, x, sc, v1)) ||
        !(ops[(*nops)++] = _pointwise(pool, CUDNN_POINTWISE_ADD, v1, bi, v2)) ||
        !(ops[(*nops)++] = _pointwise(pool, CUDNN_POINTWISE_RELU_FWD, v2, NULL, v3)))
        return NULL;
    return v3;
}

cudnnBackendDescriptor_t dlt_cg_fprop_stats_graph(dlt_cg_pool *pool, cudnnHandle_t h, const dlt_conv_shape *s,
                                                  cudnnDataType_t t, int prologue)
{
    cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    cudnnGenStatsMode_t gs = CUDNN_GENSTATS_SUM_SQSUM;
    float alpha = 1.f, beta = 0.f;
    cudnnBackendDescriptor_t x, w, y, sum, sq, conv, cop, gop, ops[5], xin;
    int nops = 0;
    x = _tensor(pool, DLT_CG_X, t, s->n, s->c, s->h, s->w, false);
    w = _tensor(pool, DLT_CG_W, t, s->k, s->c, s->r, s->s, false);
    y = _tensor(pool, DLT_CG_Y, t, s->n, s->k, s->oh, s->ow, false);
    sum = _tensor(pool, DLT_CG_SUM, f32, 1, s->k, 1, 1, false);
    sq = _tensor(pool, DLT_CG_SQSUM, f32, 1, s->k, 1, 1, false);
    if (!x || !w || !y || !sum || !sq)
        return NULL;
    xin = prologue ? _prologue(pool, x, s, t, prologue, ops, &nops) : x;
    if (!xin || !(conv = _conv(pool, s)))
        return NULL;
    cop = _new(pool, CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
    if (!cop || SET(pool, cop, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &xin) ||
        SET(pool, cop, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &w) ||
        SET(pool, cop, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y) ||
        SET(pool, cop, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &conv) ||
        SET(pool, cop, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha) ||
        SET(pool, cop, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &beta) ||
        DNN(pool, cudnnBackendFinalize(cop)))
        return NULL;
    ops[nops++] = cop;
    gop = _new(pool, CUDNN_BACKEND_OPERATION_GEN_STATS_DESCRIPTOR);
    if (!gop || SET(pool, gop, CUDNN_ATTR_OPERATION_GENSTATS_MODE, CUDNN_TYPE_GENSTATS_MODE, 1, &gs) ||
        SET(pool, gop, CUDNN_ATTR_OPERATION_GENSTATS_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &f32) ||
        SET(pool, gop, CUDNN_ATTR_OPERATION_GENSTATS_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y) ||
        SET(pool, gop, CUDNN_ATTR_OPERATION_GENSTATS_SUMDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &sum) ||
        SET(pool, gop, CUDNN_ATTR_OPERATION_GENSTATS_SQSUMDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &sq) ||
        DNN(pool, cudnnBackendFinalize(gop)))
        return NULL;
    ops[nops++] = gop;
    return _graph(pool, h, ops, nops);
}

cudnnBackendDescriptor_t dlt_cg_wgrad_graph(dlt_cg_pool *pool, cudnnHandle_t h, const dlt_conv_shape *s,
                                            cudnnDataType_t t, cudnnDataType_t dwt, int prologue)
{
    float alpha = 1.f, beta = 0.f;
    cudnnBackendDescriptor_t x, dy, dw, conv, op, ops[4], xin;
    int nops = 0;
    x = _tensor(pool, DLT_CG_X, t, s->n, s->c, s->h, s->w, false);
    dy = _tensor(pool, DLT_CG_Y, t, s->n, s->k, s->oh, s->ow, false);
    dw = _tensor(pool, DLT_CG_DW, dwt, s->k, s->c, s->r, s->s, false);
    if (!x || !dy || !dw)
        return NULL;
    xin = prologue ? _prologue(pool, x, s, t, prologue, ops, &nops) : x;
    if (!xin || !(conv = _conv(pool, s)))
        return NULL;
    op = _new(pool, CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR);
    if (!op || SET(pool, op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &xin) ||
        SET(pool, op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &dy) ||
        SET(pool, op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &dw) ||
        SET(pool, op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &conv) ||
        SET(pool, op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha) ||
        SET(pool, op, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA, CUDNN_TYPE_FLOAT, 1, &beta) ||
        DNN(pool, cudnnBackendFinalize(op)))
        return NULL;
    ops[nops++] = op;
    return _graph(pool, h, ops, nops);
}

/* The notes of engine config cfg's engine that a caller may refuse (DLT_CG_* bits: nondeterministic,
 * reduced precision, compiled at run time), and its global index. A note list that cannot be read counts as every note
 * (the caller that needs a guarantee does not get an engine it cannot vouch for). */
static unsigned _notes(cudnnBackendDescriptor_t cfg, int64_t *engine)
{
    cudnnBackendDescriptor_t eng = NULL;
    cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
    int64_t cnt = 0, nnotes = 0;
    cudnnBackendBehaviorNote_t behaviour[CUDNN_BEHAVIOR_NOTE_TYPE_COUNT];
    unsigned found = DLT_CG_DETERMINISTIC | DLT_CG_FULL_PRECISION | DLT_CG_PRECOMPILED;
    *engine = -1;
    if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &eng) != CUDNN_STATUS_SUCCESS)
        return found;
    if (cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cnt, &eng) ==
        CUDNN_STATUS_SUCCESS) {
        cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &cnt, engine);
        if (cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                     CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &nnotes, notes) == CUDNN_STATUS_SUCCESS) {
            found &= DLT_CG_PRECOMPILED;
            for (int64_t i = 0; i < nnotes && i < CUDNN_NUMERICAL_NOTE_TYPE_COUNT; i++)
                if (notes[i] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC)
                    found |= DLT_CG_DETERMINISTIC;
                else if (notes[i] == CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION ||
                         notes[i] == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS)
                    found |= DLT_CG_FULL_PRECISION;
        }
        if (cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
                                     CUDNN_BEHAVIOR_NOTE_TYPE_COUNT, &nnotes, behaviour) == CUDNN_STATUS_SUCCESS) {
            found &= ~(unsigned)DLT_CG_PRECOMPILED;
            for (int64_t i = 0; i < nnotes && i < CUDNN_BEHAVIOR_NOTE_TYPE_COUNT; i++)
                if (behaviour[i] == CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION)
                    found |= DLT_CG_PRECOMPILED;
        }
    }
    cudnnBackendDestroyDescriptor(eng);
    return found;
}

int dlt_cg_plans(dlt_cg_pool *pool, cudnnHandle_t h, cudnnBackendDescriptor_t g, size_t ws_limit, unsigned need,
                 dlt_cg_plan *out, int max, int *proposed)
{
    cudnnBackendHeurMode_t modes[2] = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK};
    int found = 0;
    *proposed = 0;
    pool->err[0] = 0;
    for (int m = 0; m < 2 && found < max; m++) {
        /* The configurations stay in the pool as long as the plans: a plan refers to its own. The
         * heuristics' whole count first (cudnn-frontend's Heuristics.h asks it the same way), then
         * at most DLT_CG_HEUR_RESULTS of them: the ones ranked best. */
        cudnnBackendDescriptor_t heur = _new(pool, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR), cfg[DLT_CG_HEUR_RESULTS];
        int64_t got = 0, count = 0;
        if (!heur || SET(pool, heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &g) ||
            SET(pool, heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &modes[m]) ||
            DNN(pool, cudnnBackendFinalize(heur)) ||
            DNN(pool, cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0,
                                               &count, NULL)))
            continue;
        if (count > DLT_CG_HEUR_RESULTS)
            count = DLT_CG_HEUR_RESULTS;
        if (count <= 0)
            continue;
        for (int64_t i = 0; i < count; i++)
            if (!(cfg[i] = _new(pool, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR)))
                return found;
        if (DNN(pool, cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                               count, &got, cfg)))
            continue;
        if (got > count) /* the attribute's whole count; only the ones asked for were written */
            got = count;
        *proposed += (int)got;
        for (int64_t i = 0; i < got && found < max; i++) {
            int64_t engine = -1, ws = 0, cnt = 0;
            unsigned notes = _notes(cfg[i], &engine), refused = notes & need;
            int seen = 0;
            cudnnBackendDescriptor_t plan;
            for (int j = 0; j < found; j++)
                seen |= out[j].engine == engine && engine >= 0; /* the fallback list repeats mode A's */
            if (seen)
                continue;
            if (refused) {
                snprintf(pool->err, sizeof(pool->err), "engine %lld %s", (long long)engine,
                         refused & DLT_CG_DETERMINISTIC ? "is not deterministic"
                         : refused & DLT_CG_FULL_PRECISION
                             ? "is of reduced precision (cuDNN's numerical notes)"
                             : "compiles its kernel at run time (cuDNN's behaviour notes)");
                continue;
            }
            if (!(plan = _new(pool, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR)))
                return found;
            if (SET(pool, plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h) ||
                SET(pool, plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cfg[i]) ||
                DNN(pool, cudnnBackendFinalize(plan)) ||
                DNN(pool, cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
                                                   &cnt, &ws)))
                continue; /* this engine refuses the graph; the next may not */
            if (ws < 0 || (size_t)ws > ws_limit) {
                snprintf(pool->err, sizeof(pool->err), "engine %lld needs %lld bytes of workspace (limit %zu)",
                         (long long)engine, (long long)ws, ws_limit);
                continue;
            }
            out[found].plan = plan;
            out[found].engine = engine;
            out[found].workspace = (size_t)ws;
            out[found].deterministic = !(notes & DLT_CG_DETERMINISTIC);
            out[found].lacks = notes;
            found++;
        }
    }
    if (*proposed == 0 && !pool->err[0])
        snprintf(pool->err, sizeof(pool->err), "the heuristics (mode A, then the fallback list) proposed no engine");
    return found;
}

cudnnStatus_t dlt_cg_execute(dlt_cg_pool *pool, cudnnHandle_t h, cudnnBackendDescriptor_t plan, int n,
                             const int64_t *uids, void *const *ptrs, void *ws)
{
    cudnnBackendDescriptor_t pack = NULL;
    const char *step = "cudnnBackendCreateDescriptor(VARIANT_PACK)";
    cudnnStatus_t st = cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack);
    if (st == CUDNN_STATUS_SUCCESS) {
        step = "the variant pack's unique ids";
        st = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids);
    }
    if (st == CUDNN_STATUS_SUCCESS) {
        step = "the variant pack's pointers";
        st =
            cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, (void *)ptrs);
    }
    if (st == CUDNN_STATUS_SUCCESS) {
        step = "the variant pack's workspace";
        st = cudnnBackendSetAttribute(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
    }
    if (st == CUDNN_STATUS_SUCCESS) {
        step = "cudnnBackendFinalize(variant pack)";
        st = cudnnBackendFinalize(pack);
    }
    if (st == CUDNN_STATUS_SUCCESS) {
        step = "cudnnBackendExecute";
        st = cudnnBackendExecute(h, plan, pack);
    }
    _dnn(pool, st, step);
    if (pack)
        cudnnBackendDestroyDescriptor(pack);
    return st;
}
