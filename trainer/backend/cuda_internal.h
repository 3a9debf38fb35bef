/* SPDX-License-Identifier: Apache-2.0 */
/* cuda_internal: what the three files of the CUDA backend share (cuda_cudnn.c: memory, batch norm,
 * pooling, cuBLAS, lifetime; cuda_conv.c: convolutions; cuda_step.c: input staging, loss, results,
 * the flat optimizer and CUDA graphs): the backend's and the ops' structs, the check macros and
 * the few helpers more than one of them calls. Not for use outside trainer/backend/cuda_*.c. */
#ifndef DLT_CUDA_INTERNAL_H
#define DLT_CUDA_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <pthread.h>

#include "common/cuda_check.h"
#include "common/progress.h"
#include "trainer/backend/backend.h"
#include "trainer/backend/cuda_kernels.h"
#include "trainer/backend/cudnn_graph.h"

/* One convolution geometry's chosen algorithms (many ResNet layers share a geometry), each with
 * the math type cudnnFind timed it with: cuDNN's Find returns (algo, mathType, memory) and the
 * descriptor must carry that mathType when the algorithm runs, or cuDNN may run another variant
 * than the one timed (PyTorch's note "behavior of cudnnFind and cudnnGet" in Conv_v7.cpp sets the
 * descriptor's math type from the perf result likewise). */
/* A batch-norm shape's decision, probed once per shape (persistent kernels are refused for some
 * shapes): cuDNN's mode, and whether the ReLU (and residual add) run fused into it. */
typedef struct bn_choice {
    dlt_act_shape s;
    cudnnBatchNormMode_t mode;
    int fused;
    struct bn_choice *next;
} bn_choice;

/* One form of the convolution + batch-norm chain for one geometry (--fuse-bn, cuda_fused.c): its
 * graphs' plans, planned once: state 0 not tried, 1 planned, -1 refused (why). */
typedef struct fused_form {
    dlt_cg_pool *pool;
    cudnnBackendDescriptor_t fwd, wgrad; /* wgrad: the prologue form's filter gradient */
    int64_t fwd_engine, wgrad_engine;
    int state, said; /* said: its refusal printed */
    int wgrad_lowp;  /* the prologue's filter gradient written in the run's type, then cast */
    char why[640];
} fused_form;

typedef struct algo_entry {
    dlt_conv_shape s;
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdDataAlgo_t bwd_data;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter;
    cudnnMathType_t fwd_math, bwd_data_math, bwd_filter_math;
    int bwd_data_ok; /* the image-input convolution needs no data gradient; cuDNN may have none */
    size_t ws;
    /* fp16/bf16: the filter gradient written in fp32 by a cuDNN graph (cudnn_graph.h) where it beat
     * the legacy call and its cast when timed at planning (--wgrad-fp32): its plan, NULL for the
     * legacy path; the descriptors live in wg_pool. */
    dlt_cg_pool *wg_pool;
    cudnnBackendDescriptor_t wg_plan;
    int64_t wg_engine;
    /* The convolution + batch-norm chain per form (0: the statistics only; 1: with the previous
     * batch norm as the prologue, which has its own filter gradient too). */
    fused_form fu[2];
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
    int device, cc_major, cc; /* cc: compute capability, 90 for 9.0 */
    char gpu_name[64];        /* the device's name (the algorithm cache's key) */
    int cache_warned;         /* --cudnn-cache trouble said once */
    int stem_pad;             /* pad the 3-channel stem input to 4 channels */
    dlt_dt dt;
    cudnnDataType_t cdt;
    cudaDataType_t blas_dt;
    cublasComputeType_t blas_compute;
    cudnnMathType_t math;
    cudnnBatchNormMode_t bn_mode; /* the preferred training mode; each shape's own is in bn_choices */
    int bn_fusable;               /* fp16/bf16: BN + add + ReLU may run as one cuDNN kernel */
    bn_choice *bn_choices;
    void *bn_scratch; /* an unfused BN+ReLU backward's relu'(y) dy when no dz is asked for */
    size_t bn_scratch_size;
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
    /* The chain's batch-norm backward partial sums (dlt_k_bn_bwd_scratch), grown at planning */
    float *fu_scratch;
    size_t fu_scratch_size;
    int fu_said_shape; /* a refusal of the chain's own (a shape) said */
    int fu_runtime;    /* the chain's geometries whose plans cuDNN compiles at run time (NVRTC) */
    /* --wgrad-fp32: geometries planned with a choice to make, and those that took the graph */
    int wg_planned, wg_graph, wg_said, wg_reported;
    /* CUDA graph of the forward/loss/backward(/reduction) of one step */
    int capturing;
    cudaGraph_t graph;
    cudaGraphExec_t graph_exec;
    /* The recording is replayed by the training thread and may be released by the watchdog's:
     * graph_mu orders the two, graph_closed refuses replays after a release_async. */
    pthread_mutex_t graph_mu;
    int graph_closed;
    void *blas_ws;             /* cuBLAS must not allocate while a graph is captured */
    cudaEvent_t *timer_events; /* be->timer's marks (DLT_CU_TIMER_SLOTS, made as first used) */
} cuda_backend;

