/* SPDX-License-Identifier: Apache-2.0 */
/* cuda_cudnn: the ops table on one GPU. NHWC activations in the run's type (float, half or
 * bfloat16), float master weights, gradients and statistics. cuDNN convolutions with the fastest
 * algorithms found once per shape (cached across layers of the same shape) and one shared
 * workspace (cuda_conv.c); cuDNN batch norm (fused with the residual add and ReLU in fp16); cuDNN
 * max pooling; cuBLAS for the FC layer; kernels of ours for the rest (cuda_kernels.cu); input
 * staging, loss, results, the flat optimizer and CUDA graphs of the step in cuda_step.c.
 * Everything runs on one compute stream (be->stream), which the comm layer's gradient reducer
 * orders its NCCL stream against. Host waits poll the stream and the peer check the comm layer
 * installs, so a lost peer ends the step with an error instead of a hang. */
#include "config.h"

#include "trainer/backend/cuda_backend.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cuda_check.h"
#include "common/tunables.h"
#include "trainer/backend/cuda_internal.h"
#include "trainer/backend/cuda_kernels.h"

/* ------------------------------------------------------------------ memory */

static void *_alloc(dlt_backend *be, size_t bytes)
{
    cuda_backend *c = _cu(be);
    void *p = NULL;
    if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess)
        return NULL;
    if (cudaMemsetAsync(p, 0, bytes ? bytes : 1, c->s) != cudaSuccess || dlt_cu_wait(be, c->s) != 0) {
        cudaFree(p);
        return NULL;
    }
    return p;
}

static void _release(dlt_backend *be, void *p)
{
    (void)be;
    cudaFree(p);
}

static int _upload(dlt_backend *be, void *dst, const void *src, size_t bytes)
{
    DLT_TRY(be->err, DLT_CUDA_CHECK(be->err, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, _cu(be)->s)));
    return dlt_cu_wait(be, _cu(be)->s);
}

static int _download(dlt_backend *be, void *dst, const void *src, size_t bytes)
{
    /* A copy into pageable memory blocks the host until it is done, and with it everything queued
     * before it (gradient reductions included): wait for those first, polling, so a lost peer
     * ends the wait with NCCL's error instead of a hang inside the copy. */
    int rc = dlt_cu_wait(be, _cu(be)->s);
    if (rc)
        return rc;
    DLT_TRY(be->err, DLT_CUDA_CHECK(be->err, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, _cu(be)->s)));
    return dlt_cu_wait(be, _cu(be)->s);
}

static int _copy(dlt_backend *be, void *dst, const void *src, size_t bytes)
{
    /* Ordered on the compute stream with everything else that touches the buffers. */
    if (dst != src && bytes)
        DLT_TRY(be->err,
                DLT_CUDA_CHECK(be->err, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, _cu(be)->s)));
    return 0;
}

static int _sync(dlt_backend *be)
{
    return dlt_cu_wait(be, _cu(be)->s);
}

static int _act_from_float(dlt_backend *be, float *act, const float *host, size_t n)
{
    cuda_backend *c = _cu(be);
    float *tmp = NULL;
    int rc, ke;
    if (c->dt == DLT_DT_F32)
        return _upload(be, act, host, n * sizeof(float));
    DLT_TRY(be->err, DLT_CUDA_CHECK(be->err, cudaMalloc((void **)&tmp, n * sizeof(float) + 1)));
    rc = _upload(be, tmp, host, n * sizeof(float));
    if (rc == 0 && (ke = dlt_k_cast_from_f32(tmp, act, c->dt, n, (dlt_stream)c->s)) != 0)
        rc = dlt_cuda_fail(be->err, __FILE__, __LINE__, "cast kernel", cudaGetErrorString((cudaError_t)ke));
    if (rc == 0)
        rc = dlt_cu_wait(be, c->s);
    cudaFree(tmp);
    return rc;
}

static int _act_to_float(dlt_backend *be, float *host, const float *act, size_t n)
{
    cuda_backend *c = _cu(be);
    float *tmp = NULL;
    int rc = 0, ke;
    if (c->dt == DLT_DT_F32)
        return _download(be, host, act, n * sizeof(float));
    DLT_TRY(be->err, DLT_CUDA_CHECK(be->err, cudaMalloc((void **)&tmp, n * sizeof(float) + 1)));
    if ((ke = dlt_k_cast_to_f32(act, c->dt, tmp, n, (dlt_stream)c->s)) != 0)
        rc = dlt_cuda_fail(be->err, __FILE__, __LINE__, "cast kernel", cudaGetErrorString((cudaError_t)ke));
    if (rc == 0)
        rc = _download(be, host, tmp, n * sizeof(float));
    cudaFree(tmp);
    return rc;
}

/* ------------------------------------------------------------------ descriptors */

/* ------------------------------------------------------------------ batch norm */

/* The elements of a batch-norm layer's activation. */
static size_t _bn_count(const dlt_op *op)
{
    return (size_t)op->as.n * op->as.c * op->as.h * op->as.w;
}

/* Batch norm goes through cuDNN's Ex API with the workspace and reserve space it asks for, for
 * every layer: the NHWC persistent mode (fp16/bf16) may need both, also without the fused
 * add/ReLU, and the plain API cannot be given them. PyTorch does the same
 * (aten/src/ATen/native/cudnn/BatchNorm.cpp: CUDNN_BATCHNORM_OPS_BN, no z, no activation,
 * workspace and reserve queried per input). Statuses are returned raw: the probe reads them. */
