/* backend: the ops table every compute backend implements (CPU: oneDNN, CUDA: cuDNN/cuBLAS).
 * Activations are NHWC, conv weights OIHW as torchvision stores them; a backend only does
 * arithmetic: the graph, the loop and the optimizer logic live once, above this table.
 *
 * Memory: every pointer handed to an op is backend memory (host memory for the CPU backend,
 * device memory for CUDA), obtained from alloc. Parameter-side buffers (weights, gradients,
 * momentum, BN statistics, logits' gradient scale) are float. Activation buffers hold the
 * backend's activation type, act_size bytes per element (float on the CPU; half or bfloat16
 * under mixed precision on a GPU): callers size them with act_size and treat them as opaque;
 * they are typed float * below for the CPU's sake. */
#ifndef DLT_BACKEND_H
#define DLT_BACKEND_H

#include <stddef.h>
#include <stdint.h>

/* fp32; bf16 / fp16 mixed precision (float master weights); tf32: fp32 tensors, TF32 tensor-core
 * math (Ampere and newer GPUs). */
typedef enum { DLT_PREC_FP32 = 0, DLT_PREC_BF16 = 1, DLT_PREC_FP16 = 2, DLT_PREC_TF32 = 3 } dlt_precision;

const char *dlt_precision_name(dlt_precision p);
/* Parses "fp32", "tf32", "fp16", "bf16"; -1 when unknown. */
int dlt_precision_parse(const char *s);

typedef struct {
    int n, c, h, w;        /* input, NHWC */
    int k, r, s;           /* output channels, kernel height/width */
    int stride, pad;
    int oh, ow;            /* output size (filled by dlt_conv_shape_finish) */
} dlt_conv_shape;

typedef struct {
    int n, c, h, w;
} dlt_act_shape;

typedef struct dlt_backend dlt_backend;
typedef struct dlt_op dlt_op; /* a backend's plan for one layer: primitives created once per shape */

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

    /* Convolution without bias. set_weights is called once per step, after the update, so the
     * backend may keep the weights in its preferred layout. */
    int (*conv_plan)(dlt_backend *be, const dlt_conv_shape *s, dlt_op **op);
    int (*conv_set_weights)(dlt_backend *be, dlt_op *op, const float *w_oihw);
    int (*conv_fwd)(dlt_backend *be, dlt_op *op, const float *x, float *y);
    int (*conv_bwd_data)(dlt_backend *be, dlt_op *op, const float *dy, float *dx);
    int (*conv_bwd_weights)(dlt_backend *be, dlt_op *op, const float *x, const float *dy, float *dw_oihw);

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
    int (*bn_stats_update)(dlt_backend *be, float *run_mean, float *run_var, const float *mean, const float *var,
                           int c, float momentum, float unbias);

    /* Optional (NULL: the network runs bn_fwd_train + add_relu and relu_bwd + bn_bwd): training
     * forward y = relu(bn(x) + z) (z may be NULL) in one pass, and its backward from y, which
     * also writes dz, the gradient of z (NULL when there is no z); dy is left as it is. */
    int (*bn_fwd_train_relu)(dlt_backend *be, dlt_op *op, const float *x, const float *z, const float *gamma,
                             const float *beta, float *y, float *mean, float *var);
    int (*bn_bwd_relu)(dlt_backend *be, dlt_op *op, const float *x, const float *y, const float *dy,
                       const float *gamma, const float *beta, float *dx, float *dz, float *dgamma, float *dbeta);

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

    /* uint8 NHWC images -> normalized float NHWC (per-channel mean/std over 0..255). */
    int (*normalize_input)(dlt_backend *be, const uint8_t *src, float *dst, size_t pixels, const float mean[3],
                           const float inv_std[3]);

    /* Softmax cross-entropy with label smoothing over [n, k] logits: returns the summed loss in
     * *loss_sum and writes loss_scale * d(mean loss)/d(logits) into dlogits (may be NULL); top-1/top-5
     * hit counts. labels are host memory. */
    int (*softmax_xent)(dlt_backend *be, const float *logits, const int32_t *labels, int n, int k, float smoothing,
                        float loss_scale, float *dlogits, double *loss_sum, int *top1, int *top5);

    /* *sum = sum_i x[i] * ((i % 7) + 1) over n floats, in double, the same bits for the same data
     * on every rank (the cross-rank replica check: no copy of the weights to the host). */
    int (*checksum)(dlt_backend *be, const float *x, size_t n, double *sum);

    /* *finite = 1 when all n floats are finite. */
    int (*all_finite)(dlt_backend *be, const float *x, size_t n, int *finite);

    /* SGD with momentum (PyTorch form): v = mu v + g + wd w; w -= lr v, over n values. */
    int (*sgd_update)(dlt_backend *be, float *w, float *v, const float *g, size_t n, float lr, float mu, float wd,
                      float grad_scale);

} dlt_backend_ops;

