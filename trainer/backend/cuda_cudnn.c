/* SPDX-License-Identifier: Apache-2.0 */
/* cuda_cudnn: the ops table on one GPU. NHWC activations in the run's type (float, half or
 * bfloat16), float master weights, gradients and statistics. cuDNN convolutions with the fastest
 * algorithms found once per shape (cached across layers of the same shape) and one shared
 * workspace; cuDNN batch norm (fused with the residual add and ReLU in fp16); cuDNN max pooling;
 * cuBLAS for the FC layer; kernels of ours for the rest (cuda_kernels.cu). Everything runs on one
 * compute stream (be->stream), which the comm layer's gradient reducer orders its NCCL stream
 * against. Host waits poll the stream and the peer check the comm layer installs, so a lost peer
 * ends the step with an error instead of a hang. */
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

#include "trainer/backend/cuda_kernels.h"
#include "trainer/common/cuda_check.h"
#include "trainer/common/progress.h"
#include "trainer/common/tunables.h"

/* One convolution geometry's chosen algorithms (many ResNet layers share a geometry), each with
 * the math type cudnnFind timed it with: cuDNN's Find returns (algo, mathType, memory) and the
 * descriptor must carry that mathType when the algorithm runs, or cuDNN may run another variant
 * than the one timed (PyTorch's note "behavior of cudnnFind and cudnnGet" in Conv_v7.cpp sets the
 * descriptor's math type from the perf result likewise). */
typedef struct algo_entry {
    dlt_conv_shape s;
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdDataAlgo_t bwd_data;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter;
    cudnnMathType_t fwd_math, bwd_data_math, bwd_filter_math;
    int bwd_data_ok; /* the image-input convolution needs no data gradient; cuDNN may have none */
    size_t ws;
    struct algo_entry *next;
} algo_entry;

/* Pinned host memory of the results: the read's destination, and one source per slot for
 * results_put (a queued copy reads its source when it runs, so each slot has its own, untouched
 * until that copy ran: results_put waits when a second put of a slot could overtake the first). */
typedef struct {
    double read[DLT_RES_COUNT];
    double put[DLT_RES_COUNT];
    double checksum;
    float lr; /* a recorded sgd_step's learning rate, set by each replay */
} pinned_results;

typedef struct {
    dlt_backend base;
    dlt_backend_ops ops; /* a copy: optional entries depend on precision */
    char name[128];      /* ops.name when the batch-norm probe changed the plan */
    dlt_backend_config cfg;
    int device, cc_major;
    int stem_pad; /* pad the 3-channel stem input to 4 channels */
    dlt_dt dt;
    cudnnDataType_t cdt;
    cudaDataType_t blas_dt;
    cublasComputeType_t blas_compute;
    cudnnMathType_t math;
    cudnnBatchNormMode_t bn_mode;
    cudaStream_t s; /* every op runs on it */
    cudnnHandle_t dnn;
    cublasHandle_t blas;
    void *ws;
    size_t ws_size, ws_limit;
    algo_entry *algos;
    /* The algorithm search times every kernel of every new convolution shape: minutes for a big
     * model. Plain lines (its end is the caller's), only when it takes long (progress.h). */
    dlt_progress search;
    int64_t searched;
    /* Input staging (input_stage): a ring of device batches filled on the copy stream. staged[i]
     * says slot i's copy ran (the compute stream waits for it), consumed[i] that its normalize ran
     * (the copy stream waits for it before refilling the slot): no host wait on either side. */
    cudaStream_t copy;
    struct {
        uint8_t *dev;
        size_t cap, pixels;
        cudaEvent_t staged, consumed;
    } in[DLT_INPUT_STAGED];
    int in_head, in_count; /* the oldest staged slot; batches staged and not yet normalized */
    /* labels: pinned host -> device */
    int32_t *pin_labels, *d_labels;
    size_t labels_size;
    cudaEvent_t labels_free; /* the last copy out of pin_labels ran */
    /* be->results (DLT_RES_COUNT doubles) and, after them, the checksum's own slot */
    double *d_results, *d_checksum;
    float *d_lr; /* a recorded sgd_step reads its learning rate here (after the results) */
    pinned_results *pin_res;
    unsigned put_pending; /* slots whose put copy may not have run yet */
    double *sum_scratch;  /* the checksum's per-block partial sums */
    /* The flat optimizer (sgd_plan): the parameter buffer, its chunk table on the device and, in
     * fp16/bf16, its twin in the activation type (the same offsets), which convolutions and the
     * FC layer read; the padded stem's weights live in the stem op's own buffer instead. */
    float *params;
    size_t nparams;
    dlt_sgd_chunk *d_chunks;
    int nchunks;
    void *twin;
    unsigned plan_gen; /* counts sgd_plan calls: a bind into an earlier plan's twin is refused */
    const dlt_op *stem_op;
    size_t stem_lo, stem_hi;
    /* cuDNN's filter gradient when it is not the float KRSC gradient itself (fp16/bf16, or the
     * padded stem), shared: convolutions run one after another on one stream */
    void *dw_scratch;
    size_t dw_scratch_size;
    /* CUDA graph of the forward/loss/backward(/reduction) of one step */
    int capturing;
    cudaGraph_t graph;
    cudaGraphExec_t graph_exec;
    void *blas_ws; /* cuBLAS must not allocate while a graph is captured */
} cuda_backend;

struct dlt_op {
    /* conv */
    dlt_conv_shape cs;
    int cp;                      /* input channels as cuDNN sees them (4 for the padded 3-channel stem) */
    cudnnTensorDescriptor_t xd, yd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t conv;                          /* the search's (the run's math type) */
    cudnnConvolutionDescriptor_t conv_fwd, conv_bwd_data, conv_bwd_filter; /* each with its winner's */
    const algo_entry *algo;
    const void *w;      /* the KRSC filter cuDNN reads (conv_bind_weights) */
    unsigned w_gen;     /* the plan w points into (0: the caller's own float weights) */
    void *w_pad;        /* the padded stem's filter (K x R x S x 4 in the activation type) */
    void *x_pad;        /* the padded input of the stem, kept from forward for backward-filter */
    /* bn */
    dlt_act_shape as;
    float eps;
    cudnnTensorDescriptor_t pd;
    cudnnActivationDescriptor_t act;
    float *save_mean, *save_inv;
    void *reserve;
    size_t reserve_size;
    /* pool */
    cudnnPoolingDescriptor_t pool;
    const void *px, *py;
};

static cuda_backend *_cu(dlt_backend *be)
{
    return (cuda_backend *)be;
}

/* The library checks of cuda_check.h, reporting into the backend's error sink. */
#define CUDA_TRY(be, call) DLT_CUDA_TRY((be)->err, (be)->errlen, call)
/* Our kernel launchers return a cudaError_t as int. */
#define KERNEL_TRY(be, call) CUDA_TRY(be, (cudaError_t)(call))
#define DNN_TRY(be, call) DLT_CUDNN_TRY((be)->err, (be)->errlen, call)
#define BLAS_TRY(be, call) DLT_CUBLAS_TRY((be)->err, (be)->errlen, call)

static const float g_one = 1.f, g_zero = 0.f;

static size_t _dt_size(dlt_dt dt)
{
    return dt == DLT_DT_F32 ? 4 : 2;
}

static int _wait(dlt_backend *be, cudaStream_t st)
{
    int rc = dlt_cuda_stream_wait(st, be->peers, be->err, be->errlen);
    if (rc == 0)
        _cu(be)->put_pending = 0; /* every queued copy ran */
    return rc;
}

/* ------------------------------------------------------------------ memory */

static void *_alloc(dlt_backend *be, size_t bytes)
{
    cuda_backend *c = _cu(be);
    void *p = NULL;
    if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess)
        return NULL;
    if (cudaMemsetAsync(p, 0, bytes ? bytes : 1, c->s) != cudaSuccess || _wait(be, c->s) != 0) {
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
    CUDA_TRY(be, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, _cu(be)->s));
    return _wait(be, _cu(be)->s);
}

static int _download(dlt_backend *be, void *dst, const void *src, size_t bytes)
{
    /* A copy into pageable memory blocks the host until it is done, and with it everything queued
     * before it (gradient reductions included): wait for those first, polling, so a lost peer
     * ends the wait with NCCL's error instead of a hang inside the copy. */
    int rc = _wait(be, _cu(be)->s);
    if (rc)
        return rc;
    CUDA_TRY(be, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, _cu(be)->s));
    return _wait(be, _cu(be)->s);
}

static int _copy(dlt_backend *be, void *dst, const void *src, size_t bytes)
{
    /* Ordered on the compute stream with everything else that touches the buffers. */
    if (dst != src && bytes)
        CUDA_TRY(be, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, _cu(be)->s));
    return 0;
}

static int _sync(dlt_backend *be)
{
    return _wait(be, _cu(be)->s);
}