static cudnnStatus_t _bn_sizes(cuda_backend *c, dlt_op *op, cudnnBatchNormMode_t mode, cudnnBatchNormOps_t ops,
                               size_t *ws, size_t *reserve)
{
    cudnnActivationDescriptor_t act = ops == CUDNN_BATCHNORM_OPS_BN ? NULL : op->act;
    cudnnTensorDescriptor_t z = ops == CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION ? op->xd : NULL;
    size_t r = 0, f = 0, b = 0;
    cudnnStatus_t st = cudnnGetBatchNormalizationTrainingExReserveSpaceSize(c->dnn, mode, ops, act, op->xd, &r);
    if (dlt_cudnn_ok(st))
        st = cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(c->dnn, mode, ops, op->xd, z, op->xd, op->pd, act,
                                                                      &f);
    if (dlt_cudnn_ok(st))
        st = cudnnGetBatchNormalizationBackwardExWorkspaceSize(c->dnn, mode, ops, op->xd, op->xd, op->xd, z, op->xd,
                                                               op->pd, act, &b);
    if (!dlt_cudnn_ok(st))
        return st;
    *reserve = r > *reserve ? r : *reserve;
    f = f > b ? f : b;
    *ws = f > *ws ? f : *ws;
    return st;
}

/* Every size this shape's mode and ops need, into *ws and the op's reserve size. */
static cudnnStatus_t _bn_all_sizes(cuda_backend *c, dlt_op *op, cudnnBatchNormMode_t mode, int fused, size_t *ws)
{
    cudnnStatus_t st = _bn_sizes(c, op, mode, CUDNN_BATCHNORM_OPS_BN, ws, &op->reserve_size);
    if (dlt_cudnn_ok(st) && fused)
        st = _bn_sizes(c, op, mode, CUDNN_BATCHNORM_OPS_BN_ACTIVATION, ws, &op->reserve_size);
    if (dlt_cudnn_ok(st) && fused)
        st = _bn_sizes(c, op, mode, CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION, ws, &op->reserve_size);
    return st;
}

/* One training forward and backward of op's real shape in mode (fused: BN+add+ReLU and BN+ReLU,
 * else plain BN) on scratch buffers: 0 it ran, 1 cuDNN has no kernel for it (*st says which
 * refusal), -EIO another failure (be->err says which). */
static int _bn_try(dlt_backend *be, dlt_op *op, cudnnBatchNormMode_t mode, int fused, cudnnStatus_t *st)
{
    cuda_backend *c = _cu(be);
    const dlt_act_shape s = op->as;
    const size_t bytes = _bn_count(op) * _dt_size(c->dt);
    void *x = NULL, *z = NULL, *y = NULL, *dx = NULL, *dz = NULL, *reserve = NULL;
    float *p = NULL;
    size_t ws = 0, keep_reserve = op->reserve_size;
    int rc = 0;
    op->reserve_size = 0;
    *st = _bn_all_sizes(c, op, mode, fused, &ws);
    if (!dlt_cudnn_ok(*st))
        goto answer;
    if ((rc = dlt_cu_workspace(be, ws)) != 0)
        goto out;
    /* Zeroed on the backend's stream, which the probe's kernels run on: a plain cudaMemset runs on
     * the legacy default stream, which a non-blocking stream does not wait for. */
    if (cudaMalloc(&x, bytes) != cudaSuccess || cudaMalloc(&z, bytes) != cudaSuccess ||
        cudaMalloc(&y, bytes) != cudaSuccess || cudaMalloc(&dx, bytes) != cudaSuccess ||
        cudaMalloc(&dz, bytes) != cudaSuccess ||
        cudaMalloc((void **)&p, 6 * (size_t)s.c * sizeof(float)) != cudaSuccess ||
        (op->reserve_size && cudaMalloc(&reserve, op->reserve_size) != cudaSuccess) ||
        cudaMemsetAsync(x, 0, bytes, c->s) != cudaSuccess || cudaMemsetAsync(z, 0, bytes, c->s) != cudaSuccess ||
        cudaMemsetAsync(dz, 0, bytes, c->s) != cudaSuccess ||
        cudaMemsetAsync(p, 0, 6 * (size_t)s.c * sizeof(float), c->s) != cudaSuccess) {
        rc = dlt_cuda_fail(be->err, __FILE__, __LINE__, "batch-norm probe buffers",
                           cudaGetErrorString(cudaGetLastError()));
        goto out;
    }
    for (int pass = 0; pass < (fused ? 2 : 1) && dlt_cudnn_ok(*st); pass++) {
        cudnnBatchNormOps_t ops = !fused      ? CUDNN_BATCHNORM_OPS_BN
                                  : pass == 0 ? CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION
                                              : CUDNN_BATCHNORM_OPS_BN_ACTIVATION;
        int add = ops == CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION;
        cudnnActivationDescriptor_t act = fused ? op->act : NULL;
        /* With running statistics, as every training forward passes them (bn_bind_running). */
        *st = cudnnBatchNormalizationForwardTrainingEx(c->dnn, mode, ops, &g_one, &g_zero, op->xd, x,
                                                       add ? op->xd : NULL, add ? z : NULL, op->xd, y, op->pd, p,
                                                       p + s.c, 0.1, p + 4 * s.c, p + 5 * s.c, op->eps, op->save_mean,
                                                       op->save_inv, act, c->ws, c->ws_size, reserve, op->reserve_size);
        if (dlt_cudnn_ok(*st))
            *st = cudnnBatchNormalizationBackwardEx(
                c->dnn, mode, ops, &g_one, &g_zero, &g_one, &g_zero, op->xd, x, fused ? op->xd : NULL, fused ? y : NULL,
                op->xd, y, add ? op->xd : NULL, add ? dz : NULL, op->xd, dx, op->pd, p, fused ? p + s.c : NULL,
                p + 2 * s.c, p + 3 * s.c, op->eps, op->save_mean, op->save_inv, act, c->ws, c->ws_size, reserve,
                op->reserve_size);
    }
    if (dlt_cudnn_ok(*st) && cudaStreamSynchronize(c->s) != cudaSuccess) {
        rc = dlt_cuda_fail(be->err, __FILE__, __LINE__, "batch-norm probe", cudaGetErrorString(cudaGetLastError()));
        goto out;
    }
answer:
    rc = dlt_cudnn_probe_answer(*st);
    if (rc < 0)
        rc = dlt_cuda_fail(be->err, __FILE__, __LINE__, "batch-norm probe", cudnnGetErrorString(*st));
out:
    cudaStreamSynchronize(c->s); /* nothing of the probe's may still run on the buffers freed below */
    cudaFree(x), cudaFree(z), cudaFree(y), cudaFree(dx), cudaFree(dz), cudaFree(p), cudaFree(reserve);
    op->reserve_size = keep_reserve;
    return rc;
}

