/* SPDX-License-Identifier: Apache-2.0 */
/* backend: the ops table every compute backend implements (CPU: oneDNN, CUDA: cuDNN/cuBLAS).
 * Activations are NHWC. In backend memory, conv weights (and their gradients and momentum) are
 * KRSC (OHWI), the layout cuDNN's NHWC kernels read, so no step re-lays them out; the network
 * converts to torchvision's OIHW only when the host copy is written or read (checkpoints,
 * initialisation). The graph, the loop and the learning rate live once, above this table. The
 * optimizer's update does not: sgd_step (SGD with momentum and weight decay, skipped by the rule
 * of dlt_results_skip below) is each backend's own fused pass over the flat parameter buffer, so
 * it reads the step's results where they lie, without a wait for the host.
 *
 * One step's budget (tests/unit/test_step_budget.c counts it through a recording hook on this
 * table): one sgd_step, no weight re-layout, one blocking read (results_read), no copy of the
 * model between host and backend.
 *
 * Memory: every pointer handed to an op is backend memory (host memory for the CPU backend,
 * device memory for CUDA), obtained from alloc. Parameter-side buffers (weights, gradients,
 * momentum, BN statistics, logits' gradient scale) are float. Activation buffers hold the
 * backend's activation type, act_size bytes per element (float; half or bfloat16 under mixed
 * precision on a GPU, bfloat16 under bf16 on the CPU): callers size them with act_size and treat
 * them as opaque (act_from_float / act_to_float cross to floats); they are typed float * below
 * for fp32's sake. Above this table a d_ prefix (d_params,
 * d_stats) names such backend (device) memory; dx, dy, dw name derivatives. */
#ifndef DLT_BACKEND_H
#define DLT_BACKEND_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "common/peer_check.h"
#include "common/status.h"

/* fp32; bf16 / fp16 mixed precision (float master weights); tf32: fp32 tensors, TF32 tensor-core
 * math (Ampere and newer GPUs). */
typedef enum { DLT_PREC_FP32 = 0, DLT_PREC_BF16 = 1, DLT_PREC_FP16 = 2, DLT_PREC_TF32 = 3 } dlt_precision;

const char *dlt_precision_name(dlt_precision p);
/* Parses "fp32", "tf32", "fp16", "bf16"; -1 when unknown. */
int dlt_precision_parse(const char *s);

typedef struct {
    int n, c, h, w; /* input, NHWC */
    int k, r, s;    /* output channels, kernel height/width */
    int stride, pad;
    int oh, ow; /* output size (filled by dlt_conv_shape_finish) */
} dlt_conv_shape;

typedef struct {
    int n, c, h, w;
} dlt_act_shape;

typedef struct dlt_backend dlt_backend;
/* A backend's plan for one layer: its primitives (descriptors, algorithms) created once per shape. */
typedef struct dlt_op dlt_op;

/* A run of the flat parameter buffer that one sgd_step treats alike. */
typedef struct {
    size_t off, len;
    int no_decay; /* BN weight/bias, FC bias */
} dlt_param_segment;

/* The slots of a step's results (be->results), summed over the step's batches and, after the
 * agreement, over the ranks. */
enum {
    DLT_RES_LOSS = 0, /* summed cross-entropy */
    DLT_RES_TOP1,     /* hits */
    DLT_RES_TOP5,
    DLT_RES_BAD_LABELS,     /* labels outside 0..k-1 */
    DLT_RES_NONFINITE,      /* nonzero: a gradient is not finite (fp16 overflow) */
    DLT_RES_STOP,           /* ranks asked to stop (a signal) */
    DLT_RES_INPUT_FAILED,   /* ranks that could not load their batch */
    DLT_RES_NONFINITE_ROWS, /* samples whose logits are not all finite: scored as misses */
    DLT_RES_COUNT
};

/* 0 for a slot of the results (results_put's precondition); else -EINVAL with err saying so. */
int dlt_results_slot_check(int slot, dlt_err *err);

/* 0 when segs tile [0, n) in order, without gaps or empty segments (sgd_plan's precondition);
 * else -EINVAL with err saying where. */
