/* backend: the ops table every compute backend implements (CPU: oneDNN, CUDA: cuDNN/cuBLAS).
 * Activations are NHWC, conv weights OIHW as torchvision stores them; a backend only does
 * arithmetic: the graph, the loop and the optimizer logic live once, above this table. */
#ifndef DLT_BACKEND_H
#define DLT_BACKEND_H

#include <stddef.h>
#include <stdint.h>

typedef enum { DLT_PREC_FP32 = 0, DLT_PREC_BF16 = 1 } dlt_precision;

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

    /* Row-major C[m,n] = alpha * op(A) op(B) + beta * C. */
    int (*gemm)(dlt_backend *be, int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                const float *b, int ldb, float beta, float *c, int ldc);

    /* uint8 NHWC images -> normalized float NHWC (per-channel mean/std over 0..255). */
    int (*normalize_input)(dlt_backend *be, const uint8_t *src, float *dst, size_t pixels, const float mean[3],
                           const float inv_std[3]);

    /* Softmax cross-entropy with label smoothing over [n, k] logits: returns the summed loss in
     * *loss_sum and writes d(mean loss)/d(logits) into dlogits; top-1/top-5 hit counts. */
    int (*softmax_xent)(dlt_backend *be, const float *logits, const int32_t *labels, int n, int k, float smoothing,
                        float *dlogits, double *loss_sum, int *top1, int *top5);

    /* SGD with momentum (PyTorch form): v = mu v + g + wd w; w -= lr v, over n values. */
    int (*sgd_update)(dlt_backend *be, float *w, float *v, const float *g, size_t n, float lr, float mu, float wd,
                      float grad_scale);
} dlt_backend_ops;

struct dlt_backend {
    const dlt_backend_ops *ops;
    dlt_precision precision;
    int threads;
    char err[512];
};

/* Output size of a convolution/pooling window. */
static inline int dlt_out_size(int in, int k, int stride, int pad)
{
    return (in + 2 * pad - k) / stride + 1;
}

int dlt_backend_cpu_create(dlt_backend **out, dlt_precision prec, char *err, size_t errlen);
/* 1 when this CPU has native bf16 (oneDNN's avx512_core_bf16 or newer). */
int dlt_backend_cpu_has_bf16(void);

#endif