/* op's mode and fusion: decided once per shape by running each candidate, best first (fused
 * persistent in fp16/bf16, persistent, plain spatial), the first cuDNN runs winning; PyTorch
 * trains in the persistent mode too (BatchNorm.cpp: SPATIAL_PERSISTENT when training). A fallback
 * is said once per shape; only a NOT_SUPPORTED about this configuration is one (cudnn_status.h):
 * an install problem or any other failure ends the planning with cuDNN's words. */
static int _bn_choose(dlt_backend *be, dlt_op *op)
{
    cuda_backend *c = _cu(be);
    struct {
        cudnnBatchNormMode_t mode;
        int fused;
        const char *name;
    } cand[3];
    int nc = 0, i, rc;
    cudnnStatus_t st = CUDNN_STATUS_SUCCESS, first = CUDNN_STATUS_SUCCESS;
    bn_choice *ch;
    for (ch = c->bn_choices; ch; ch = ch->next)
        if (!memcmp(&ch->s, &op->as, sizeof(op->as))) {
            op->bn_mode = ch->mode;
            op->bn_fused = ch->fused;
            return 0;
        }
    if (c->bn_fusable)
        cand[nc].mode = c->bn_mode, cand[nc].fused = 1, cand[nc++].name = "fused batch norm + add + ReLU";
    if (c->bn_mode != CUDNN_BATCHNORM_SPATIAL)
        cand[nc].mode = c->bn_mode, cand[nc].fused = 0, cand[nc++].name = "persistent batch norm";
    cand[nc].mode = CUDNN_BATCHNORM_SPATIAL, cand[nc].fused = 0, cand[nc++].name = "spatial batch norm";
    for (i = 0; i < nc; i++) {
        if ((rc = _bn_try(be, op, cand[i].mode, cand[i].fused, &st)) < 0)
            return rc;
        if (rc == 0)
            break;
        if (i == 0)
            first = st;
    }
    if (i == nc) {
        return dlt_fail(be->err, -ENOTSUP, "cuDNN runs no batch-norm training kernel for %dx%dx%dx%d (NHWC, %s): %s",
                        op->as.n, op->as.c, op->as.h, op->as.w, dlt_precision_name(c->base.precision),
                        cudnnGetErrorString(st));
    }
    if (i > 0)
        fprintf(stderr,
                "dltrain: batch norm %dx%dx%dx%d (%s): cuDNN has no %s kernel for this shape (%s); %s for "
                "it\n",
                op->as.n, op->as.c, op->as.h, op->as.w, dlt_precision_name(c->base.precision), cand[0].name,
                cudnnGetErrorString(first), cand[i].name);
    if (!(ch = calloc(1, sizeof(*ch)))) {
        return dlt_fail(be->err, -ENOMEM, "out of memory");
    }
    ch->s = op->as;
    ch->mode = op->bn_mode = cand[i].mode;
    ch->fused = op->bn_fused = cand[i].fused;
    ch->next = c->bn_choices;
    c->bn_choices = ch;
    return 0;
}

static int _bn_plan(dlt_backend *be, const dlt_act_shape *s, float eps, dlt_op **out)
{
    cuda_backend *c = _cu(be);
    dlt_op *op = calloc(1, sizeof(*op));
    size_t ws = 0;
    cudnnStatus_t st;
    int rc;
    *out = op;
    if (!op) {
        return dlt_fail(be->err, -ENOMEM, "out of memory");
    }
    op->as = *s;
    op->eps = eps < CUDNN_BN_MIN_EPSILON ? (float)CUDNN_BN_MIN_EPSILON : eps;
    if ((rc = dlt_cu_nhwc(be, &op->xd, s->n, s->c, s->h, s->w)) != 0)
        return rc;
    DLT_TRY(be->err, DLT_CUDNN_CHECK(be->err, cudnnCreateTensorDescriptor(&op->pd)));
    DLT_TRY(be->err, DLT_CUDNN_CHECK(be->err, cudnnDeriveBNTensorDescriptor(op->pd, op->xd, c->bn_mode)));
    DLT_TRY(be->err, DLT_CUDA_CHECK(be->err, cudaMalloc((void **)&op->save_mean, (size_t)s->c * sizeof(float))));
    DLT_TRY(be->err, DLT_CUDA_CHECK(be->err, cudaMalloc((void **)&op->save_inv, (size_t)s->c * sizeof(float))));
    if (c->bn_fusable) {
        DLT_TRY(be->err, DLT_CUDNN_CHECK(be->err, cudnnCreateActivationDescriptor(&op->act)));
        DLT_TRY(be->err, DLT_CUDNN_CHECK(be->err, cudnnSetActivationDescriptor(op->act, CUDNN_ACTIVATION_RELU,
                                                                               CUDNN_NOT_PROPAGATE_NAN, 0.0)));
    }
    if ((rc = _bn_choose(be, op)) != 0)
        return rc;
    if (!dlt_cudnn_ok(st = _bn_all_sizes(c, op, op->bn_mode, op->bn_fused, &ws)))
        return dlt_cuda_fail(be->err, __FILE__, __LINE__, "batch-norm workspace sizes", cudnnGetErrorString(st));
    if (op->reserve_size)
        DLT_TRY(be->err, DLT_CUDA_CHECK(be->err, cudaMalloc(&op->reserve, op->reserve_size)));
    /* An unfused layer of a fused-capable run does its ReLU backward into scratch when the network
     * asks for no residual gradient. */
    if (c->bn_fusable && !op->bn_fused &&
        (rc = _grow(be, &c->bn_scratch, NULL, &c->bn_scratch_size, _bn_count(op) * _dt_size(c->dt), c->s)) != 0)
        return rc;
    /* The convolution + batch-norm chain's backward sums its partials here (bn_bwd_fused). */
    if (c->ops.bn_bwd_fused &&
        (rc = _grow(be, (void **)&c->fu_scratch, NULL, &c->fu_scratch_size, dlt_k_bn_bwd_scratch(s->c), c->s)) != 0)
        return rc;
    return dlt_cu_workspace(be, ws);
}