int dlt_param_segments_check(const dlt_param_segment *segs, int nsegs, size_t n, dlt_err *err);

/* Batches staged ahead of their use (input_stage) at most: the current one and the next. */
#define DLT_INPUT_STAGED 2

/* Whether the step the results describe changes no weight (sgd_step's rule, the same on the
 * host and in every backend). */
static inline int dlt_results_skip(const double *res)
{
    return res[DLT_RES_NONFINITE] != 0 || res[DLT_RES_INPUT_FAILED] != 0 || res[DLT_RES_BAD_LABELS] != 0 ||
           !isfinite(res[DLT_RES_LOSS]);
}

typedef struct {
    const char *name;
    void (*destroy)(dlt_backend *be);
    void (*op_destroy)(dlt_backend *be, dlt_op *op);

    /* Backend memory: alloc returns zeroed memory or NULL; upload/download cross between host
     * and backend memory, copy stays inside it; all three complete before returning. */
    void *(*alloc)(dlt_backend *be, size_t bytes);
    void (*release)(dlt_backend *be, void *p);
    int (*upload)(dlt_backend *be, void *dst, const void *host_src, size_t bytes);
    int (*download)(dlt_backend *be, void *host_dst, const void *src, size_t bytes);
    int (*copy)(dlt_backend *be, void *dst, const void *src, size_t bytes);
    /* Waits for every queued operation (timing; errors of asynchronous work surface here). */
    int (*sync)(dlt_backend *be);
    /* Activations to/from host floats (n elements), converting from/to the activation type. */
    int (*act_from_float)(dlt_backend *be, float *act, const float *host, size_t n);
    int (*act_to_float)(dlt_backend *be, float *host, const float *act, size_t n);

    /* Convolution without bias. bind_weights is called once, after sgd_plan: the op reads its
     * KRSC weights at w_krsc (inside the planned parameter buffer) from then on; whatever copy
     * the backend derives from them (a low-precision twin, a blocked layout) is brought up to date
     * by params_loaded and by every sgd_step, never by a per-layer call. */
    int (*conv_plan)(dlt_backend *be, const dlt_conv_shape *s, dlt_op **op);
    int (*conv_bind_weights)(dlt_backend *be, dlt_op *op, const float *w_krsc);
    int (*conv_fwd)(dlt_backend *be, dlt_op *op, const float *x, float *y);
    int (*conv_bwd_data)(dlt_backend *be, dlt_op *op, const float *dy, float *dx);
    int (*conv_bwd_weights)(dlt_backend *be, dlt_op *op, const float *x, const float *dy, float *dw_krsc);
    /* Optional (NULL: the network runs conv_bwd_data into a scratch buffer, then accumulate):
     * dx += the data gradient, in one call, where dx already holds a gradient (a residual join:
     * 16 in a ResNet-50 backward). cuDNN's blend, beta = 1. */
    int (*conv_bwd_data_add)(dlt_backend *be, dlt_op *op, const float *dy, float *dx);

    /* Batch normalization over n*h*w per channel. Training writes the batch mean and biased
     * variance; the caller keeps the running statistics. */
    int (*bn_plan)(dlt_backend *be, const dlt_act_shape *s, float eps, dlt_op **op);
    int (*bn_fwd_train)(dlt_backend *be, dlt_op *op, const float *x, const float *gamma, const float *beta, float *y,
                        float *mean, float *var);
    int (*bn_fwd_infer)(dlt_backend *be, dlt_op *op, const float *x, const float *gamma, const float *beta,
                        const float *mean, const float *var, float *y);
    int (*bn_bwd)(dlt_backend *be, dlt_op *op, const float *x, const float *dy, const float *gamma, const float *beta,
                  const float *mean, const float *var, float *dx, float *dgamma, float *dbeta);

    /* Running statistics as PyTorch keeps them: r = (1-m) r + m batch (variance times unbias). */
    int (*bn_stats_update)(dlt_backend *be, float *run_mean, float *run_var, const float *mean, const float *var, int c,
                           float momentum, float unbias);
    /* Optional (NULL: the network calls bn_stats_update after each training forward). Called once
     * per BN op, after bn_plan: from then on every training forward of op (bn_fwd_train,
     * bn_fwd_train_relu) also updates the running statistics at run_mean and run_var (c floats
     * each, backend memory that stays put for op's life) in the same call, as bn_stats_update would
     * with this momentum and an unbias of m / (m - 1), m = n*h*w. Those forwards may then leave
     * their mean and var outputs unwritten: only a backend whose bn_bwd does not read them offers
     * this (cuDNN: its own saved statistics serve the backward). */
    int (*bn_bind_running)(dlt_backend *be, dlt_op *op, float *run_mean, float *run_var, float momentum);

    /* Optional (NULL: the network runs bn_fwd_train + add_relu and relu_bwd + bn_bwd): training
     * forward y = relu(bn(x) + z) (z may be NULL) in one pass, and its backward from y, which
     * also writes dz, the gradient of z (NULL when there is no z); dy is left as it is. */
    int (*bn_fwd_train_relu)(dlt_backend *be, dlt_op *op, const float *x, const float *z, const float *gamma,
                             const float *beta, float *y, float *mean, float *var);
    int (*bn_bwd_relu)(dlt_backend *be, dlt_op *op, const float *x, const float *y, const float *dy, const float *gamma,
                       const float *beta, float *dx, float *dz, float *dgamma, float *dbeta);

    /* Optional, all six or none (NULL: each convolution and batch norm runs on its own): the
     * convolution + batch-norm chain of a training step, where a convolution's output feeds one
     * batch norm alone. Statistics are 2k floats, the per-channel sum then the sum of squares;
     * scale_bias is 2c values of the activation type, the batch norm's scale gamma/sqrt(var + eps)
     * then its bias beta - mean * scale, so that bn(x) = x * scale + bias.
     * conv_fuse_plan, once per convolution after its weights are bound: 0 when op can run
     * conv_fwd_stats (prologue: and conv_bwd_weights_pro, its input being relu(bn(x)) applied on
     * the fly, never stored); -ENOTSUP, with err saying why, when it cannot (the network then runs
     * that convolution on its own); another negative status is an error of the run.
     * conv_fwd_stats: y = conv(x') and its statistics, x' = x, or relu(x * scale + bias) when
     * scale_bias is not NULL. conv_bwd_weights_pro: dw_krsc = the filter gradient of conv(x') with
     * that x'. bn_finalize: from a convolution's statistics of op's shape, the batch mean and
     * biased variance (float, c each) and scale_bias; a training forward of op as bn_bind_running
     * says (the running statistics bound to op updated in the same call). bn_apply:
     * y = relu?(x * scale + bias + z') where z' = z (may be NULL), or, with z_scale_bias, z' =
     * z * z_scale + z_bias: a residual that is another batch norm's output, applied here from that
     * batch norm's input (the dual apply: its own output never stored). bn_bwd_fused: the backward of y = relu?(bn(x)
     * [+ z]) from the batch's mean and var: dx, dgamma, dbeta, and dz (NULL: none wanted) the
     * gradient through the ReLU; its mask is y > 0, or, with y NULL (the output was never stored),
     * x * scale + bias > 0 computed as the convolution's prologue computes it. */
    int (*conv_fuse_plan)(dlt_backend *be, dlt_op *op, int prologue);
    int (*conv_fwd_stats)(dlt_backend *be, dlt_op *op, const float *x, const float *scale_bias, float *y, float *stats);
    int (*conv_bwd_weights_pro)(dlt_backend *be, dlt_op *op, const float *x, const float *scale_bias, const float *dy,
                                float *dw_krsc);
    int (*bn_finalize)(dlt_backend *be, dlt_op *op, const float *stats, const float *gamma, const float *beta,
                       float *mean, float *var, float *scale_bias);
    int (*bn_apply)(dlt_backend *be, dlt_op *op, const float *x, const float *scale_bias, const float *z,
                    const float *z_scale_bias, int relu, float *y);
    int (*bn_bwd_fused)(dlt_backend *be, dlt_op *op, const float *x, const float *y, const float *scale_bias, int relu,
                        const float *dy, const float *gamma, const float *mean, const float *var, float *dx, float *dz,
                        float *dgamma, float *dbeta);

    /* Max pooling (training keeps what backward needs inside op). */
    int (*maxpool_plan)(dlt_backend *be, const dlt_act_shape *in, int k, int stride, int pad, dlt_op **op);
    int (*maxpool_fwd)(dlt_backend *be, dlt_op *op, const float *x, float *y);
    int (*maxpool_bwd)(dlt_backend *be, dlt_op *op, const float *dy, float *dx);

    /* Elementwise, n values: y = relu(y + add) (add may be NULL); dz = dy * (y > 0). */
    int (*add_relu)(dlt_backend *be, float *y, const float *add, size_t n);
    int (*relu_bwd)(dlt_backend *be, const float *y, const float *dy, float *dz, size_t n);
    /* dst += src */
    int (*accumulate)(dlt_backend *be, float *dst, const float *src, size_t n);

    /* Global average pooling NHWC [n,h,w,c] -> [n,c] and its backward. */
    int (*avgpool_fwd)(dlt_backend *be, const dlt_act_shape *s, const float *x, float *y);
    int (*avgpool_bwd)(dlt_backend *be, const dlt_act_shape *s, const float *dy, float *dx);

    /* Fully connected layer over activations x[n,c] -> y[n,k] with float weights w[k,c] and bias b[k];
     * backward writes dx (activations), dw and db (float, overwritten). */
    int (*fc_fwd)(dlt_backend *be, const float *x, const float *w, const float *b, float *y, int n, int c, int k);
    int (*fc_bwd)(dlt_backend *be, const float *x, const float *w, const float *dy, float *dx, float *dw, float *db,
                  int n, int c, int k);

    /* Input, off the step's critical path. host_alloc gives host memory the backend copies from
     * fastest (pinned on a GPU; the batch ring of the data loader lives there, so a batch is
     * decoded once and never copied on the host). input_stage queues the copy of one batch of
     * uint8 NHWC pixels (pixels * 3 bytes at src) to the backend, on a copy stream that overlaps
     * the step before; at most DLT_INPUT_STAGED batches are staged at a time, consumed in order by
     * normalize_input, which turns the oldest into normalized NHWC activations at dst
     * (per-channel mean/std over 0..255). src must stay unchanged until a results_read or sync
     * has returned after the normalize_input that consumed it. */
    void *(*host_alloc)(dlt_backend *be, size_t bytes);
    void (*host_free)(dlt_backend *be, void *p);
    int (*input_stage)(dlt_backend *be, const uint8_t *src, size_t pixels);
    int (*normalize_input)(dlt_backend *be, float *dst, size_t pixels, const float mean[3], const float inv_std[3]);

    /* Softmax cross-entropy with label smoothing over [n, k] logits: adds the summed loss, the
     * top-1/top-5 hits, the labels outside 0..k-1 and the rows whose logits are not all finite
     * (never a hit: a NaN compares false with everything) to results (DLT_RES_LOSS ..) without waiting,
     * and writes loss_scale * d(mean loss)/d(logits) into dlogits (may be NULL). labels are host
     * memory, read before the call returns. */
    int (*softmax_xent)(dlt_backend *be, const float *logits, const int32_t *labels, int n, int k, float smoothing,
                        float loss_scale, float *dlogits);

    /* *sum = sum_i x[i] * ((i % 7) + 1) over n floats, in double, the same bits for the same data
     * on every rank (the cross-rank replica check: no copy of the weights to the host). */
    int (*checksum)(dlt_backend *be, const float *x, size_t n, double *sum);

    /* Adds to results[DLT_RES_NONFINITE] a nonzero count when any of n floats is not finite
     * (without waiting). */
    int (*count_nonfinite)(dlt_backend *be, const float *x, size_t n);

    /* The step's results (be->results, DLT_RES_COUNT doubles of backend memory): reset zeroes
     * them, put sets one from the host, read copies them to the host and waits for everything
     * queued before: the one blocking call of a training step. */
    int (*results_reset)(dlt_backend *be);
    int (*results_put)(dlt_backend *be, int slot, double value);
    int (*results_read)(dlt_backend *be, double *host);

    /* The flat optimizer. sgd_plan names the parameter buffer (n floats of backend memory) once,
     * with its segments; sgd_step then updates all of it in one pass, SGD with momentum in
     * PyTorch's form: v = mu v + g * grad_scale + wd_i w; w -= lr v, where wd_i is wd, or
     * wd_no_decay inside a no_decay segment. It changes nothing when results say the step is
     * void (dlt_results_skip: a non-finite loss or gradient, a rank without its batch), and
     * brings every copy derived from the weights (conv_bind_weights) up to date in the same
     * pass. params_loaded does the latter after the buffer was written from the host. */
    int (*sgd_plan)(dlt_backend *be, float *params, size_t n, const dlt_param_segment *segs, int nsegs);
    int (*sgd_step)(dlt_backend *be, float *w, float *v, const float *g, float lr, float mu, float wd,
                    float wd_no_decay, float grad_scale);
    int (*params_loaded)(dlt_backend *be);

} dlt_backend_ops;

