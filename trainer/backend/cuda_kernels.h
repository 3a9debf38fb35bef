/* SPDX-License-Identifier: Apache-2.0 */
/* cuda_kernels: the few device kernels cuDNN and cuBLAS have no primitive for, behind a C
 * interface. Every launcher queues on the given stream and returns the launch status
 * (cudaError_t as int, 0 = success). Activation arguments are of type `dt`. */
#ifndef DLT_CUDA_KERNELS_H
#define DLT_CUDA_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { DLT_DT_F32 = 0, DLT_DT_F16 = 1, DLT_DT_BF16 = 2 } dlt_dt;

typedef struct CUstream_st *dlt_stream;

/* uint8 NHWC pixels -> (v - mean[c]) * inv_std[c] as dt. */
int dlt_k_normalize(const uint8_t *src, void *dst, dlt_dt dt, size_t pixels, const float mean[3],
                    const float inv_std[3], dlt_stream s);
/* float <-> dt, n elements (16-byte vectors when the pointers allow). */
int dlt_k_cast_from_f32(const float *src, void *dst, dlt_dt dt, size_t n, dlt_stream s);
int dlt_k_cast_to_f32(const void *src, dlt_dt dt, float *dst, size_t n, dlt_stream s);
/* dst = dt(src * mul), the product taken in float and rounded once (the low-precision gradient
 * reduction's pre-division by the world size). */
int dlt_k_cast_scaled_from_f32(const float *src, void *dst, dlt_dt dt, size_t n, float mul, dlt_stream s);
/* NHWC activations [pixels, c] -> [pixels, cp], the extra channels zero (the padded stem input). */
int dlt_k_pad_channels(const void *x, void *xp, dlt_dt dt, size_t pixels, int c, int cp, dlt_stream s);
/* dt [pixels, cp] -> float [pixels, c], c <= cp: the padded stem's filter gradient (KRS4) into
 * the parameter layout (KRS3). */
int dlt_k_unpad_to_f32(const void *src, dlt_dt dt, float *dst, size_t pixels, int cp, int c, dlt_stream s);
/* *out = sum_i x[i] * ((i % 7) + 1) in double, the same bits for the same data (replica checks);
 * scratch: dlt_k_checksum_scratch() bytes of device memory. */
size_t dlt_k_checksum_scratch(void);
int dlt_k_checksum(const float *x, size_t n, double *scratch, double *out, dlt_stream s);
/* y = relu(y + add) (add may be NULL); dz = dy * (y > 0); dst += src. */
int dlt_k_add_relu(void *y, const void *add, dlt_dt dt, size_t n, dlt_stream s);
int dlt_k_relu_bwd(const void *y, const void *dy, void *dz, dlt_dt dt, size_t n, dlt_stream s);
int dlt_k_accumulate(void *dst, const void *src, dlt_dt dt, size_t n, dlt_stream s);
/* Global average pooling [n, hw, c] -> [n, c] and back (dx = dy / hw broadcast). */
int dlt_k_avgpool_fwd(const void *x, void *y, dlt_dt dt, int n, int hw, int c, dlt_stream s);
int dlt_k_avgpool_bwd(const void *dy, void *dx, dlt_dt dt, int n, int hw, int c, dlt_stream s);
/* FC helpers: y[i, j] = b[j] (float b) ; db[j] = sum_i dy[i, j] (float out). */
int dlt_k_bias_rows(void *y, const float *b, dlt_dt dt, int n, int k, dlt_stream s);
int dlt_k_colsum(const void *dy, dlt_dt dt, float *db, int n, int k, dlt_stream s);
/* Softmax cross-entropy with label smoothing, one block per row. Adds the summed loss to *loss,
 * the top-1/top-5 hits to *top1, *top5, the labels outside 0..k-1 to *bad (whose dlogits rows
 * are zero) and the rows with a logit not finite to *nonfinite (never a hit); dlogits (may be
 * NULL) = loss_scale * (p - t) / n. */
int dlt_k_softmax_xent(const void *logits, dlt_dt dt, const int32_t *labels, int n, int k, float smoothing,
                       float loss_scale, void *dlogits, double *loss, double *top1, double *top5, double *bad,
                       double *nonfinite, dlt_stream s);
/* Adds to *count the number of the n floats that are not finite (nothing when all are). */
int dlt_k_count_nonfinite(const float *x, size_t n, double *count, dlt_stream s);