/* Batch mean and biased variance for the caller, from cuDNN's saved mean and 1/sqrt(var + eps). */
static int _bn_report(dlt_backend *be, dlt_op *op, float *mean, float *var)
{
    DLT_TRY(be->err, DLT_CUDA_CHECK(be->err, dlt_k_bn_saved_to_var(op->save_mean, op->save_inv, mean, var, op->as.c,
                                                                   op->eps, (dlt_stream)_cu(be)->s)));
    return 0;
}

/* The running statistics live in the network's buffer; cuDNN updates them inside the forward
 * (exponentialAverageFactor = PyTorch's momentum, the variance unbiased by m/(m-1): PyTorch hands
 * its running_var to cuDNN the same way, aten/src/ATen/native/cudnn/BatchNorm.cpp), instead of two
 * kernels per layer after it (the saved statistics' conversion and bn_stats_update: 106 launches a
 * ResNet-50 step). cuda_ops_check compares the result with the CPU's bn_stats_update. */
static int _bn_bind_running(dlt_backend *be, dlt_op *op, float *run_mean, float *run_var, float momentum)
{
    if (!run_mean || !run_var || !(momentum >= 0.f && momentum <= 1.f))
        return dlt_fail(be->err, -EINVAL, "batch-norm running statistics: no buffer, or momentum %g outside [0, 1]",
                        (double)momentum);
    op->run_mean = run_mean;
    op->run_var = run_var;
    op->run_factor = momentum;
    return 0;
}

/* After a training forward: the batch statistics for the caller where it keeps the running ones
 * itself (none bound); else nothing, as bn_bwd reads cuDNN's own saved statistics. */
static int _bn_after_forward(dlt_backend *be, dlt_op *op, float *mean, float *var)
{
    return op->run_mean ? 0 : _bn_report(be, op, mean, var);
}

static int _bn_fwd_train(dlt_backend *be, dlt_op *op, const float *x, const float *gamma, const float *beta, float *y,
                         float *mean, float *var)
{
    cuda_backend *c = _cu(be);
    DLT_TRY(be->err, DLT_CUDNN_CHECK(be->err, cudnnBatchNormalizationForwardTrainingEx(
                                                  c->dnn, op->bn_mode, CUDNN_BATCHNORM_OPS_BN, &g_one, &g_zero, op->xd,
                                                  x, NULL, NULL, op->xd, y, op->pd, gamma, beta, op->run_factor,
                                                  op->run_mean, op->run_var, op->eps, op->save_mean, op->save_inv, NULL,
                                                  c->ws, c->ws_size, op->reserve, op->reserve_size)));
    return _bn_after_forward(be, op, mean, var);
}

static int _bn_fwd_infer(dlt_backend *be, dlt_op *op, const float *x, const float *gamma, const float *beta,
                         const float *mean, const float *var, float *y)
{
    cuda_backend *c = _cu(be);
    DLT_TRY(be->err, DLT_CUDNN_CHECK(be->err, cudnnBatchNormalizationForwardInference(
                                                  c->dnn, CUDNN_BATCHNORM_SPATIAL, &g_one, &g_zero, op->xd, x, op->xd,
                                                  y, op->pd, gamma, beta, mean, var, op->eps)));
    return 0;
}

static int _bn_bwd(dlt_backend *be, dlt_op *op, const float *x, const float *dy, const float *gamma, const float *beta,
                   const float *mean, const float *var, float *dx, float *dgamma, float *dbeta)
{
    cuda_backend *c = _cu(be);
    (void)beta;
    (void)mean;
    (void)var; /* cuDNN's own saved statistics of the forward are the same numbers, more precisely */
    DLT_TRY(be->err,
            DLT_CUDNN_CHECK(be->err, cudnnBatchNormalizationBackwardEx(
                                         c->dnn, op->bn_mode, CUDNN_BATCHNORM_OPS_BN, &g_one, &g_zero, &g_one, &g_zero,
                                         op->xd, x, NULL, NULL, op->xd, dy, NULL, NULL, op->xd, dx, op->pd, gamma, NULL,
                                         dgamma, dbeta, op->eps, op->save_mean, op->save_inv, NULL, c->ws, c->ws_size,
                                         op->reserve, op->reserve_size)));
    return 0;
}

static int _bn_fwd_train_relu(dlt_backend *be, dlt_op *op, const float *x, const float *z, const float *gamma,
                              const float *beta, float *y, float *mean, float *var)
{
    cuda_backend *c = _cu(be);
    cudnnBatchNormOps_t ops = z ? CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION : CUDNN_BATCHNORM_OPS_BN_ACTIVATION;
    int rc;
    if (!op->bn_fused) { /* this shape's fallback: batch norm, then the add + ReLU kernel */
        if ((rc = _bn_fwd_train(be, op, x, gamma, beta, y, mean, var)) != 0)
            return rc;
        DLT_TRY(be->err, DLT_CUDA_CHECK(be->err, dlt_k_add_relu(y, z, c->dt, _bn_count(op), (dlt_stream)c->s)));
        return 0;
    }
    DLT_TRY(be->err, DLT_CUDNN_CHECK(be->err, cudnnBatchNormalizationForwardTrainingEx(
                                                  c->dnn, op->bn_mode, ops, &g_one, &g_zero, op->xd, x,
                                                  z ? op->xd : NULL, z, op->xd, y, op->pd, gamma, beta, op->run_factor,
                                                  op->run_mean, op->run_var, op->eps, op->save_mean, op->save_inv,
                                                  op->act, c->ws, c->ws_size, op->reserve, op->reserve_size)));
    return _bn_after_forward(be, op, mean, var);
}