/* What changes from one training step to the next besides the data already in backend memory:
 * a replay of a recorded step takes these instead of the values the recording was made with. */
typedef struct {
    const int32_t *labels; /* host memory, n of them (softmax_xent's) */
    int n;
    float lr;                  /* sgd_step's */
    double stop, input_failed; /* results_put's of DLT_RES_STOP and DLT_RES_INPUT_FAILED */
} dlt_step_inputs;

/* CUDA graphs, where the backend has them: between capture_begin and capture_end the ops are
 * recorded, not run: a whole training step, from results_reset through forward, loss, backward,
 * the bucket reductions, the overflow count, the puts, the agreement and sgd_step. replay runs the
 * recording once with the step's inputs (the labels, sgd_step's lr and the two puts read at
 * replay); its results arrive in be->results like a plain step's. Everything else the recording
 * was made with (the loss scale, the gradient scale) is fixed: a change records again. */
typedef struct {
    int (*capture_begin)(dlt_backend *be);
    int (*capture_end)(dlt_backend *be);
    int (*replay)(dlt_backend *be, const dlt_step_inputs *in);
    /* Drops the recording, if any: a capture in progress is ended and thrown away (never made
     * executable: a failed step's partial recording must not run), the graph and its executable
     * destroyed. A run that fails calls it before it aborts the communicator: NCCL work recorded
     * in a graph holds a reference on the communicator, and ncclCommAbort waits until every graph
     * holding one is destroyed (NCCL src/enqueue.cc persistentDestructor, src/init.cc
     * commDestroySync polling localPersistentRefs), so an abort with the graph alive never
     * returns. A launch still in flight lets go when it completes, which the abort's flag (set
     * before its reclaim, src/init.cc ncclCommAbort) makes it do. */
    void (*release)(dlt_backend *be);
    /* release for another thread than the one that records and replays (the stall watchdog,
     * before it aborts the communicator): the executable and the graph are destroyed (a launch in
     * flight is freed when it completes, which the abort's flag makes NCCL's kernels do), every
     * later replay is refused; a capture in progress is left (it runs nothing on the device, and
     * only its own thread may end it). Without it a stalled rank's abort would wait for a graph
     * nobody destroys, and its peers for their own stall timeout. */
    void (*release_async)(dlt_backend *be);
} dlt_graph_ops;