static int _act_from_float(dlt_backend *be, float *act, const float *host, size_t n)
{
    cuda_backend *c = _cu(be);
    float *tmp = NULL;
    int rc, ke;
    if (c->dt == DLT_DT_F32)
        return _upload(be, act, host, n * sizeof(float));
    CUDA_TRY(be, cudaMalloc((void **)&tmp, n * sizeof(float) + 1));
    rc = _upload(be, tmp, host, n * sizeof(float));
    if (rc == 0 && (ke = dlt_k_cast_from_f32(tmp, act, c->dt, n, (dlt_stream)c->s)) != 0)
        rc = dlt_cuda_fail(be->err, be->errlen, __FILE__, __LINE__, "cast kernel", cudaGetErrorString((cudaError_t)ke));
    if (rc == 0)
        rc = _wait(be, c->s);
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
    CUDA_TRY(be, cudaMalloc((void **)&tmp, n * sizeof(float) + 1));
    if ((ke = dlt_k_cast_to_f32(act, c->dt, tmp, n, (dlt_stream)c->s)) != 0)
        rc = dlt_cuda_fail(be->err, be->errlen, __FILE__, __LINE__, "cast kernel", cudaGetErrorString((cudaError_t)ke));
    if (rc == 0)
        rc = _download(be, host, tmp, n * sizeof(float));
    cudaFree(tmp);
    return rc;
}

/* Grows the shared workspace (only while nothing is queued: at planning time). */
static int _workspace(dlt_backend *be, size_t need)
{
    cuda_backend *c = _cu(be);
    if (need < 4096)
        need = 4096; /* never NULL: cuDNN's fast NHWC batch-norm kernels want a workspace pointer */
    if (need <= c->ws_size)
        return 0;
    CUDA_TRY(be, cudaStreamSynchronize(c->s));
    cudaFree(c->ws);
    c->ws = NULL;
    c->ws_size = 0;
    CUDA_TRY(be, cudaMalloc(&c->ws, need));
    c->ws_size = need;
    return 0;
}

/* ------------------------------------------------------------------ convolution */

static int _nhwc(dlt_backend *be, cudnnTensorDescriptor_t *d, int n, int ch, int h, int w)
{
    DNN_TRY(be, cudnnCreateTensorDescriptor(d));
    DNN_TRY(be, cudnnSetTensor4dDescriptor(*d, CUDNN_TENSOR_NHWC, _cu(be)->cdt, n, ch, h, w));
    return 0;
}

/* Fastest successful algorithm within the workspace limit from cuDNN's measured list. */
#define PICK(results, count, limit, out, math, mem)                                                           \
    do {                                                                                                      \
        int found_ = 0;                                                                                       \
        for (int i_ = 0; i_ < (count) && !found_; i_++)                                                       \
            if (dlt_cudnn_ok((results)[i_].status) && (results)[i_].memory <= (limit) &&                       \
                (!c->cfg.deterministic || (results)[i_].determinism == CUDNN_DETERMINISTIC)) {                   \
                (out) = (results)[i_].algo;                                                                   \
                (math) = (results)[i_].mathType;                                                              \
                (mem) = (results)[i_].memory;                                                                 \
                found_ = 1;                                                                                   \
            }                                                                                                 \
        if (!found_) {                                                                                        \
            snprintf(be->err, be->errlen, "cuDNN found no %s%s algorithm for this convolution within "   \
                     "%zu MiB of workspace", c->cfg.deterministic ? "deterministic " : "", #out,              \
                     (size_t)(limit) >> 20);                                                                  \
            return -ENOTSUP;                                                                                  \
        }                                                                                                     \
    } while (0)

/* A convolution descriptor of op's geometry with the given math type. */
static int _conv_descriptor(dlt_backend *be, const dlt_op *op, cudnnMathType_t math, cudnnConvolutionDescriptor_t *d)
{
    const dlt_conv_shape *s = &op->cs;
    DNN_TRY(be, cudnnCreateConvolutionDescriptor(d));
    DNN_TRY(be, cudnnSetConvolution2dDescriptor(*d, s->pad, s->pad, s->stride, s->stride, 1, 1, CUDNN_CROSS_CORRELATION,
                                                CUDNN_DATA_FLOAT));
    DNN_TRY(be, cudnnSetConvolutionMathType(*d, math));
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
         * can differ between two runs and with it the bits). PyTorch likewise uses the _v7
         * heuristics unless benchmark mode is on (aten/src/ATen/native/cudnn/Conv_v7.cpp,
         * findAlgorithms with benchmark false); PICK keeps the deterministic ones. */
        DNN_TRY(be, cudnnGetConvolutionForwardAlgorithm_v7(c->dnn, op->xd, op->wd, op->conv, op->yd,
                                                           CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &nf, fr));
        if (op->cs.c == 3 ||
            !dlt_cudnn_ok(cudnnGetConvolutionBackwardDataAlgorithm_v7(c->dnn, op->wd, op->yd, op->conv, op->xd,
                                                                      CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &nd, dr)))
            nd = 0;
        DNN_TRY(be, cudnnGetConvolutionBackwardFilterAlgorithm_v7(c->dnn, op->xd, op->yd, op->conv, op->wd,
                                                                  CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &nw, wr));
    } else {
        /* cuDNN times each candidate on scratch buffers of its own. */
        DNN_TRY(be, cudnnFindConvolutionForwardAlgorithm(c->dnn, op->xd, op->wd, op->conv, op->yd,
                                                         CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &nf, fr));
        /* The stem's data gradient is never computed (the images need none): no search for it. */
        if (op->cs.c == 3 ||
            !dlt_cudnn_ok(cudnnFindConvolutionBackwardDataAlgorithm(c->dnn, op->wd, op->yd, op->conv, op->xd,
                                                                    CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &nd, dr)))
            nd = 0;
        DNN_TRY(be, cudnnFindConvolutionBackwardFilterAlgorithm(c->dnn, op->xd, op->yd, op->conv, op->wd,
                                                                CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &nw, wr));
    }
    PICK(fr, nf, c->ws_limit, e->fwd, e->fwd_math, mf);
    PICK(wr, nw, c->ws_limit, e->bwd_filter, e->bwd_filter_math, mw);
    for (int i = 0; i < nd && !e->bwd_data_ok; i++)
        if (dlt_cudnn_ok(dr[i].status) && dr[i].memory <= c->ws_limit &&
            (!c->cfg.deterministic || dr[i].determinism == CUDNN_DETERMINISTIC)) {
            e->bwd_data = dr[i].algo;
            e->bwd_data_math = dr[i].mathType;
            md = dr[i].memory;
            e->bwd_data_ok = 1;
        }
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
    DNN_TRY(be, cudnnGetConvolutionForwardWorkspaceSize(c->dnn, op->xd, op->wd, op->conv_fwd, op->yd, e->fwd, &f));
    if (e->bwd_data_ok)
        DNN_TRY(be, cudnnGetConvolutionBackwardDataWorkspaceSize(c->dnn, op->wd, op->yd, op->conv_bwd_data, op->xd,
                                                                 e->bwd_data, &d));
    DNN_TRY(be, cudnnGetConvolutionBackwardFilterWorkspaceSize(c->dnn, op->xd, op->yd, op->conv_bwd_filter, op->wd,
                                                               e->bwd_filter, &w));
    f = f > d ? f : d;
    f = f > w ? f : w;
    e->ws = f > e->ws ? f : e->ws;
    return 0;
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
        snprintf(be->err, be->errlen, "out of memory");
        return -ENOMEM;
    }
    e->s = op->cs;
    op->algo = e;
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
    return _workspace(be, e->ws);
}

/* Grows the shared filter-gradient scratch (planning time only, like the workspace). */
static int _dw_scratch(dlt_backend *be, size_t need)
{
    cuda_backend *c = _cu(be);
    if (need <= c->dw_scratch_size)
        return 0;
    CUDA_TRY(be, cudaStreamSynchronize(c->s));
    cudaFree(c->dw_scratch);
    c->dw_scratch = NULL;
    c->dw_scratch_size = 0;
    CUDA_TRY(be, cudaMalloc(&c->dw_scratch, need));
    c->dw_scratch_size = need;
    return 0;
}