static int _bn_bwd_relu(dlt_backend *be, dlt_op *op, const float *x, const float *y, const float *dy,
                        const float *gamma, const float *beta, float *dx, float *dz, float *dgamma, float *dbeta)
{
    cuda_backend *c = _cu(be);
    cudnnBatchNormOps_t ops = dz ? CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION : CUDNN_BATCHNORM_OPS_BN_ACTIVATION;
    if (!op->bn_fused) { /* relu'(y) dy is the residual's gradient and batch norm's input gradient */
        void *g = dz ? (void *)dz : c->bn_scratch;
        DLT_TRY(be->err, DLT_CUDA_CHECK(be->err, dlt_k_relu_bwd(y, dy, g, c->dt, _bn_count(op), (dlt_stream)c->s)));
        return _bn_bwd(be, op, x, g, gamma, beta, NULL, NULL, dx, dgamma, dbeta);
    }
    DLT_TRY(be->err, DLT_CUDNN_CHECK(be->err, cudnnBatchNormalizationBackwardEx(
                                                  c->dnn, op->bn_mode, ops, &g_one, &g_zero, &g_one, &g_zero, op->xd, x,
                                                  op->xd, y, op->xd, dy, dz ? op->xd : NULL, dz, op->xd, dx, op->pd,
                                                  gamma, beta, dgamma, dbeta, op->eps, op->save_mean, op->save_inv,
                                                  op->act, c->ws, c->ws_size, op->reserve, op->reserve_size)));
    return 0;
}

static int _bn_stats_update(dlt_backend *be, float *rm, float *rv, const float *bm, const float *bv, int ch,
                            float momentum, float unbias)
{
    DLT_TRY(be->err, DLT_CUDA_CHECK(
                         be->err, dlt_k_bn_stats_update(rm, rv, bm, bv, ch, momentum, unbias, (dlt_stream)_cu(be)->s)));
    return 0;
}

/* ------------------------------------------------------------------ pooling, elementwise */

static int _maxpool_plan(dlt_backend *be, const dlt_act_shape *in, int k, int stride, int pad, dlt_op **out)
{
    dlt_op *op = calloc(1, sizeof(*op));
    int rc;
    *out = op;
    if (!op) {
        return dlt_fail(be->err, -ENOMEM, "out of memory");
    }
    op->as = *in;
    if ((rc = dlt_cu_nhwc(be, &op->xd, in->n, in->c, in->h, in->w)) != 0 ||
        (rc = dlt_cu_nhwc(be, &op->yd, in->n, in->c, dlt_out_size(in->h, k, stride, pad),
                          dlt_out_size(in->w, k, stride, pad))))
        return rc;
    DLT_TRY(be->err, DLT_CUDNN_CHECK(be->err, cudnnCreatePoolingDescriptor(&op->pool)));
    /* --deterministic: cuDNN's plain max-pooling backward may accumulate overlapping windows
     * (ResNet's 3x3 stride 2) with atomics, whose order varies; MAX_DETERMINISTIC does not
     * (cudnn_ops.h; cuDNN's reproducibility notes). */
    cudnnPoolingMode_t mode = _cu(be)->cfg.deterministic ? CUDNN_POOLING_MAX_DETERMINISTIC : CUDNN_POOLING_MAX;
    DLT_TRY(be->err, DLT_CUDNN_CHECK(be->err, cudnnSetPooling2dDescriptor(op->pool, mode, CUDNN_NOT_PROPAGATE_NAN, k, k,
                                                                          pad, pad, stride, stride)));
    return 0;
}

static int _maxpool_fwd(dlt_backend *be, dlt_op *op, const float *x, float *y)
{
    DLT_TRY(be->err, DLT_CUDNN_CHECK(
                         be->err, cudnnPoolingForward(_cu(be)->dnn, op->pool, &g_one, op->xd, x, &g_zero, op->yd, y)));
    op->px = x; /* backward reads the forward's input and output (they live until then) */
    op->py = y;
    return 0;
}

static int _maxpool_bwd(dlt_backend *be, dlt_op *op, const float *dy, float *dx)
{
    if (!op->px) {
        return dlt_fail(be->err, -EINVAL, "max-pool backward before any forward");
    }
    DLT_TRY(be->err, DLT_CUDNN_CHECK(be->err, cudnnPoolingBackward(_cu(be)->dnn, op->pool, &g_one, op->yd, op->py,
                                                                   op->yd, dy, op->xd, op->px, &g_zero, op->xd, dx)));
    return 0;
}

static int _add_relu(dlt_backend *be, float *y, const float *add, size_t n)
{
    DLT_TRY(be->err, DLT_CUDA_CHECK(be->err, dlt_k_add_relu(y, add, _cu(be)->dt, n, (dlt_stream)_cu(be)->s)));
    return 0;
}

static int _relu_bwd(dlt_backend *be, const float *y, const float *dy, float *dz, size_t n)
{
    DLT_TRY(be->err, DLT_CUDA_CHECK(be->err, dlt_k_relu_bwd(y, dy, dz, _cu(be)->dt, n, (dlt_stream)_cu(be)->s)));
    return 0;
}

static int _accumulate(dlt_backend *be, float *dst, const float *src, size_t n)
{
    DLT_TRY(be->err, DLT_CUDA_CHECK(be->err, dlt_k_accumulate(dst, src, _cu(be)->dt, n, (dlt_stream)_cu(be)->s)));
    return 0;
}

static int _avgpool_fwd(dlt_backend *be, const dlt_act_shape *s, const float *x, float *y)
{
    DLT_TRY(be->err, DLT_CUDA_CHECK(be->err, dlt_k_avgpool_fwd(x, y, _cu(be)->dt, s->n, s->h * s->w, s->c,
                                                               (dlt_stream)_cu(be)->s)));
    return 0;
}

static int _avgpool_bwd(dlt_backend *be, const dlt_act_shape *s, const float *dy, float *dx)
{
    DLT_TRY(be->err, DLT_CUDA_CHECK(be->err, dlt_k_avgpool_bwd(dy, dx, _cu(be)->dt, s->n, s->h * s->w, s->c,
                                                               (dlt_stream)_cu(be)->s)));
    return 0;
}

/* ------------------------------------------------------------------ cuBLAS */