/* A timeline of the backend's own, for timing its queued work op by op (trainer/backend/op_profile.c):
 * mark records point `slot` (0 .. slots-1) behind everything queued before it; elapsed_ms, called
 * with b > a, waits until mark b has passed and gives the milliseconds from a to b. NULL on a
 * backend whose ops have finished when they return (the CPU): the host clock serves there. */
typedef struct {
    int slots;
    int (*mark)(dlt_backend *be, int slot);
    int (*elapsed_ms)(dlt_backend *be, int a, int b, float *ms);
} dlt_timer_ops;

struct dlt_backend {
    const dlt_backend_ops *ops;
    const dlt_graph_ops *graphs; /* NULL: no CUDA graphs */
    const dlt_timer_ops *timer;  /* NULL: the host clock times the ops */
    dlt_precision precision;
    size_t act_size; /* bytes per activation element */
    int host_memory; /* backend memory is host memory: no copies between the two */
    int threads;
    void *stream;    /* CUDA: the cudaStream_t every op is queued on; NULL on the CPU */
    double *results; /* DLT_RES_COUNT doubles of backend memory (results_reset/put/read) */
    /* Asked between the polls of every wait for the device: a lost peer ends the wait with err.
     * The communicator's (dlt_comm.peers), which dlt_run_open lends; NULL: none. */
    const dlt_peer_check *peers;
    /* The error sink: the buffer given to dlt_backend_create, which receives every op's error
     * for the backend's life (one error channel from the ops up to the command). */
    dlt_err *err;
};

