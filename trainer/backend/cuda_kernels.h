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
/* float <-> dt, n elements. */
int dlt_k_cast_from_f32(const float *src, void *dst, dlt_dt dt, size_t n, dlt_stream s);
int dlt_k_cast_to_f32(const void *src, dlt_dt dt, float *dst, size_t n, dlt_stream s);
/* Conv weights: float OIHW -> dt OHWI (cuDNN's NHWC filter layout) with cp >= c input channels
 * (the extra ones zero), and dt OHWI (cp channels) -> float OIHW (c channels). */
int dlt_k_oihw_to_ohwi(const float *w, void *dst, dlt_dt dt, int k, int c, int cp, int r, int sz, dlt_stream s);
int dlt_k_ohwi_to_oihw(const void *w, dlt_dt dt, float *dst, int k, int c, int cp, int r, int sz, dlt_stream s);
/* NHWC activations [pixels, c] -> [pixels, cp], the extra channels zero (the padded stem input). */
int dlt_k_pad_channels(const void *x, void *xp, dlt_dt dt, size_t pixels, int c, int cp, dlt_stream s);
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
/* Softmax cross-entropy with label smoothing, one block per row. Adds the summed loss to
 * *loss_acc and the top-1/top-5 hits to hits[0], hits[1] (zero them first); dlogits (may be
 * NULL) = loss_scale * (p - t) / n. A label outside 0..k-1 sets hits[2]. */
int dlt_k_softmax_xent(const void *logits, dlt_dt dt, const int32_t *labels, int n, int k, float smoothing,
                       float loss_scale, void *dlogits, double *loss_acc, int *hits, dlt_stream s);
/* SGD with momentum over float buffers (PyTorch form). */
int dlt_k_sgd(float *w, float *v, const float *g, size_t n, float lr, float mu, float wd, float grad_scale,
              dlt_stream s);
/* *flag = 1 when any of the n floats is not finite (zero it first). */
int dlt_k_all_finite(const float *x, size_t n, int *flag, dlt_stream s);
/* From cuDNN's saved inverse standard deviation: var = 1/inv^2 - eps; mean copied. */
int dlt_k_bn_saved_to_var(const float *save_mean, const float *save_inv, float *mean, float *var, int c, float eps,
                          dlt_stream s);
int dlt_k_bn_stats_update(float *rm, float *rv, const float *bm, const float *bv, int c, float momentum,
                          float unbias, dlt_stream s);

#ifdef __cplusplus
}
#endif

#endif