static int _conv_plan(dlt_backend *be, const dlt_conv_shape *s, dlt_op **out)
{
    cuda_backend *c = _cu(be);
    dlt_op *op = calloc(1, sizeof(*op));
    int n, ch, h, w, rc;
    size_t wn;
    *out = op;
    if (!op) {
        snprintf(be->err, be->errlen, "out of memory");
        return -ENOMEM;
    }
    op->cs = *s;
    /* Tensor-core NHWC kernels want channel counts that are multiples of 4 or 8: the 3-channel
     * image input is padded to 4 (a zero channel, zero weights), as the MLPerf ResNet-50 GPU
     * implementations do. The padding lives here only; checkpoints keep 3 channels. */
    op->cp = s->c == 3 && c->stem_pad ? 4 : s->c;
    wn = (size_t)s->k * op->cp * s->r * s->s;
    if ((rc = _nhwc(be, &op->xd, s->n, op->cp, s->h, s->w)) != 0 || (rc = _nhwc(be, &op->yd, s->n, s->k, s->oh, s->ow)))
        return rc;
    /* An NHWC filter descriptor is KRSC: in fp32/tf32 cuDNN reads the float parameter buffer
     * itself, in fp16/bf16 its twin. */
    DNN_TRY(be, cudnnCreateFilterDescriptor(&op->wd));
    DNN_TRY(be, cudnnSetFilter4dDescriptor(op->wd, c->cdt, CUDNN_TENSOR_NHWC, s->k, op->cp, s->r, s->s));
    if ((rc = _conv_descriptor(be, op, c->math, &op->conv)) != 0)
        return rc;
    if (op->cp != s->c) {
        CUDA_TRY(be, cudaMalloc(&op->x_pad, (size_t)s->n * s->h * s->w * op->cp * _dt_size(c->dt)));
        /* The pad channel's weights stay zero: the optimizer and params_loaded write channels
         * 0..2 only. Queued on the compute stream, so ordered before every later writer. */
        CUDA_TRY(be, cudaMalloc(&op->w_pad, wn * _dt_size(c->dt)));
        CUDA_TRY(be, cudaMemsetAsync(op->w_pad, 0, wn * _dt_size(c->dt), c->s));
    }
    DNN_TRY(be, cudnnGetConvolution2dForwardOutputDim(op->conv, op->xd, op->wd, &n, &ch, &h, &w));
    if (n != s->n || ch != s->k || h != s->oh || w != s->ow) {
        snprintf(be->err, be->errlen, "cuDNN output %dx%dx%dx%d differs from the model's %dx%dx%dx%d", n, ch, h, w,
                 s->n, s->k, s->oh, s->ow);
        return -EINVAL;
    }
    if ((c->dt != DLT_DT_F32 || op->cp != s->c) && (rc = _dw_scratch(be, wn * _dt_size(c->dt))) != 0)
        return rc;
    return _find_algos(be, op);
}

/* Where w (n floats) lies in the planned parameter buffer: 0 and *off, or -EINVAL. */
static int _param_offset(dlt_backend *be, const float *w, size_t n, const char *what, size_t *off)
{
    cuda_backend *c = _cu(be);
    if (!c->params || w < c->params || w >= c->params + c->nparams || n > (size_t)(c->params + c->nparams - w)) {
        snprintf(be->err, be->errlen, "%s (%zu floats at %p) are not inside the parameter buffer sgd_plan named (%p, "
                 "%zu floats): in %s, the backend's copy of them is part of the optimizer's pass", what, n,
                 (const void *)w, (const void *)c->params, c->nparams, dlt_precision_name(be->precision));
        return -EINVAL;
    }
    *off = (size_t)(w - c->params);
    return 0;
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
    snprintf(be->err, be->errlen, "convolution weights %d->%d %dx%d lie at an address not 16-byte aligned in the "
             "parameter buffer (the model's --width makes 64 x width channels not a multiple of 8): choose a width "
             "giving a multiple of 8 (0.125, 0.25, 0.5, 1, ...)", op->cs.c, op->cs.k, op->cs.r, op->cs.s);
    return -EINVAL;
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
    if ((rc = _param_offset(be, w, wn, "convolution weights", &off)) != 0)
        return rc;
    op->w_gen = c->plan_gen;
    if (op->cp == s->c) {
        op->w = (const char *)c->twin + off * _dt_size(c->dt);
        return _filter_aligned(be, op);
    }
    if (c->stem_op && c->stem_op != op) {
        snprintf(be->err, be->errlen, "a second convolution with a padded 3-channel input (the optimizer keeps one "
                 "padded stem; run with --stem-pad off)");
        return -ENOTSUP;
    }
    c->stem_op = op;
    c->stem_lo = off;
    c->stem_hi = off + wn;
    op->w = op->w_pad;
    return 0;
}

static int _conv_weights_ok(dlt_backend *be, const dlt_op *op)
{
    if (!op->w) {
        snprintf(be->err, be->errlen, "convolution %d->%d %dx%d run before conv_bind_weights", op->cs.c, op->cs.k,
                 op->cs.r, op->cs.s);
        return -EINVAL;
    }
    if (op->w_gen && op->w_gen != _cu(be)->plan_gen) {
        snprintf(be->err, be->errlen, "convolution %d->%d %dx%d: its weights were bound before the last sgd_plan "
                 "(bind them again)", op->cs.c, op->cs.k, op->cs.r, op->cs.s);
        return -EINVAL;
    }
    return 0;
}

static int _conv_fwd(dlt_backend *be, dlt_op *op, const float *x, float *y)
{
    cuda_backend *c = _cu(be);
    int rc;
    if ((rc = _conv_weights_ok(be, op)) != 0)
        return rc;
    if (op->x_pad) {
        const dlt_conv_shape *s = &op->cs;
        KERNEL_TRY(be, dlt_k_pad_channels(x, op->x_pad, c->dt, (size_t)s->n * s->h * s->w, s->c, op->cp,
                                          (dlt_stream)c->s));
        x = op->x_pad;
    }
    DNN_TRY(be, cudnnConvolutionForward(c->dnn, &g_one, op->xd, x, op->wd, op->w, op->conv_fwd, op->algo->fwd, c->ws,
                                        c->ws_size, &g_zero, op->yd, y));
    return 0;
}

static int _conv_bwd_data(dlt_backend *be, dlt_op *op, const float *dy, float *dx)
{
    cuda_backend *c = _cu(be);
    int rc;
    if (op->x_pad) {
        snprintf(be->err, be->errlen, "the padded stem convolution has no data gradient (the images need none)");
        return -ENOTSUP;
    }
    if (!op->algo->bwd_data_ok) {
        snprintf(be->err, be->errlen, "cuDNN has no backward-data algorithm for this convolution (%d->%d "
                 "channels, %dx%d)", op->cs.c, op->cs.k, op->cs.r, op->cs.s);
        return -ENOTSUP;
    }
    if ((rc = _conv_weights_ok(be, op)) != 0)
        return rc;
    DNN_TRY(be, cudnnConvolutionBackwardData(c->dnn, &g_one, op->wd, op->w, op->yd, dy, op->conv_bwd_data,
                                             op->algo->bwd_data, c->ws, c->ws_size, &g_zero, op->xd, dx));
    return 0;
}

/* dw is KRSC float like the weights: cuDNN writes it directly in fp32/tf32; otherwise it writes
 * its own type (and the stem's 4 channels) into the scratch, and one contiguous cast (or
 * cast-and-unpad) makes the float gradient: no re-layout. */
static int _conv_bwd_weights(dlt_backend *be, dlt_op *op, const float *x, const float *dy, float *dw)
{
    cuda_backend *c = _cu(be);
    const dlt_conv_shape *s = &op->cs;
    const int direct = c->dt == DLT_DT_F32 && op->cp == s->c;
    size_t pixels = (size_t)s->k * s->r * s->s;
    if (op->x_pad)
        x = op->x_pad; /* padded by the forward of this step: the input has not changed since */
    DNN_TRY(be, cudnnConvolutionBackwardFilter(c->dnn, &g_one, op->xd, x, op->yd, dy, op->conv_bwd_filter,
                                               op->algo->bwd_filter, c->ws, c->ws_size, &g_zero, op->wd,
                                               direct ? (void *)dw : c->dw_scratch));
    if (direct)
        return 0;
    if (op->cp == s->c)
        KERNEL_TRY(be, dlt_k_cast_to_f32(c->dw_scratch, c->dt, dw, pixels * s->c, (dlt_stream)c->s));
    else
        KERNEL_TRY(be, dlt_k_unpad_to_f32(c->dw_scratch, c->dt, dw, pixels, op->cp, s->c, (dlt_stream)c->s));
    return 0;
}

/* ------------------------------------------------------------------ batch norm */

/* Batch norm goes through cuDNN's Ex API with the workspace and reserve space it asks for, for
 * every layer: the NHWC persistent mode (fp16/bf16) may need both, also without the fused
 * add/ReLU, and the plain API cannot be given them. PyTorch does the same
 * (aten/src/ATen/native/cudnn/BatchNorm.cpp: CUDNN_BATCHNORM_OPS_BN, no z, no activation,
 * workspace and reserve queried per input). */
static int _bn_sizes(dlt_backend *be, dlt_op *op, cudnnBatchNormOps_t ops, size_t *ws, size_t *reserve)
{
    cuda_backend *c = _cu(be);
    cudnnActivationDescriptor_t act = ops == CUDNN_BATCHNORM_OPS_BN ? NULL : op->act;
    cudnnTensorDescriptor_t z = ops == CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION ? op->xd : NULL;
    size_t r = 0, f = 0, b = 0;
    DNN_TRY(be, cudnnGetBatchNormalizationTrainingExReserveSpaceSize(c->dnn, c->bn_mode, ops, act, op->xd, &r));
    DNN_TRY(be, cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize(c->dnn, c->bn_mode, ops, op->xd, z, op->xd,
                                                                         op->pd, act, &f));
    DNN_TRY(be, cudnnGetBatchNormalizationBackwardExWorkspaceSize(c->dnn, c->bn_mode, ops, op->xd, op->xd, op->xd, z,
                                                                  op->xd, op->pd, act, &b));
    *reserve = r > *reserve ? r : *reserve;
    f = f > b ? f : b;
    *ws = f > *ws ? f : *ws;
    return 0;
}