/* Output size of a convolution/pooling window. */
static inline int dlt_out_size(int in, int k, int stride, int pad)
{
    return (in + 2 * pad - k) / stride + 1;
}

typedef struct {
    const char *kind; /* "auto" (CUDA when built in and a GPU is visible, else CPU), "cpu", "cuda" */
    dlt_precision precision;
    int device;             /* CUDA: GPU index among the visible ones; -1: chosen at launch
                             * (device_choice.h: the plugin's GPU, else the local rank's) */
    int deterministic;      /* CUDA: only algorithms that give the same bits every run */
    int stem_pad;           /* CUDA: pad the 3-channel input to 4 for tensor cores (-1 auto: all but fp32) */
    int progress;           /* CUDA: a line now and then while the cuDNN algorithm search takes long */
    const char *algo_cache; /* CUDA: --cudnn-cache FILE, the algorithm choices kept across runs (NULL: none) */
    int wgrad_fp32;         /* CUDA fp16/bf16: filter gradients written in fp32 by cuDNN's graph API instead of
                             * in the run's type and cast (-1 auto: where timed faster at planning; 1: wherever
                             * cuDNN has an engine; 0: never; 2, for checks: wherever auto has a candidate,
                             * untimed) */
    int fuse_bn;            /* CUDA fp16/bf16: the convolution + batch-norm chain through cuDNN's graph API
                             * (conv_fuse_plan and the five ops after it); 0: each op on its own */
} dlt_backend_config;