/* The flat optimizer. A chunk is a run of at most DLT_SGD_CHUNK elements inside one segment of
 * the parameter buffer; one block updates one chunk (the multi-tensor-apply scheme of PyTorch's
 * aten/src/ATen/native/cuda/MultiTensorApply.cuh and Apex's multi_tensor_sgd, over one flat
 * buffer instead of a tensor list). */
#define DLT_SGD_CHUNK 65536
typedef struct {
    uint64_t off;
    uint32_t len;
    uint32_t no_decay;
} dlt_sgd_chunk;

typedef struct {
    float *w, *v;
    const float *g;
    const dlt_sgd_chunk *chunks; /* device memory */
    int nchunks;
    float lr, mu, wd, wd_no_decay, grad_scale;
    const float *lr_dev; /* when not NULL, the learning rate is read here (a graph replay's) */
    /* The step's results (device doubles) and the slots of the skip rule (dlt_results_skip):
     * nothing is written when results[nonfinite], [input_failed] or [bad_labels] is nonzero or
     * results[loss] is not finite. */
    const double *results;
    int slot_loss, slot_bad_labels, slot_nonfinite, slot_input_failed;
    /* Copies of the new weights in dt (both may be NULL): twin[i] for every i outside
     * [stem_lo, stem_hi), stem[(j / 3) * 4 + j % 3] with j = i - stem_lo inside it (the 3-channel
     * stem's weights in its 4-channel buffer, whose fourth channel is never written). */
    void *twin, *stem;
    size_t stem_lo, stem_hi;
    dlt_dt dt;
} dlt_sgd_args;

/* One launch over every chunk: v = mu v + g * grad_scale + wd_i w; w -= lr v, and the copies. */
int dlt_k_sgd_flat(const dlt_sgd_args *a, dlt_stream s);
/* The copies of args' twin/stem from w[0..n) as they are (after an upload), one launch. */
int dlt_k_params_to_lp(const float *w, size_t n, void *twin, void *stem, size_t stem_lo, size_t stem_hi, dlt_dt dt,
                       dlt_stream s);

/* From cuDNN's saved inverse standard deviation: var = 1/inv^2 - eps; mean copied. */
int dlt_k_bn_saved_to_var(const float *save_mean, const float *save_inv, float *mean, float *var, int c, float eps,
                          dlt_stream s);
int dlt_k_bn_stats_update(float *rm, float *rv, const float *bm, const float *bv, int c, float momentum, float unbias,
                          dlt_stream s);

/* The convolution + batch-norm chain (backend.h's bn_finalize, bn_apply, bn_bwd_fused), over NHWC
 * tensors of `pixels` rows of c channels; sb: 2c values of dt, the scale then the bias.
 * finalize: from a convolution's float statistics (c sums, then c sums of squares, over count
 * values each), the batch mean and biased variance, sb, and the running statistics rm/rv (NULL:
 * none) as bn_stats_update keeps them. */
int dlt_k_bn_finalize(const float *stats, const float *gamma, const float *beta, int c, double count, float eps,
                      float *mean, float *var, void *sb, dlt_dt dt, float *rm, float *rv, float momentum, float unbias,
                      dlt_stream s);
/* y = relu?(x * scale + bias + z'), z' = z (may be NULL), or z * zscale + zbias with zsb (2c values
 * of dt: the dual apply of a residual that is another batch norm's output). */
int dlt_k_bn_apply(const void *x, const void *sb, const void *z, const void *zsb, int relu, void *y, dlt_dt dt,
                   size_t pixels, int c, dlt_stream s);
/* The backward of y = relu?(bn(x) [+ z]) from the batch's mean and biased var: dx, dgamma, dbeta,
 * and dz (NULL: not written) the gradient through the ReLU, whose mask is y > 0 or, with y NULL,
 * x * scale + bias > 0 rounded as cuDNN's prologue rounds it (a product, then a sum, each in
 * float). Three launches: per-block partial sums, their total in a fixed order (the same bits
 * every run), the data gradient. scratch: dlt_k_bn_bwd_scratch(c) bytes of device memory. */
size_t dlt_k_bn_bwd_scratch(int c);
int dlt_k_bn_bwd(const void *x, const void *y, const void *sb, int relu, const void *dy, void *dz, const float *mean,
                 const float *var, const float *gamma, float eps, void *dx, float *dgamma, float *dbeta, dlt_dt dt,
                 size_t pixels, int c, float *scratch, dlt_stream s);

#ifdef __cplusplus
}
#endif

#endif