/* CUDA graphs, where the backend has them: between capture_begin and capture_end the ops are
 * recorded, not run; softmax_xent then reports nothing (loss_results does, after a replay).
 * replay stages the step's labels (host memory) and runs the recorded work once; loss_results
 * waits for it and returns what softmax_xent would have. */
typedef struct {
    int (*capture_begin)(dlt_backend *be);
    int (*capture_end)(dlt_backend *be);
    int (*replay)(dlt_backend *be, const int32_t *labels, int n);
    int (*loss_results)(dlt_backend *be, double *loss_sum, int *top1, int *top5);
} dlt_graph_ops;

/* While the backend waits for its device it asks this, between polls, whether a peer failed
 * (the comm layer installs NCCL's asynchronous error check); nonzero ends the wait with err. */
typedef int (*dlt_peer_check)(void *arg, char *err, size_t errlen);

struct dlt_backend {
    const dlt_backend_ops *ops;
    const dlt_graph_ops *graphs; /* NULL: no CUDA graphs */
    dlt_precision precision;
    size_t act_size;  /* bytes per activation element */
    int host_memory;  /* backend memory is host memory: no copies between the two */
    int threads;
    void *stream;     /* CUDA: the cudaStream_t every op is queued on; NULL on the CPU */
    dlt_peer_check peer_check;
    void *peer_check_arg;
    /* The error sink: the buffer given to dlt_backend_create, which receives every op's error
     * for the backend's life (one error channel from the ops up to the command). */
    char *err;
    size_t errlen;
};

/* Output size of a convolution/pooling window. */
static inline int dlt_out_size(int in, int k, int stride, int pad)
{
    return (in + 2 * pad - k) / stride + 1;
}

typedef struct {
    const char *kind;        /* "auto" (CUDA when built in and a GPU is visible, else CPU), "cpu", "cuda" */
    dlt_precision precision;
    int device;              /* CUDA: GPU index among the visible ones; -1: chosen at launch
                              * (device_choice.h: the plugin's GPU, else the local rank's) */
    int deterministic;       /* CUDA: only algorithms that give the same bits every run */
    int stem_pad;            /* CUDA: pad the 3-channel input to 4 for tensor cores (-1 auto: all but fp32) */
} dlt_backend_config;

void dlt_backend_config_defaults(dlt_backend_config *c);
/* err receives this call's error and, for the backend's life, every op's (it must outlive the
 * backend). */
int dlt_backend_create(dlt_backend **out, const dlt_backend_config *cfg, char *err, size_t errlen);
/* GPUs the CUDA runtime sees (0 without the CUDA backend or a driver). */
int dlt_backend_gpu_count(void);
/* The PCI bus id of visible GPU `device` (0), or "device N" (-1) when the runtime cannot say. */
int dlt_backend_gpu_id(int device, char *out, size_t outlen);
/* 1 when dlt_backend_create would make a GPU backend of cfg. */
int dlt_backend_is_gpu(const dlt_backend_config *cfg);
/* 1 when this build has the CUDA backend and the CUDA runtime sees a GPU. */
int dlt_backend_cuda_available(void);

int dlt_backend_cpu_create(dlt_backend **out, dlt_precision prec, char *err, size_t errlen);
/* Row-major C[m,n] = alpha * op(A) op(B) + beta * C on host floats (the CPU backend's FC layer). */
int dlt_backend_cpu_gemm(dlt_backend *be, int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                         int lda, const float *b, int ldb, float beta, float *c, int ldc);
/* 1 when this CPU has native bf16 (oneDNN's avx512_core_bf16 or newer). */
int dlt_backend_cpu_has_bf16(void);

#endif