void dlt_backend_config_defaults(dlt_backend_config *c);
/* err receives this call's error and, for the backend's life, every op's (it must outlive the
 * backend). */
int dlt_backend_create(dlt_backend **out, const dlt_backend_config *cfg, dlt_err *err);
/* GPUs the CUDA runtime sees (0 without the CUDA backend or a driver). */
int dlt_backend_gpu_count(void);
/* The PCI bus id of visible GPU `device` (0), or "device N" (-1) when the runtime cannot say. */
int dlt_backend_gpu_id(int device, char *out, size_t outlen);
/* 1 when dlt_backend_create would make a GPU backend of cfg. */
int dlt_backend_is_gpu(const dlt_backend_config *cfg);
/* 1 when this build has the CUDA backend and the CUDA runtime sees a GPU. */
int dlt_backend_cuda_available(void);

/* The 16-bit type of be's tensors (DLT_PREC_FP16 or DLT_PREC_BF16), or DLT_PREC_FP32 when they are
 * 32-bit: the type a reduction in the run's low precision (--allreduce-lowp) uses. */
dlt_precision dlt_backend_lowp(const dlt_backend *be);

int dlt_backend_cpu_create(dlt_backend **out, dlt_precision prec, dlt_err *err);
/* Row-major C[m,n] = alpha * op(A) op(B) + beta * C on host floats (the CPU backend's FC layer). */
int dlt_backend_cpu_gemm(dlt_backend *be, int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                         int lda, const float *b, int ldb, float beta, float *c, int ldc);
/* 1 when this CPU has native bf16 (oneDNN's avx512_core_bf16 or newer). */
int dlt_backend_cpu_has_bf16(void);

#endif