struct dlt_op {
    /* conv */
    dlt_conv_shape cs;
    int cp; /* input channels as cuDNN sees them (4 for the padded 3-channel stem) */
    cudnnTensorDescriptor_t xd, yd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t conv;                                     /* the search's (the run's math type) */
    cudnnConvolutionDescriptor_t conv_fwd, conv_bwd_data, conv_bwd_filter; /* each with its winner's */
    const algo_entry *algo;
    const void *w;  /* the KRSC filter cuDNN reads (conv_bind_weights) */
    unsigned w_gen; /* the plan w points into (0: the caller's own float weights) */
    void *w_pad;    /* the padded stem's filter (K x R x S x 4 in the activation type) */
    void *x_pad;    /* the padded input of the stem, kept from forward for backward-filter */
    /* bn */
    dlt_act_shape as;
    float eps;
    cudnnTensorDescriptor_t pd;
    cudnnActivationDescriptor_t act;
    float *save_mean, *save_inv;
    cudnnBatchNormMode_t bn_mode; /* this shape's (bn_choice) */
    int bn_fused;
    void *reserve;
    size_t reserve_size;
    float *run_mean, *run_var; /* bn_bind_running's: cuDNN updates them in the forward (NULL: none) */
    double run_factor;         /* its momentum, cuDNN's exponentialAverageFactor */
    /* pool */
    cudnnPoolingDescriptor_t pool;
    const void *px, *py;
};

static inline cuda_backend *_cu(dlt_backend *be)
{
    return (cuda_backend *)be;
}

static inline size_t _dt_size(dlt_dt dt)
{
    return dt == DLT_DT_F32 ? 4 : 2;
}

/* dlt_cuda_grow with the backend's peer check and error sink. */
static inline int _grow(dlt_backend *be, void **dev, void **pin, size_t *size, size_t need, cudaStream_t st)
{
    return dlt_cuda_grow(dev, pin, size, need, st, be->peers, be->err);
}

/* cuDNN's and cuBLAS's alpha and beta. */
static const float g_one = 1.f, g_zero = 0.f;

/* cuda_shared.c */
/* Waits for st, polling the peer check (a lost NCCL peer ends the wait with its error). */
int dlt_cu_wait(dlt_backend *be, cudaStream_t st);
/* Grows the shared cuDNN workspace to at least need bytes (planning time only). */
int dlt_cu_workspace(dlt_backend *be, size_t need);
/* An NHWC tensor descriptor of the run's type. */
int dlt_cu_nhwc(dlt_backend *be, cudnnTensorDescriptor_t *d, int n, int ch, int h, int w);
/* Where w (n floats) lies in the parameter buffer sgd_plan named: 0 and *off, or -EINVAL. */
int dlt_cu_param_offset(dlt_backend *be, const float *w, size_t n, const char *what, size_t *off);

/* cuda_conv.c: the convolution entries of the ops table. */
void dlt_cu_conv_ops(dlt_backend_ops *ops);
/* Frees the backend's per-geometry algorithm entries (their graph plans with them). */
void dlt_cu_conv_free_algos(cuda_backend *c);
/* 0 when op's weights are bound into the current parameter plan; else -EINVAL, err saying which. */
int dlt_cu_conv_weights_ok(dlt_backend *be, const dlt_op *op);
/* Destroys op's three per-direction convolution descriptors (NULL after). */
void dlt_cu_conv_free_descriptors(dlt_op *op);

/* cuda_fused.c: the convolution + batch-norm chain's six entries (--fuse-bn, fp16/bf16). */
void dlt_cu_fused_ops(dlt_backend_ops *ops);
/* Frees an algorithm entry's chain plans. */
void dlt_cu_fused_free(algo_entry *e);

/* cuda_step.c: the input, loss, results and optimizer entries of the ops table, and the graph ops. */
void dlt_cu_step_ops(dlt_backend_ops *ops);
extern const dlt_graph_ops dlt_cu_graph_ops;
/* be->timer: timing events on the compute stream (op_profile); released with the backend. */
#define DLT_CU_TIMER_SLOTS 8192
extern const dlt_timer_ops dlt_cu_timer_ops;
void dlt_cu_timer_release(cuda_backend *c);

#endif