static int _bn_plan(dlt_backend *be, const dlt_act_shape *s, float eps, dlt_op **out)
{
    cuda_backend *c = _cu(be);
    dlt_op *op = calloc(1, sizeof(*op));
    size_t ws = 0;
    int rc;
    *out = op;
    if (!op) {
        snprintf(be->err, be->errlen, "out of memory");
        return -ENOMEM;
    }
    op->as = *s;
    op->eps = eps < CUDNN_BN_MIN_EPSILON ? (float)CUDNN_BN_MIN_EPSILON : eps;
    if ((rc = _nhwc(be, &op->xd, s->n, s->c, s->h, s->w)) != 0)
        return rc;
    DNN_TRY(be, cudnnCreateTensorDescriptor(&op->pd));
    DNN_TRY(be, cudnnDeriveBNTensorDescriptor(op->pd, op->xd, c->bn_mode));
    CUDA_TRY(be, cudaMalloc((void **)&op->save_mean, (size_t)s->c * sizeof(float)));
    CUDA_TRY(be, cudaMalloc((void **)&op->save_inv, (size_t)s->c * sizeof(float)));
    if ((rc = _bn_sizes(be, op, CUDNN_BATCHNORM_OPS_BN, &ws, &op->reserve_size)) != 0)
        return rc;
    if (c->ops.bn_fwd_train_relu) {
        DNN_TRY(be, cudnnCreateActivationDescriptor(&op->act));
        DNN_TRY(be, cudnnSetActivationDescriptor(op->act, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0));
        if ((rc = _bn_sizes(be, op, CUDNN_BATCHNORM_OPS_BN_ACTIVATION, &ws, &op->reserve_size)) != 0 ||
            (rc = _bn_sizes(be, op, CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION, &ws, &op->reserve_size)) != 0)
            return rc;
    }
    if (op->reserve_size)
        CUDA_TRY(be, cudaMalloc(&op->reserve, op->reserve_size));
    return _workspace(be, ws);
}

/* Batch mean and biased variance for the caller, from cuDNN's saved mean and 1/sqrt(var + eps). */
static int _bn_report(dlt_backend *be, dlt_op *op, float *mean, float *var)
{
    KERNEL_TRY(be, dlt_k_bn_saved_to_var(op->save_mean, op->save_inv, mean, var, op->as.c, op->eps,
                                         (dlt_stream)_cu(be)->s));
    return 0;
}

static int _bn_fwd_train(dlt_backend *be, dlt_op *op, const float *x, const float *gamma, const float *beta, float *y,
                         float *mean, float *var)
{
    cuda_backend *c = _cu(be);
    /* Running statistics are the network's business (bn_stats_update): cuDNN keeps none here. */
    DNN_TRY(be, cudnnBatchNormalizationForwardTrainingEx(c->dnn, c->bn_mode, CUDNN_BATCHNORM_OPS_BN, &g_one, &g_zero,
                                                         op->xd, x, NULL, NULL, op->xd, y, op->pd, gamma, beta, 0.0, NULL,
                                                         NULL, op->eps, op->save_mean, op->save_inv, NULL, c->ws,
                                                         c->ws_size, op->reserve, op->reserve_size));
    return _bn_report(be, op, mean, var);
}

static int _bn_fwd_infer(dlt_backend *be, dlt_op *op, const float *x, const float *gamma, const float *beta,
                         const float *mean, const float *var, float *y)
{
    cuda_backend *c = _cu(be);
    DNN_TRY(be, cudnnBatchNormalizationForwardInference(c->dnn, CUDNN_BATCHNORM_SPATIAL, &g_one, &g_zero, op->xd, x,
                                                        op->xd, y, op->pd, gamma, beta, mean, var, op->eps));
    return 0;
}

static int _bn_bwd(dlt_backend *be, dlt_op *op, const float *x, const float *dy, const float *gamma, const float *beta,
                   const float *mean, const float *var, float *dx, float *dgamma, float *dbeta)
{
    cuda_backend *c = _cu(be);
    (void)beta;
    (void)mean;
    (void)var; /* cuDNN's own saved statistics of the forward are the same numbers, more precisely */
    DNN_TRY(be, cudnnBatchNormalizationBackwardEx(c->dnn, c->bn_mode, CUDNN_BATCHNORM_OPS_BN, &g_one, &g_zero, &g_one,
                                                  &g_zero, op->xd, x, NULL, NULL, op->xd, dy, NULL, NULL, op->xd, dx,
                                                  op->pd, gamma, NULL, dgamma, dbeta, op->eps, op->save_mean,
                                                  op->save_inv, NULL, c->ws, c->ws_size, op->reserve,
                                                  op->reserve_size));
    return 0;
}

static int _bn_fwd_train_relu(dlt_backend *be, dlt_op *op, const float *x, const float *z, const float *gamma,
                              const float *beta, float *y, float *mean, float *var)
{
    cuda_backend *c = _cu(be);
    cudnnBatchNormOps_t ops = z ? CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION : CUDNN_BATCHNORM_OPS_BN_ACTIVATION;
    DNN_TRY(be, cudnnBatchNormalizationForwardTrainingEx(c->dnn, c->bn_mode, ops, &g_one, &g_zero, op->xd, x,
                                                         z ? op->xd : NULL, z, op->xd, y, op->pd, gamma, beta, 0.0,
                                                         NULL, NULL, op->eps, op->save_mean, op->save_inv, op->act, c->ws,
                                                         c->ws_size, op->reserve, op->reserve_size));
    return _bn_report(be, op, mean, var);
}

static int _bn_bwd_relu(dlt_backend *be, dlt_op *op, const float *x, const float *y, const float *dy,
                        const float *gamma, const float *beta, float *dx, float *dz, float *dgamma, float *dbeta)
{
    cuda_backend *c = _cu(be);
    cudnnBatchNormOps_t ops = dz ? CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION : CUDNN_BATCHNORM_OPS_BN_ACTIVATION;
    DNN_TRY(be, cudnnBatchNormalizationBackwardEx(c->dnn, c->bn_mode, ops, &g_one, &g_zero, &g_one, &g_zero, op->xd, x,
                                                  op->xd, y, op->xd, dy, dz ? op->xd : NULL, dz, op->xd, dx, op->pd,
                                                  gamma, beta, dgamma, dbeta, op->eps, op->save_mean, op->save_inv,
                                                  op->act, c->ws, c->ws_size, op->reserve, op->reserve_size));
    return 0;
}

static int _bn_stats_update(dlt_backend *be, float *rm, float *rv, const float *bm, const float *bv, int ch,
                            float momentum, float unbias)
{
    KERNEL_TRY(be, dlt_k_bn_stats_update(rm, rv, bm, bv, ch, momentum, unbias, (dlt_stream)_cu(be)->s));
    return 0;
}

/* ------------------------------------------------------------------ pooling, elementwise */

static int _maxpool_plan(dlt_backend *be, const dlt_act_shape *in, int k, int stride, int pad, dlt_op **out)
{
    dlt_op *op = calloc(1, sizeof(*op));
    int rc;
    *out = op;
    if (!op) {
        snprintf(be->err, be->errlen, "out of memory");
        return -ENOMEM;
    }
    op->as = *in;
    if ((rc = _nhwc(be, &op->xd, in->n, in->c, in->h, in->w)) != 0 ||
        (rc = _nhwc(be, &op->yd, in->n, in->c, dlt_out_size(in->h, k, stride, pad), dlt_out_size(in->w, k, stride, pad))))
        return rc;
    DNN_TRY(be, cudnnCreatePoolingDescriptor(&op->pool));
    /* --deterministic: cuDNN's plain max-pooling backward may accumulate overlapping windows
     * (ResNet's 3x3 stride 2) with atomics, whose order varies; MAX_DETERMINISTIC does not
     * (cudnn_ops.h; cuDNN's reproducibility notes). */
    cudnnPoolingMode_t mode = _cu(be)->cfg.deterministic ? CUDNN_POOLING_MAX_DETERMINISTIC : CUDNN_POOLING_MAX;
    DNN_TRY(be, cudnnSetPooling2dDescriptor(op->pool, mode, CUDNN_NOT_PROPAGATE_NAN, k, k, pad, pad, stride, stride));
    return 0;
}

static int _maxpool_fwd(dlt_backend *be, dlt_op *op, const float *x, float *y)
{
    DNN_TRY(be, cudnnPoolingForward(_cu(be)->dnn, op->pool, &g_one, op->xd, x, &g_zero, op->yd, y));
    op->px = x; /* backward reads the forward's input and output (they live until then) */
    op->py = y;
    return 0;
}

static int _maxpool_bwd(dlt_backend *be, dlt_op *op, const float *dy, float *dx)
{
    if (!op->px) {
        snprintf(be->err, be->errlen, "max-pool backward before any forward");
        return -EINVAL;
    }
    DNN_TRY(be, cudnnPoolingBackward(_cu(be)->dnn, op->pool, &g_one, op->yd, op->py, op->yd, dy, op->xd, op->px, &g_zero,
                                     op->xd, dx));
    return 0;
}