/* The FC weights in the activation type: the float weights, or their place in the twin, which
 * the optimizer keeps up to date (no cast per call). */
static int _fc_weights(dlt_backend *be, const float *w, size_t n, const void **out)
{
    cuda_backend *c = _cu(be);
    size_t off;
    int rc;
    if (c->dt == DLT_DT_F32) {
        *out = w;
        return 0;
    }
    if ((rc = dlt_cu_param_offset(be, w, n, "FC weights", &off)) != 0)
        return rc;
    *out = (const char *)c->twin + off * _dt_size(c->dt);
    return 0;
}

static int _fc_fwd(dlt_backend *be, const float *x, const float *w, const float *b, float *y, int n, int ch, int k)
{
    cuda_backend *c = _cu(be);
    const void *wl;
    int rc;
    /* y^T (k x n) = W (k x c) x^T; W's row-major [k, c] storage read column-major is W^T. */
    if ((rc = _fc_weights(be, w, (size_t)k * ch, &wl)) != 0)
        return rc;
    DLT_TRY(be->err, DLT_CUDA_CHECK(be->err, dlt_k_bias_rows(y, b, c->dt, n, k, (dlt_stream)c->s)));
    DLT_TRY(be->err, DLT_CUBLAS_CHECK(be->err, cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, k, n, ch, &g_one, wl,
                                                            c->blas_dt, ch, x, c->blas_dt, ch, &g_one, y, c->blas_dt, k,
                                                            c->blas_compute, CUBLAS_GEMM_DEFAULT)));
    return 0;
}

static int _fc_bwd(dlt_backend *be, const float *x, const float *w, const float *dy, float *dx, float *dw, float *db,
                   int n, int ch, int k)
{
    cuda_backend *c = _cu(be);
    const void *wl;
    int rc;
    if ((rc = _fc_weights(be, w, (size_t)k * ch, &wl)) != 0)
        return rc;
    /* dW^T (c x k) = x^T (c x n) dy (n x k), written as float whatever the activation type. */
    DLT_TRY(be->err, DLT_CUBLAS_CHECK(be->err, cublasGemmEx(c->blas, CUBLAS_OP_N, CUBLAS_OP_T, ch, k, n, &g_one, x,
                                                            c->blas_dt, ch, dy, c->blas_dt, k, &g_zero, dw, CUDA_R_32F,
                                                            ch, c->blas_compute, CUBLAS_GEMM_DEFAULT)));
    DLT_TRY(be->err, DLT_CUDA_CHECK(be->err, dlt_k_colsum(dy, c->dt, db, n, k, (dlt_stream)c->s)));
    /* dx^T (c x n) = W^T (c x k) dy^T (k x n) */
    DLT_TRY(be->err, DLT_CUBLAS_CHECK(be->err, cublasGemmEx(c->blas, CUBLAS_OP_N, CUBLAS_OP_N, ch, n, k, &g_one, wl,
                                                            c->blas_dt, ch, dy, c->blas_dt, k, &g_zero, dx, c->blas_dt,
                                                            ch, c->blas_compute, CUBLAS_GEMM_DEFAULT)));
    return 0;
}

/* ------------------------------------------------------------------ lifetime */

static void _op_destroy(dlt_backend *be, dlt_op *op)
{
    cuda_backend *c = _cu(be);
    if (!op)
        return;
    if (c->stem_op == op) {
        c->stem_op = NULL;
        c->stem_lo = c->stem_hi = 0;
    }
    if (op->xd)
        cudnnDestroyTensorDescriptor(op->xd);
    if (op->yd)
        cudnnDestroyTensorDescriptor(op->yd);
    if (op->pd)
        cudnnDestroyTensorDescriptor(op->pd);
    if (op->wd)
        cudnnDestroyFilterDescriptor(op->wd);
    if (op->conv)
        cudnnDestroyConvolutionDescriptor(op->conv);
    dlt_cu_conv_free_descriptors(op);
    cudaFree(op->x_pad);
    if (op->act)
        cudnnDestroyActivationDescriptor(op->act);
    if (op->pool)
        cudnnDestroyPoolingDescriptor(op->pool);
    cudaFree(op->w_pad);
    cudaFree(op->save_mean);
    cudaFree(op->save_inv);
    cudaFree(op->reserve);
    free(op);
}

static void _destroy(dlt_backend *be)
{
    cuda_backend *c = _cu(be);
    if (!c)
        return;
    dlt_cu_graph_ops.release(&c->base); /* a capture left open would fail the synchronize below */
    if (c->s)
        cudaStreamSynchronize(c->s);
    dlt_cu_conv_free_algos(c);
    while (c->bn_choices) {
        bn_choice *n = c->bn_choices->next;
        free(c->bn_choices);
        c->bn_choices = n;
    }
    cudaFree(c->bn_scratch);
    if (c->blas) /* before its workspace goes */
        cublasDestroy(c->blas);
    c->blas = NULL;
    cudaFree(c->blas_ws);
    if (c->copy)
        cudaStreamSynchronize(c->copy);
    for (int i = 0; i < DLT_INPUT_STAGED; i++) {
        cudaFree(c->in[i].dev);
        if (c->in[i].staged)
            cudaEventDestroy(c->in[i].staged);
        if (c->in[i].consumed)
            cudaEventDestroy(c->in[i].consumed);
    }
    if (c->labels_free)
        cudaEventDestroy(c->labels_free);
    dlt_cu_timer_release(c);
    cudaFree(c->ws);
    cudaFree(c->d_labels);
    cudaFree(c->d_results);
    cudaFree(c->sum_scratch);
    cudaFree(c->d_chunks);
    cudaFree(c->twin);
    cudaFree(c->dw_scratch);
    cudaFree(c->fu_scratch);
    cudaFreeHost(c->pin_labels);
    cudaFreeHost(c->pin_res);
    if (c->dnn)
        cudnnDestroy(c->dnn);
    if (c->s)
        cudaStreamDestroy(c->s);
    if (c->copy)
        cudaStreamDestroy(c->copy);
    pthread_mutex_destroy(&c->graph_mu);
    free(c);
}

