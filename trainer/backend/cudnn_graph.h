/* SPDX-License-Identifier: Apache-2.0 */
/* cudnn_graph: cuDNN's graph (backend) API in C, for the convolution patterns the CUDA backend runs
 * through it (the filter gradient written in fp32 from fp16/bf16 operands) and the ones
 * tests/device/fusion_probe measures (convolution + statistics, with the previous batch norm's
 * scale/bias/ReLU in its prologue). Built as cudnn-frontend builds them (its
 * samples/legacy_samples/fusion_sample.cpp and include/cudnn_frontend/node/conv_wgrad.h): NHWC
 * tensors with their strides, fp32 computation, virtual fp32 intermediates; engines from the
 * heuristics (mode A, then the fallback list), each execution plan finalized or refused by cuDNN
 * itself. No global state: every descriptor lives in the caller's pool, which keeps cuDNN's words
 * for the last refusal. */
#ifndef DLT_CUDNN_GRAPH_H
#define DLT_CUDNN_GRAPH_H

#include <stddef.h>
#include <stdint.h>

#include <cudnn.h>

#include "trainer/backend/backend.h"

#define DLT_CG_MAX_DESC 512
/* Engine configurations taken from each heuristics mode at most (the best ranked). */
#define DLT_CG_HEUR_RESULTS 24

/* The descriptors of one or more graphs and their plans, destroyed together. err: the last
 * failure, with cuDNN's own message (cudnnGetLastErrorString, which names the rule a graph
 * broke); a pool that is full fails its next creation. */
typedef struct {
    cudnnBackendDescriptor_t d[DLT_CG_MAX_DESC];
    int n;
    char err[512];
} dlt_cg_pool;

void dlt_cg_pool_free(dlt_cg_pool *pool);

/* "WHAT: STATUS: cuDNN's last message" (cudnnGetLastErrorString, which names the rule a call broke)
 * into out, on one line. */
void dlt_cg_status_words(cudnnStatus_t st, const char *what, char *out, size_t len);

/* The tensors' unique ids, which an execution binds pointers to. */
enum {
    DLT_CG_X = 1, /* convolution input */
    DLT_CG_W,     /* filter (KRSC) */
    DLT_CG_Y,     /* convolution output; its gradient dY for the filter gradient */
    DLT_CG_SUM,   /* per-channel sum of Y, fp32 [1,K,1,1] */
    DLT_CG_SQSUM, /* per-channel sum of squares of Y */
    DLT_CG_SCALE, /* prologue: the previous batch norm's per-channel scale and bias [1,C,1,1] */
    DLT_CG_BIAS,
    DLT_CG_DW,           /* filter gradient (KRSC) */
    DLT_CG_VIRTUAL = 100 /* and up: intermediates no pointer is bound to */
};

/* The prologue of a graph (its `prologue` argument): none; X' = relu(X * scale + bias) through fp32
 * virtual intermediates (NVIDIA's ConvBNfprop sample, samples/cpp/convolution/fprop.cpp SBRCS); or
 * through intermediates of the tensors' own type t (its ConvBNwgrad sample,
 * samples/cpp/convolution/wgrads.cpp, which also writes dW in t). */
enum { DLT_CG_PRO_NONE = 0, DLT_CG_PRO_F32 = 1, DLT_CG_PRO_LOWP = 2 };

/* Y = conv(X', W) and genstats(Y) (per-channel sum and sum of squares, fp32), where X' = X, or with
 * a prologue (DLT_CG_PRO_*) X' = relu(X * scale + bias) (cuDNN's ConvBNfprop). X, W, Y of type t (scale and bias too);
 * s: the convolution (its n, c, h, w, k, r, s, stride, pad, oh, ow). NULL with pool->err on a refusal. */
cudnnBackendDescriptor_t dlt_cg_fprop_stats_graph(dlt_cg_pool *pool, cudnnHandle_t h, const dlt_conv_shape *s,
                                                  cudnnDataType_t t, int prologue);

/* dW = the filter gradient of conv(X', W) from X and dY of type t, written as type dwt (fp32: no
 * half-precision copy to cast afterwards), where X' = X, or with a prologue (DLT_CG_PRO_*) X' =
 * relu(X * scale + bias) (cuDNN's ConvBNwgrad: the previous batch norm applied on the fly, never
 * stored). */
cudnnBackendDescriptor_t dlt_cg_wgrad_graph(dlt_cg_pool *pool, cudnnHandle_t h, const dlt_conv_shape *s,
                                            cudnnDataType_t t, cudnnDataType_t dwt, int prologue);

/* What dlt_cg_plans may require of an engine (cuDNN's notes): no non-deterministic note; neither a
 * reduced-precision reduction nor inputs converted down; kernels shipped compiled (no runtime
 * compilation, which costs seconds per plan at finalize: NVRTC). */
enum { DLT_CG_DETERMINISTIC = 1, DLT_CG_FULL_PRECISION = 2, DLT_CG_PRECOMPILED = 4 };

/* One finalized execution plan: its engine's global index, workspace, and what cuDNN's notes say of
 * the engine. */
typedef struct {
    cudnnBackendDescriptor_t plan;
    int64_t engine;
    size_t workspace;
    int deterministic;
    unsigned lacks; /* the DLT_CG_* properties the engine does not have (by cuDNN's notes) */
} dlt_cg_plan;

/* Plans for graph g, in the heuristics' order (mode A, then the fallback list, an engine once),
 * at most max of them, each within ws_limit bytes of workspace and with every property in need
 * (DLT_CG_* bits). Returns how many (0: none, pool->err saying why: none proposed, or the last
 * refusal); *proposed: the engine configurations the heuristics offered. */
int dlt_cg_plans(dlt_cg_pool *pool, cudnnHandle_t h, cudnnBackendDescriptor_t g, size_t ws_limit, unsigned need,
                 dlt_cg_plan *out, int max, int *proposed);

/* Runs plan on h's stream with the n tensors uids[i] at ptrs[i] and the workspace ws. The variant
 * pack lives for this call only (pointers may change between calls). cuDNN's status; on a failure
 * pool->err (may be NULL) gets cuDNN's words. */
cudnnStatus_t dlt_cg_execute(dlt_cg_pool *pool, cudnnHandle_t h, cudnnBackendDescriptor_t plan, int n,
                             const int64_t *uids, void *const *ptrs, void *ws);

#endif