static int _add_relu(dlt_backend *be, float *y, const float *add, size_t n)
{
    KERNEL_TRY(be, dlt_k_add_relu(y, add, _cu(be)->dt, n, (dlt_stream)_cu(be)->s));
    return 0;
}

static int _relu_bwd(dlt_backend *be, const float *y, const float *dy, float *dz, size_t n)
{
    KERNEL_TRY(be, dlt_k_relu_bwd(y, dy, dz, _cu(be)->dt, n, (dlt_stream)_cu(be)->s));
    return 0;
}

static int _accumulate(dlt_backend *be, float *dst, const float *src, size_t n)
{
    KERNEL_TRY(be, dlt_k_accumulate(dst, src, _cu(be)->dt, n, (dlt_stream)_cu(be)->s));
    return 0;
}

static int _avgpool_fwd(dlt_backend *be, const dlt_act_shape *s, const float *x, float *y)
{
    KERNEL_TRY(be, dlt_k_avgpool_fwd(x, y, _cu(be)->dt, s->n, s->h * s->w, s->c, (dlt_stream)_cu(be)->s));
    return 0;
}

static int _avgpool_bwd(dlt_backend *be, const dlt_act_shape *s, const float *dy, float *dx)
{
    KERNEL_TRY(be, dlt_k_avgpool_bwd(dy, dx, _cu(be)->dt, s->n, s->h * s->w, s->c, (dlt_stream)_cu(be)->s));
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
    if ((rc = _param_offset(be, w, n, "FC weights", &off)) != 0)
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
    KERNEL_TRY(be, dlt_k_bias_rows(y, b, c->dt, n, k, (dlt_stream)c->s));
    BLAS_TRY(be, cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, k, n, ch, &g_one, wl, c->blas_dt, ch, x, c->blas_dt, ch,
                              &g_one, y, c->blas_dt, k, c->blas_compute, CUBLAS_GEMM_DEFAULT));
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
    BLAS_TRY(be, cublasGemmEx(c->blas, CUBLAS_OP_N, CUBLAS_OP_T, ch, k, n, &g_one, x, c->blas_dt, ch, dy, c->blas_dt, k,
                              &g_zero, dw, CUDA_R_32F, ch, c->blas_compute, CUBLAS_GEMM_DEFAULT));
    KERNEL_TRY(be, dlt_k_colsum(dy, c->dt, db, n, k, (dlt_stream)c->s));
    /* dx^T (c x n) = W^T (c x k) dy^T (k x n) */
    BLAS_TRY(be, cublasGemmEx(c->blas, CUBLAS_OP_N, CUBLAS_OP_N, ch, n, k, &g_one, wl, c->blas_dt, ch, dy, c->blas_dt, k,
                              &g_zero, dx, c->blas_dt, ch, c->blas_compute, CUBLAS_GEMM_DEFAULT));
    return 0;
}

/* ------------------------------------------------------------------ input, loss, optimizer */

/* A pinned host buffer and its device twin of at least `bytes` (grown while nothing uses them). */
static int _staging(dlt_backend *be, void **pin, void **dev, size_t *size, size_t bytes)
{
    if (*size >= bytes)
        return 0;
    CUDA_TRY(be, cudaStreamSynchronize(_cu(be)->s));
    cudaFreeHost(*pin);
    cudaFree(*dev);
    *pin = *dev = NULL;
    *size = 0;
    CUDA_TRY(be, cudaMallocHost(pin, bytes));
    CUDA_TRY(be, cudaMalloc(dev, bytes));
    *size = bytes;
    return 0;
}

static void *_host_alloc(dlt_backend *be, size_t bytes)
{
    void *p = NULL;
    (void)be;
    /* Pinned: the copy engine reads it directly, so input_stage's copy is truly asynchronous. */
    return cudaMallocHost(&p, bytes ? bytes : 1) == cudaSuccess ? p : NULL;
}

static void _host_free(dlt_backend *be, void *p)
{
    (void)be;
    if (p)
        cudaFreeHost(p);
}

static int _input_stage(dlt_backend *be, const uint8_t *src, size_t pixels)
{
    cuda_backend *c = _cu(be);
    size_t bytes = pixels * 3;
    int slot, rc;
    if (c->in_count == DLT_INPUT_STAGED) {
        snprintf(be->err, be->errlen, "%d batches staged already (normalize_input consumes them)", DLT_INPUT_STAGED);
        return -EBUSY;
    }
    slot = (c->in_head + c->in_count) % DLT_INPUT_STAGED;
    if (c->in[slot].cap < bytes) {
        /* The first batch (or a larger one): nothing may still read or fill the old buffer (the
         * waits poll the peer check: a lost NCCL peer ends them). */
        if ((rc = _wait(be, c->copy)) != 0 || (rc = _wait(be, c->s)) != 0)
            return rc;
        cudaFree(c->in[slot].dev);
        c->in[slot].dev = NULL;
        c->in[slot].cap = 0;
        CUDA_TRY(be, cudaMalloc((void **)&c->in[slot].dev, bytes ? bytes : 1));
        c->in[slot].cap = bytes;
    }
    /* The slot's previous batch must have been normalized before the copy overwrites it. */
    CUDA_TRY(be, cudaStreamWaitEvent(c->copy, c->in[slot].consumed, 0));
    CUDA_TRY(be, cudaMemcpyAsync(c->in[slot].dev, src, bytes, cudaMemcpyHostToDevice, c->copy));
    CUDA_TRY(be, cudaEventRecord(c->in[slot].staged, c->copy));
    c->in[slot].pixels = pixels;
    c->in_count++;
    return 0;
}

static int _normalize_input(dlt_backend *be, float *dst, size_t pixels, const float mean[3], const float inv_std[3])
{
    cuda_backend *c = _cu(be);
    int slot = c->in_head;
    if (c->in_count == 0 || c->in[slot].pixels != pixels) {
        snprintf(be->err, be->errlen, "normalize_input of %zu pixels: %s", pixels,
                 c->in_count ? "the staged batch differs in size" : "no batch staged");
        return -EINVAL;
    }
    CUDA_TRY(be, cudaStreamWaitEvent(c->s, c->in[slot].staged, 0));
    KERNEL_TRY(be, dlt_k_normalize(c->in[slot].dev, dst, c->dt, pixels, mean, inv_std, (dlt_stream)c->s));
    CUDA_TRY(be, cudaEventRecord(c->in[slot].consumed, c->s));
    c->in_head = (slot + 1) % DLT_INPUT_STAGED;
    c->in_count--;
    return 0;
}

/* ---- the step's results: device doubles, read once per step */

static int _results_reset(dlt_backend *be)
{
    CUDA_TRY(be, cudaMemsetAsync(be->results, 0, DLT_RES_COUNT * sizeof(double), _cu(be)->s));
    return 0;
}

static int _results_put(dlt_backend *be, int slot, double value)
{
    cuda_backend *c = _cu(be);
    int rc;
    if ((rc = dlt_results_slot_check(slot, be->err, be->errlen)) != 0)
        return rc;
    /* The slot's pinned source may still be read by its previous copy: only a second put of one
     * slot between two reads waits (the training step puts each slot at most once). */
    if (!c->capturing && (c->put_pending & (1u << slot)) && (rc = _wait(be, c->s)) != 0)
        return rc;
    c->pin_res->put[slot] = value; /* recorded: each replay sets it (dlt_step_inputs) */
    CUDA_TRY(be, cudaMemcpyAsync(be->results + slot, &c->pin_res->put[slot], sizeof(double), cudaMemcpyHostToDevice,
                                 c->s));
    if (!c->capturing)
        c->put_pending |= 1u << slot;
    return 0;
}

static int _results_read(dlt_backend *be, double *host)
{
    cuda_backend *c = _cu(be);
    int rc;
    if (c->capturing) {
        snprintf(be->err, be->errlen, "the step's results cannot be read while the step is recorded as a CUDA graph");
        return -EINVAL;
    }
    CUDA_TRY(be, cudaMemcpyAsync(c->pin_res->read, be->results, DLT_RES_COUNT * sizeof(double), cudaMemcpyDeviceToHost,
                                 c->s));
    if ((rc = _wait(be, c->s)) != 0)
        return rc;
    memcpy(host, c->pin_res->read, DLT_RES_COUNT * sizeof(double));
    return 0;
}

/* The step's labels from host memory into the pinned buffer the (recorded) copy reads. */
static int _stage_labels(dlt_backend *be, const int32_t *labels, int n)
{
    cuda_backend *c = _cu(be);
    /* The previous copy out of the buffer must have run before it is refilled (it has, in a
     * training step: the results read of the last step waited for everything). Not while
     * recording: capture_begin waited, and a recorded step makes no copy now. */
    int rc;
    /* Polled, with the peer check between polls, like every other host wait: a copy queued
     * behind a reduction with a lost peer would otherwise block here for good. */
    if (!c->capturing &&
        (rc = dlt_cuda_event_wait(c->labels_free, be->peers, be->err, be->errlen)) != 0)
        return rc;
    memcpy(c->pin_labels, labels, (size_t)n * sizeof(int32_t));
    return 0;
}