/* The rest of the table: dlt_cu_conv_ops and dlt_cu_step_ops. */
static const dlt_backend_ops g_cuda_ops = {
    .name = "cuda-cudnn",
    .destroy = _destroy,
    .op_destroy = _op_destroy,
    .alloc = _alloc,
    .release = _release,
    .upload = _upload,
    .download = _download,
    .copy = _copy,
    .sync = _sync,
    .act_from_float = _act_from_float,
    .act_to_float = _act_to_float,
    .bn_plan = _bn_plan,
    .bn_fwd_train = _bn_fwd_train,
    .bn_fwd_infer = _bn_fwd_infer,
    .bn_bwd = _bn_bwd,
    .bn_stats_update = _bn_stats_update,
    .bn_bind_running = _bn_bind_running,
    .maxpool_plan = _maxpool_plan,
    .maxpool_fwd = _maxpool_fwd,
    .maxpool_bwd = _maxpool_bwd,
    .add_relu = _add_relu,
    .relu_bwd = _relu_bwd,
    .accumulate = _accumulate,
    .avgpool_fwd = _avgpool_fwd,
    .avgpool_bwd = _avgpool_bwd,
    .fc_fwd = _fc_fwd,
    .fc_bwd = _fc_bwd,
};

/* The device the run asked for, if this build and the run's precision can use it. */
static int _check_device(const dlt_backend_config *cfg, int *dev, struct cudaDeviceProp *prop, dlt_err *err)
{
    int rc;
    if ((rc = dlt_cuda_select_device(cfg->device, dev, err)) != 0)
        return rc;
    if (cudaGetDeviceProperties(prop, *dev) != cudaSuccess) {
        return dlt_fail(err, -EIO, "cannot read the properties of CUDA device %d", *dev);
    }
    if (prop->major * 10 + prop->minor < DLT_CUDA_MIN_SM) {
        return dlt_fail(err, -ENOTSUP,
                        "%s is compute capability %d.%d, but this build's kernels start at sm_%d (configure "
                        "picks the architectures from nvcc; for Volta/Turing GPUs build with a CUDA 12.x toolkit: "
                        "--with-cuda=DIR)",
                        prop->name, prop->major, prop->minor, DLT_CUDA_MIN_SM);
    }
    if ((cfg->precision == DLT_PREC_TF32 || cfg->precision == DLT_PREC_BF16) && prop->major < 8) {
        return dlt_fail(err, -ENOTSUP,
                        "--precision %s needs an Ampere or newer GPU; %s is compute capability %d.%d (use fp16 "
                        "or fp32)",
                        dlt_precision_name(cfg->precision), prop->name, prop->major, prop->minor);
    }
    return 0;
}

/* Storage and library types of the run's precision, and the fused batch-norm entries where they
 * apply. */
static void _choose_types(cuda_backend *c, dlt_precision precision)
{
    /* Storage type, cuDNN/cuBLAS types, math mode and BN mode of each precision. fp32 is strict
     * (FMA math: no TF32); tf32 lets cuDNN and cuBLAS use TF32 tensor cores. Batch norm trains
     * in the persistent mode in every precision, as PyTorch does
     * (aten/src/ATen/native/cudnn/BatchNorm.cpp: SPATIAL_PERSISTENT when training, SPATIAL for
     * inference, which _bn_fwd_infer uses); each layer shape is probed once when planned and
     * falls back to the plain spatial mode where cuDNN has no persistent kernel (_bn_choose). */
    static const struct {
        dlt_precision prec;
        dlt_dt dt;
        cudnnDataType_t cdt;
        cudaDataType_t blas_dt;
        cudnnMathType_t math;
        cublasComputeType_t compute;
        cudnnBatchNormMode_t bn;
    } modes[] = {
        {DLT_PREC_FP32, DLT_DT_F32, CUDNN_DATA_FLOAT, CUDA_R_32F, CUDNN_FMA_MATH, CUBLAS_COMPUTE_32F,
         CUDNN_BATCHNORM_SPATIAL_PERSISTENT},
        {DLT_PREC_TF32, DLT_DT_F32, CUDNN_DATA_FLOAT, CUDA_R_32F, CUDNN_DEFAULT_MATH, CUBLAS_COMPUTE_32F_FAST_TF32,
         CUDNN_BATCHNORM_SPATIAL_PERSISTENT},
        {DLT_PREC_FP16, DLT_DT_F16, CUDNN_DATA_HALF, CUDA_R_16F, CUDNN_TENSOR_OP_MATH, CUBLAS_COMPUTE_32F,
         CUDNN_BATCHNORM_SPATIAL_PERSISTENT},
        {DLT_PREC_BF16, DLT_DT_BF16, CUDNN_DATA_BFLOAT16, CUDA_R_16BF, CUDNN_TENSOR_OP_MATH, CUBLAS_COMPUTE_32F,
         CUDNN_BATCHNORM_SPATIAL_PERSISTENT},
    };
    size_t i, nmodes = sizeof(modes) / sizeof(modes[0]);
    for (i = 0; i < nmodes && modes[i].prec != precision; i++)
        ;
    if (i == nmodes)
        i = 0; /* unreachable: precisions are parsed by name */
    c->dt = modes[i].dt;
    c->cdt = modes[i].cdt;
    c->blas_dt = modes[i].blas_dt;
    c->math = modes[i].math;
    c->blas_compute = modes[i].compute;
    c->bn_mode = modes[i].bn;
    /* cuDNN fuses BN + add + ReLU for half NHWC tensors in persistent mode; fp32/tf32 keep the
     * unfused path. bf16: libcudnn_ops ships fused kernels, but cuDNN's documentation names half
     * only (and PyTorch keeps bf16 batch norm off cuDNN). Every shape, fp16 too, is probed when
     * planned and a shape cuDNN refuses falls back to unfused persistent, then plain spatial,
     * saying so once (_bn_choose); the fused entries run an unfused layer's sequence themselves. */
    if (precision == DLT_PREC_FP16 || precision == DLT_PREC_BF16) {
        c->bn_fusable = 1;
        c->ops.bn_fwd_train_relu = _bn_fwd_train_relu;
        c->ops.bn_bwd_relu = _bn_bwd_relu;
        if (c->cfg.fuse_bn)
            dlt_cu_fused_ops(&c->ops);
    } else if (c->cfg.fuse_bn) {
        fprintf(stderr,
                "dltrain: --fuse-bn: %s keeps each convolution and batch norm on its own (the chain is for "
                "fp16 and bf16)\n",
                dlt_precision_name(precision));
    }
    c->base.act_size = _dt_size(c->dt);
}