static int _softmax_xent(dlt_backend *be, const float *logits, const int32_t *labels, int n, int k, float smoothing,
                         float loss_scale, float *dlogits)
{
    cuda_backend *c = _cu(be);
    double *res = be->results;
    int rc;
    if ((rc = _staging(be, (void **)&c->pin_labels, (void **)&c->d_labels, &c->labels_size,
                       (size_t)n * sizeof(int32_t))) != 0 ||
        (rc = _stage_labels(be, labels, n)) != 0)
        return rc;
    CUDA_TRY(be, cudaMemcpyAsync(c->d_labels, c->pin_labels, (size_t)n * sizeof(int32_t), cudaMemcpyHostToDevice, c->s));
    if (!c->capturing)
        CUDA_TRY(be, cudaEventRecord(c->labels_free, c->s));
    KERNEL_TRY(be, dlt_k_softmax_xent(logits, c->dt, c->d_labels, n, k, smoothing, loss_scale, dlogits,
                                      res + DLT_RES_LOSS, res + DLT_RES_TOP1, res + DLT_RES_TOP5,
                                      res + DLT_RES_BAD_LABELS, (dlt_stream)c->s));
    return 0;
}

static int _count_nonfinite(dlt_backend *be, const float *x, size_t n)
{
    KERNEL_TRY(be, dlt_k_count_nonfinite(x, n, be->results + DLT_RES_NONFINITE, (dlt_stream)_cu(be)->s));
    return 0;
}

static int _checksum(dlt_backend *be, const float *x, size_t n, double *sum)
{
    cuda_backend *c = _cu(be);
    int rc;
    if (!c->sum_scratch)
        CUDA_TRY(be, cudaMalloc((void **)&c->sum_scratch, dlt_k_checksum_scratch()));
    KERNEL_TRY(be, dlt_k_checksum(x, n, c->sum_scratch, c->d_checksum, (dlt_stream)c->s));
    CUDA_TRY(be, cudaMemcpyAsync(&c->pin_res->checksum, c->d_checksum, sizeof(double), cudaMemcpyDeviceToHost, c->s));
    if ((rc = _wait(be, c->s)) != 0)
        return rc;
    *sum = c->pin_res->checksum;
    return 0;
}

/* ---- the flat optimizer */

static int _sgd_plan(dlt_backend *be, float *params, size_t n, const dlt_param_segment *segs, int nsegs)
{
    cuda_backend *c = _cu(be);
    dlt_sgd_chunk *chunks = NULL;
    size_t count = 0, k = 0;
    int rc = 0;
    if ((rc = dlt_param_segments_check(segs, nsegs, n, be->err, be->errlen)) != 0)
        return rc;
    for (int i = 0; i < nsegs; i++)
        count += (segs[i].len + DLT_SGD_CHUNK - 1) / DLT_SGD_CHUNK;
    if (count > (size_t)INT32_MAX) {
        snprintf(be->err, be->errlen, "%zu parameters are more than one optimizer launch covers", n);
        return -EINVAL;
    }
    /* A new plan: the old twin and table go (nothing queued may still read them), and every
     * convolution binds again (plan_gen). */
    CUDA_TRY(be, cudaStreamSynchronize(c->s));
    cudaFree(c->d_chunks);
    cudaFree(c->twin);
    c->d_chunks = NULL;
    c->twin = NULL;
    c->nchunks = 0;
    c->params = NULL;
    c->nparams = 0;
    c->stem_op = NULL;
    c->stem_lo = c->stem_hi = 0;
    c->plan_gen++;
    /* Chunks never cross a segment, so each carries its segment's weight decay. */
    if (count && !(chunks = malloc(count * sizeof(*chunks)))) {
        snprintf(be->err, be->errlen, "out of memory");
        return -ENOMEM;
    }
    for (int i = 0; i < nsegs; i++)
        for (size_t o = 0; o < segs[i].len; o += DLT_SGD_CHUNK) {
            size_t len = segs[i].len - o < DLT_SGD_CHUNK ? segs[i].len - o : DLT_SGD_CHUNK;
            chunks[k++] = (dlt_sgd_chunk){(uint64_t)(segs[i].off + o), (uint32_t)len, (uint32_t)(segs[i].no_decay != 0)};
        }
    if (count) {
        cudaError_t e = cudaMalloc((void **)&c->d_chunks, count * sizeof(*chunks));
        if (e == cudaSuccess)
            e = cudaMemcpyAsync(c->d_chunks, chunks, count * sizeof(*chunks), cudaMemcpyHostToDevice, c->s);
        if (e != cudaSuccess)
            rc = dlt_cuda_fail(be->err, be->errlen, __FILE__, __LINE__, "uploading the optimizer's chunk table",
                               cudaGetErrorString(e));
        else
            rc = _wait(be, c->s); /* the pageable source is freed below */
    }
    free(chunks);
    if (rc)
        return rc;
    if (c->dt != DLT_DT_F32 && n) {
        CUDA_TRY(be, cudaMalloc(&c->twin, n * _dt_size(c->dt)));
        CUDA_TRY(be, cudaMemsetAsync(c->twin, 0, n * _dt_size(c->dt), c->s));
    }
    c->params = params;
    c->nparams = n;
    c->nchunks = (int)count;
    return 0;
}

static void _sgd_copies(cuda_backend *c, void **twin, void **stem)
{
    *twin = c->twin;
    *stem = c->stem_op ? c->stem_op->w_pad : NULL;
}

static int _sgd_step(dlt_backend *be, float *w, float *v, const float *g, float lr, float mu, float wd,
                     float wd_no_decay, float grad_scale)
{
    cuda_backend *c = _cu(be);
    dlt_sgd_args a;
    if (!c->params || w != c->params) {
        snprintf(be->err, be->errlen, "sgd_step on a buffer sgd_plan did not name");
        return -EINVAL;
    }
    if (!c->nchunks)
        return 0;
    memset(&a, 0, sizeof(a));
    a.w = w;
    a.v = v;
    a.g = g;
    a.chunks = c->d_chunks;
    a.nchunks = c->nchunks;
    a.lr = lr;
    a.mu = mu;
    a.wd = wd;
    a.wd_no_decay = wd_no_decay;
    a.grad_scale = grad_scale;
    a.results = be->results;
    a.slot_loss = DLT_RES_LOSS;
    a.slot_bad_labels = DLT_RES_BAD_LABELS;
    a.slot_nonfinite = DLT_RES_NONFINITE;
    a.slot_input_failed = DLT_RES_INPUT_FAILED;
    _sgd_copies(c, &a.twin, &a.stem);
    a.stem_lo = c->stem_lo;
    a.stem_hi = c->stem_hi;
    a.dt = c->dt;
    if (c->capturing) {
        /* Recorded: the learning rate changes every step, so the recording copies it from pinned
         * memory, which each replay sets (a kernel argument would stay the recorded value). */
        c->pin_res->lr = lr;
        CUDA_TRY(be, cudaMemcpyAsync(c->d_lr, &c->pin_res->lr, sizeof(float), cudaMemcpyHostToDevice, c->s));
        a.lr_dev = c->d_lr;
    }
    KERNEL_TRY(be, dlt_k_sgd_flat(&a, (dlt_stream)c->s));
    return 0;
}

static int _params_loaded(dlt_backend *be)
{
    cuda_backend *c = _cu(be);
    void *twin, *stem;
    if (!c->params)
        return 0;
    _sgd_copies(c, &twin, &stem);
    KERNEL_TRY(be, dlt_k_params_to_lp(c->params, c->nparams, twin, stem, c->stem_lo, c->stem_hi, c->dt,
                                      (dlt_stream)c->s));
    return 0;
}

/* ------------------------------------------------------------------ CUDA graphs */

static void _graph_reset(dlt_backend *be)
{
    cuda_backend *c = _cu(be);
    if (c->graph_exec)
        cudaGraphExecDestroy(c->graph_exec);
    if (c->graph)
        cudaGraphDestroy(c->graph);
    c->graph_exec = NULL;
    c->graph = NULL;
}

/* dlt_graph_ops.release: a capture in progress is ended and its partial graph destroyed without
 * being instantiated; then the recording goes. Writes no error: it runs on failure paths whose
 * error is already said. */
static void _graph_release(dlt_backend *be)
{
    cuda_backend *c = _cu(be);
    if (c->capturing) {
        cudaGraph_t partial = NULL;
        if (cudaStreamEndCapture(c->s, &partial) == cudaSuccess && partial)
            cudaGraphDestroy(partial);
        cudaGetLastError(); /* an invalidated capture's error is the failure already reported */
        c->capturing = 0;
    }
    _graph_reset(be);
}