/* The backend's fields and ops table, before anything is created on the device. */
static void _init(cuda_backend *c, const dlt_backend_config *cfg, int dev, const struct cudaDeviceProp *prop,
                  dlt_err *err)
{
    pthread_mutex_init(&c->graph_mu, NULL);
    c->ops = g_cuda_ops;
    dlt_cu_conv_ops(&c->ops);
    dlt_cu_step_ops(&c->ops);
    c->base.ops = &c->ops;
    c->base.precision = cfg->precision;
    c->base.graphs = &dlt_cu_graph_ops;
    c->base.timer = &dlt_cu_timer_ops;
    c->base.host_memory = 0;
    c->base.err = err;
    c->cfg = *cfg;
    c->device = dev;
    c->cc_major = prop->major;
    c->cc = prop->major * 10 + prop->minor;
    snprintf(c->gpu_name, sizeof(c->gpu_name), "%.63s", prop->name);
    c->ws_limit = DLT_CUDNN_WORKSPACE_CAP;
    c->stem_pad = cfg->stem_pad < 0 ? cfg->precision != DLT_PREC_FP32 : cfg->stem_pad;
    _choose_types(c, cfg->precision);
}

/* The compute and copy streams, and the results with, after them, the checksum's slot: one
 * allocation, zeroed on the stream. */
static int _create_streams(cuda_backend *c, const char *gpu_name, dlt_err *err)
{
    if (cudaStreamCreateWithFlags(&c->s, cudaStreamNonBlocking) != cudaSuccess ||
        cudaStreamCreateWithFlags(&c->copy, cudaStreamNonBlocking) != cudaSuccess ||
        cudaEventCreateWithFlags(&c->labels_free, cudaEventDisableTiming) != cudaSuccess ||
        cudaMalloc((void **)&c->d_results, (DLT_RES_COUNT + 2) * sizeof(double)) != cudaSuccess ||
        cudaMemsetAsync(c->d_results, 0, (DLT_RES_COUNT + 2) * sizeof(double), c->s) != cudaSuccess ||
        cudaMallocHost((void **)&c->pin_res, sizeof(*c->pin_res)) != cudaSuccess) {
        return dlt_fail(err, -EIO, "CUDA device %d (%s): cannot create streams or buffers: %s", c->device, gpu_name,
                        cudaGetErrorString(cudaGetLastError()));
    }
    c->base.stream = c->s;
    c->base.results = c->d_results;
    c->d_checksum = c->d_results + DLT_RES_COUNT;
    c->d_lr = (float *)(c->d_results + DLT_RES_COUNT + 1);
    return 0;
}

/* cuDNN and cuBLAS on the compute stream, cuBLAS with its own workspace. */
static int _create_libraries(cuda_backend *c, dlt_err *err)
{
    cudnnStatus_t ds;
    cublasStatus_t bs;
    if (!dlt_cudnn_ok(ds = cudnnCreate(&c->dnn)) || !dlt_cudnn_ok(ds = cudnnSetStream(c->dnn, c->s))) {
        return dlt_fail(err, -EIO, "cuDNN: %s (is libcudnn %d.x installed for this driver?)", cudnnGetErrorString(ds),
                        CUDNN_MAJOR);
    }
    if (cudaMalloc(&c->blas_ws, DLT_CUBLAS_WORKSPACE_BYTES) != cudaSuccess) {
        return dlt_fail(err, -ENOMEM, "CUDA device %d: out of memory for the cuBLAS workspace", c->device);
    }
    if ((bs = cublasCreate(&c->blas)) != CUBLAS_STATUS_SUCCESS ||
        (bs = cublasSetStream(c->blas, c->s)) != CUBLAS_STATUS_SUCCESS ||
        (bs = cublasSetWorkspace(c->blas, c->blas_ws, DLT_CUBLAS_WORKSPACE_BYTES)) != CUBLAS_STATUS_SUCCESS) {
        return dlt_fail(err, -EIO, "cuBLAS: %s", cublasGetStatusString(bs));
    }
    return 0;
}

/* The events of the input ring's slots (staged, consumed). */
static int _create_events(cuda_backend *c, dlt_err *err)
{
    for (int i = 0; i < DLT_INPUT_STAGED; i++)
        if (cudaEventCreateWithFlags(&c->in[i].staged, cudaEventDisableTiming) != cudaSuccess ||
            cudaEventCreateWithFlags(&c->in[i].consumed, cudaEventDisableTiming) != cudaSuccess) {
            return dlt_fail(err, -EIO, "CUDA device %d: cannot create events: %s", c->device,
                            cudaGetErrorString(cudaGetLastError()));
        }
    return 0;
}

int dlt_backend_cuda_create(dlt_backend **out, const dlt_backend_config *cfg, dlt_err *err)
{
    cuda_backend *c;
    struct cudaDeviceProp prop;
    int rc, dev;
    *out = NULL;
    if ((rc = _check_device(cfg, &dev, &prop, err)) != 0)
        return rc;
    if (!(c = calloc(1, sizeof(*c)))) {
        return dlt_fail(err, -ENOMEM, "out of memory");
    }
    _init(c, cfg, dev, &prop, err);
    if ((rc = _create_streams(c, prop.name, err)) != 0 || (rc = _create_libraries(c, err)) != 0 ||
        (rc = _create_events(c, err)) != 0) {
        _destroy(&c->base);
        return rc;
    }
    *out = &c->base;
    return 0;
}