static int _capture_begin(dlt_backend *be)
{
    cuda_backend *c = _cu(be);
    int rc;
    _graph_reset(be);
    /* The recorded labels copy reads the pinned buffer the host fills during capture and before
     * each replay: no plain copy may still be reading it. */
    if ((rc = dlt_cuda_event_wait(c->labels_free, be->peers, be->err, be->errlen)) != 0)
        return rc;
    /* Everything queued so far (the input upload) runs before; the recording starts empty. */
    CUDA_TRY(be, cudaStreamBeginCapture(c->s, cudaStreamCaptureModeThreadLocal));
    c->capturing = 1;
    return 0;
}

static int _capture_end(dlt_backend *be)
{
    cuda_backend *c = _cu(be);
    cudaError_t e = cudaStreamEndCapture(c->s, &c->graph);
    c->capturing = 0;
    if (e != cudaSuccess) {
        c->graph = NULL;
        return dlt_cuda_fail(be->err, be->errlen, __FILE__, __LINE__, "recording the step as a CUDA graph (run without --cuda-graphs)",
                             cudaGetErrorString(e));
    }
    CUDA_TRY(be, cudaGraphInstantiate(&c->graph_exec, c->graph, 0));
    return 0;
}

static int _replay(dlt_backend *be, const dlt_step_inputs *in)
{
    cuda_backend *c = _cu(be);
    int rc;
    if (!c->graph_exec || (size_t)in->n * sizeof(int32_t) > c->labels_size) {
        snprintf(be->err, be->errlen, "no recorded step to replay");
        return -EINVAL;
    }
    /* The recording copies the labels, the learning rate and the two puts from these pinned
     * places: refilled once the previous replay has read them (it has: the last results read
     * waited for it). */
    if ((rc = _stage_labels(be, in->labels, in->n)) != 0)
        return rc;
    c->pin_res->lr = in->lr;
    c->pin_res->put[DLT_RES_STOP] = in->stop;
    c->pin_res->put[DLT_RES_INPUT_FAILED] = in->input_failed;
    CUDA_TRY(be, cudaGraphLaunch(c->graph_exec, c->s));
    CUDA_TRY(be, cudaEventRecord(c->labels_free, c->s));
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
    if (op->conv_fwd)
        cudnnDestroyConvolutionDescriptor(op->conv_fwd);
    if (op->conv_bwd_data)
        cudnnDestroyConvolutionDescriptor(op->conv_bwd_data);
    if (op->conv_bwd_filter)
        cudnnDestroyConvolutionDescriptor(op->conv_bwd_filter);
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
    _graph_release(&c->base); /* a capture left open would fail the synchronize below */
    if (c->s)
        cudaStreamSynchronize(c->s);
    while (c->algos) {
        algo_entry *n = c->algos->next;
        free(c->algos);
        c->algos = n;
    }
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
    cudaFree(c->ws);
    cudaFree(c->d_labels);
    cudaFree(c->d_results);
    cudaFree(c->sum_scratch);
    cudaFree(c->d_chunks);
    cudaFree(c->twin);
    cudaFree(c->dw_scratch);
    cudaFreeHost(c->pin_labels);
    cudaFreeHost(c->pin_res);
    if (c->dnn)
        cudnnDestroy(c->dnn);
    if (c->blas)
        cublasDestroy(c->blas);
    if (c->s)
        cudaStreamDestroy(c->s);
    if (c->copy)
        cudaStreamDestroy(c->copy);
    free(c);
}

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
    .conv_plan = _conv_plan,
    .conv_bind_weights = _conv_bind_weights,
    .conv_fwd = _conv_fwd,
    .conv_bwd_data = _conv_bwd_data,
    .conv_bwd_weights = _conv_bwd_weights,
    .bn_plan = _bn_plan,
    .bn_fwd_train = _bn_fwd_train,
    .bn_fwd_infer = _bn_fwd_infer,
    .bn_bwd = _bn_bwd,
    .bn_stats_update = _bn_stats_update,
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
    .host_alloc = _host_alloc,
    .host_free = _host_free,
    .input_stage = _input_stage,
    .normalize_input = _normalize_input,
    .softmax_xent = _softmax_xent,
    .checksum = _checksum,
    .count_nonfinite = _count_nonfinite,
    .results_reset = _results_reset,
    .results_put = _results_put,
    .results_read = _results_read,
    .sgd_plan = _sgd_plan,
    .sgd_step = _sgd_step,
    .params_loaded = _params_loaded,
};

static const dlt_graph_ops g_cuda_graph_ops = {
    .capture_begin = _capture_begin,
    .capture_end = _capture_end,
    .replay = _replay,
    .release = _graph_release,
};

/* One training forward and backward of a small batch norm of the run's type in the configured
 * mode and ops; a status of the NOT_SUPPORTED or BAD_PARAM category is an answer (1), any other
 * failure an error (-EIO). */
static int _bn_try(dlt_backend *be, int fused)
{
    cuda_backend *c = _cu(be);
    const dlt_act_shape s = {2, 64, 4, 4};
    const size_t n = (size_t)s.n * s.c * s.h * s.w;
    dlt_op *op = NULL;
    void *x = NULL, *z = NULL, *y = NULL, *dx = NULL, *dz = NULL;
    float *p = NULL;
    cudnnStatus_t st = CUDNN_STATUS_SUCCESS;
    int rc = 0;
    const size_t bytes = n * _dt_size(c->dt);
    char keep[512];
    snprintf(keep, sizeof(keep), "%s", be->err);
    /* Zeroed on the backend's stream, which the probe's kernels run on: a plain cudaMemset runs on
     * the legacy default stream, which a non-blocking stream does not wait for. */
    if (cudaMalloc(&x, bytes) != cudaSuccess || cudaMalloc(&z, bytes) != cudaSuccess ||
        cudaMalloc(&y, bytes) != cudaSuccess || cudaMalloc(&dx, bytes) != cudaSuccess ||
        cudaMalloc(&dz, bytes) != cudaSuccess || cudaMalloc((void **)&p, 4 * (size_t)s.c * sizeof(float)) != cudaSuccess ||
        cudaMemsetAsync(x, 0, bytes, c->s) != cudaSuccess || cudaMemsetAsync(z, 0, bytes, c->s) != cudaSuccess ||
        cudaMemsetAsync(p, 0, 4 * (size_t)s.c * sizeof(float), c->s) != cudaSuccess) {
        rc = dlt_cuda_fail(be->err, be->errlen, __FILE__, __LINE__, "batch-norm probe buffers",
                           cudaGetErrorString(cudaGetLastError()));
        goto out;
    }
    if ((rc = _bn_plan(be, &s, 1e-5f, &op)) != 0) {
        rc = 1; /* the size queries refused: not supported in this mode */
        snprintf(be->err, be->errlen, "%s", keep);
        goto out;
    }
    if (fused) {
        st = cudnnBatchNormalizationForwardTrainingEx(c->dnn, c->bn_mode, CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION, &g_one,
                                                      &g_zero, op->xd, x, op->xd, z, op->xd, y, op->pd, p, p + s.c, 0.0,
                                                      NULL, NULL, op->eps, op->save_mean, op->save_inv, op->act, c->ws,
                                                      c->ws_size, op->reserve, op->reserve_size);
        if (dlt_cudnn_ok(st))
            st = cudnnBatchNormalizationBackwardEx(c->dnn, c->bn_mode, CUDNN_BATCHNORM_OPS_BN_ADD_ACTIVATION, &g_one,
                                                   &g_zero, &g_one, &g_zero, op->xd, x, op->xd, y, op->xd, y, op->xd, dz,
                                                   op->xd, dx, op->pd, p, p + s.c, p + 2 * s.c, p + 3 * s.c, op->eps,
                                                   op->save_mean, op->save_inv, op->act, c->ws, c->ws_size, op->reserve,
                                                   op->reserve_size);
    } else {
        st = cudnnBatchNormalizationForwardTrainingEx(c->dnn, c->bn_mode, CUDNN_BATCHNORM_OPS_BN, &g_one, &g_zero, op->xd,
                                                      x, NULL, NULL, op->xd, y, op->pd, p, p + s.c, 0.0, NULL, NULL,
                                                      op->eps, op->save_mean, op->save_inv, NULL, c->ws, c->ws_size,
                                                      op->reserve, op->reserve_size);
        if (dlt_cudnn_ok(st))
            st = cudnnBatchNormalizationBackwardEx(c->dnn, c->bn_mode, CUDNN_BATCHNORM_OPS_BN, &g_one, &g_zero, &g_one,
                                                   &g_zero, op->xd, x, NULL, NULL, op->xd, y, NULL, NULL, op->xd, dx,
                                                   op->pd, p, NULL, p + 2 * s.c, p + 3 * s.c, op->eps, op->save_mean,
                                                   op->save_inv, NULL, c->ws, c->ws_size, op->reserve,
                                                   op->reserve_size);
    }
    if (dlt_cudnn_ok(st) && cudaStreamSynchronize(c->s) != cudaSuccess)
        rc = dlt_cuda_fail(be->err, be->errlen, __FILE__, __LINE__, "batch-norm probe",
                           cudaGetErrorString(cudaGetLastError()));
    else if (dlt_cudnn_probe_answer(st) == 1) /* by category: cuDNN 9 answers with sub-codes (30xx) */
        rc = 1;
    else if (!dlt_cudnn_ok(st))
        rc = dlt_cuda_fail(be->err, be->errlen, __FILE__, __LINE__, "batch-norm probe", cudnnGetErrorString(st));
out:
    cudaStreamSynchronize(c->s); /* nothing of the probe's may still run on the buffers freed below */
    _op_destroy(be, op);
    cudaFree(x), cudaFree(z), cudaFree(y), cudaFree(dx), cudaFree(dz), cudaFree(p);
    return rc;
}

/* Training batch norm in fp32, tf32 and bf16: (bf16) fused persistent, else unfused persistent,
 * else plain spatial, whichever cuDNN runs here; the backend's name says which. fp16's fused
 * persistent NHWC kernels are the documented case and are not probed. */
static int _bn_probe(dlt_backend *be)
{
    cuda_backend *c = _cu(be);
    const char *prec = dlt_precision_name(c->base.precision);
    int rc;
    if (c->base.precision == DLT_PREC_FP16)
        return 0;
    if (c->ops.bn_fwd_train_relu) {
        if ((rc = _bn_try(be, 1)) <= 0)
            return rc;
        c->ops.bn_fwd_train_relu = NULL;
        c->ops.bn_bwd_relu = NULL;
        snprintf(c->name, sizeof(c->name), "cuda-cudnn (%s batch norm unfused: cuDNN has no fused %s kernel here)",
                 prec, prec);
        c->ops.name = c->name;
    }
    if ((rc = _bn_try(be, 0)) <= 0)
        return rc;
    c->bn_mode = CUDNN_BATCHNORM_SPATIAL;
    snprintf(c->name, sizeof(c->name), "cuda-cudnn (%s batch norm in spatial mode: no persistent %s kernel here)",
             prec, prec);
    c->ops.name = c->name;
    return 0;
}

int dlt_backend_cuda_create(dlt_backend **out, const dlt_backend_config *cfg, char *err, size_t errlen)
{
    cuda_backend *c;
    struct cudaDeviceProp prop;
    cudnnStatus_t ds;
    cublasStatus_t bs;
    int rc, dev;
    *out = NULL;
    if ((rc = dlt_cuda_select_device(cfg->device, &dev, err, errlen)) != 0)
        return rc;
    if (cudaGetDeviceProperties(&prop, dev) != cudaSuccess) {
        snprintf(err, errlen, "cannot read the properties of CUDA device %d", dev);
        return -EIO;
    }
    if (prop.major * 10 + prop.minor < DLT_CUDA_MIN_SM) {
        snprintf(err, errlen, "%s is compute capability %d.%d, but this build's kernels start at sm_%d (configure "
                 "picks the architectures from nvcc; for Volta/Turing GPUs build with a CUDA 12.x toolkit: "
                 "--with-cuda=DIR)", prop.name, prop.major, prop.minor, DLT_CUDA_MIN_SM);
        return -ENOTSUP;
    }
    if ((cfg->precision == DLT_PREC_TF32 || cfg->precision == DLT_PREC_BF16) && prop.major < 8) {
        snprintf(err, errlen, "--precision %s needs an Ampere or newer GPU; %s is compute capability %d.%d (use fp16 "
                 "or fp32)", dlt_precision_name(cfg->precision), prop.name, prop.major, prop.minor);
        return -ENOTSUP;
    }
    c = calloc(1, sizeof(*c));
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    c->ops = g_cuda_ops;
    c->base.ops = &c->ops;
    c->base.precision = cfg->precision;
    c->base.graphs = &g_cuda_graph_ops;
    c->base.host_memory = 0;
    c->base.err = err;
    c->base.errlen = errlen;
    c->cfg = *cfg;
    c->device = dev;
    c->cc_major = prop.major;
    c->ws_limit = DLT_CUDNN_WORKSPACE_CAP;
    c->stem_pad = cfg->stem_pad < 0 ? cfg->precision != DLT_PREC_FP32 : cfg->stem_pad;
    {
        /* Storage type, cuDNN/cuBLAS types, math mode and BN mode of each precision. fp32 is strict
         * (FMA math: no TF32); tf32 lets cuDNN and cuBLAS use TF32 tensor cores. Batch norm trains
         * in the persistent mode in every precision, as PyTorch does
         * (aten/src/ATen/native/cudnn/BatchNorm.cpp: SPATIAL_PERSISTENT when training, SPATIAL for
         * inference, which _bn_fwd_infer uses); fp32/tf32 and bf16 are probed at creation and fall
         * back to the plain spatial mode where cuDNN has no persistent kernel. */
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
        for (i = 0; i < nmodes && modes[i].prec != cfg->precision; i++)
            ;
        if (i == nmodes)
            i = 0; /* unreachable: precisions are parsed by name */
        c->dt = modes[i].dt;
        c->cdt = modes[i].cdt;
        c->blas_dt = modes[i].blas_dt;
        c->math = modes[i].math;
        c->blas_compute = modes[i].compute;
        c->bn_mode = modes[i].bn;
    }
    /* cuDNN fuses BN + add + ReLU for half NHWC tensors in persistent mode; fp32/tf32 keep the
     * unfused path. bf16: libcudnn_ops ships fused kernels, but cuDNN's documentation names half
     * only (and PyTorch keeps bf16 batch norm off cuDNN), so bf16 is probed at creation below and
     * falls back to the unfused persistent, then the plain spatial mode, saying so in the name. */
    if (cfg->precision == DLT_PREC_FP16 || cfg->precision == DLT_PREC_BF16) {
        c->ops.bn_fwd_train_relu = _bn_fwd_train_relu;
        c->ops.bn_bwd_relu = _bn_bwd_relu;
    }
    c->base.act_size = _dt_size(c->dt);
    /* The results and, after them, the checksum's slot: one allocation, zeroed on the stream. */
    if (cudaStreamCreateWithFlags(&c->s, cudaStreamNonBlocking) != cudaSuccess ||
        cudaStreamCreateWithFlags(&c->copy, cudaStreamNonBlocking) != cudaSuccess ||
        cudaEventCreateWithFlags(&c->labels_free, cudaEventDisableTiming) != cudaSuccess ||
        cudaMalloc((void **)&c->d_results, (DLT_RES_COUNT + 2) * sizeof(double)) != cudaSuccess ||
        cudaMemsetAsync(c->d_results, 0, (DLT_RES_COUNT + 2) * sizeof(double), c->s) != cudaSuccess ||
        cudaMallocHost((void **)&c->pin_res, sizeof(*c->pin_res)) != cudaSuccess) {
        snprintf(err, errlen, "CUDA device %d (%s): cannot create streams or buffers: %s", dev, prop.name,
                 cudaGetErrorString(cudaGetLastError()));
        _destroy(&c->base);
        return -EIO;
    }
    if (!dlt_cudnn_ok(ds = cudnnCreate(&c->dnn)) || !dlt_cudnn_ok(ds = cudnnSetStream(c->dnn, c->s))) {
        snprintf(err, errlen, "cuDNN: %s (is libcudnn %d.x installed for this driver?)", cudnnGetErrorString(ds),
                 CUDNN_MAJOR);
        _destroy(&c->base);
        return -EIO;
    }
    if (cudaMalloc(&c->blas_ws, DLT_CUBLAS_WORKSPACE_BYTES) != cudaSuccess) {
        snprintf(err, errlen, "CUDA device %d: out of memory for the cuBLAS workspace", dev);
        _destroy(&c->base);
        return -ENOMEM;
    }
    if ((bs = cublasCreate(&c->blas)) != CUBLAS_STATUS_SUCCESS || (bs = cublasSetStream(c->blas, c->s)) != CUBLAS_STATUS_SUCCESS ||
        (bs = cublasSetWorkspace(c->blas, c->blas_ws, DLT_CUBLAS_WORKSPACE_BYTES)) != CUBLAS_STATUS_SUCCESS) {
        snprintf(err, errlen, "cuBLAS: %s", cublasGetStatusString(bs));
        _destroy(&c->base);
        return -EIO;
    }
    c->base.stream = c->s;
    c->base.results = c->d_results;
    c->d_checksum = c->d_results + DLT_RES_COUNT;
    c->d_lr = (float *)(c->d_results + DLT_RES_COUNT + 1);
    for (int i = 0; i < DLT_INPUT_STAGED; i++)
        if (cudaEventCreateWithFlags(&c->in[i].staged, cudaEventDisableTiming) != cudaSuccess ||
            cudaEventCreateWithFlags(&c->in[i].consumed, cudaEventDisableTiming) != cudaSuccess) {
            snprintf(err, errlen, "CUDA device %d: cannot create events: %s", dev, cudaGetErrorString(cudaGetLastError()));
            _destroy(&c->base);
            return -EIO;
        }
    if ((rc = _bn_probe(&c->base)) != 0) {
        snprintf(err, errlen, "%s", c->base.err);
        _destroy(&c->base);
        return rc;
    }
    *out = &c->base;
    return 0;
}
