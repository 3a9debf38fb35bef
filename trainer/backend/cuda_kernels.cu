/* cuda_kernels: elementwise, pooling, loss and optimizer kernels of the CUDA backend. Arithmetic
 * in float whatever the storage type; grid-stride loops so any size launches. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>

#include "trainer/backend/cuda_kernels.h"

namespace {

__device__ __forceinline__ float ld(const float *p, size_t i) { return p[i]; }
__device__ __forceinline__ float ld(const __half *p, size_t i) { return __half2float(p[i]); }
__device__ __forceinline__ float ld(const __nv_bfloat16 *p, size_t i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ void st(float *p, size_t i, float v) { p[i] = v; }
__device__ __forceinline__ void st(__half *p, size_t i, float v) { p[i] = __float2half_rn(v); }
__device__ __forceinline__ void st(__nv_bfloat16 *p, size_t i, float v) { p[i] = __float2bfloat16_rn(v); }

constexpr int kThreads = 256;

inline unsigned blocks_for(size_t n)
{
    size_t b = (n + kThreads - 1) / kThreads;
    if (b < 1)
        b = 1;
    return (unsigned)(b > (1u << 20) ? (1u << 20) : b);
}

#define GRID_STRIDE(i, n) for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

/* Runs F<T> with T the storage type of dt. */
/* The launch's own status: the thread's last error is cleared first, because a cudaStreamQuery or
 * cudaEventQuery that answered cudaErrorNotReady (ours, or NCCL's on this thread) leaves that
 * there, and cudaGetLastError after the launch would report it as a launch failure (PyTorch's
 * CUDAStream::query clears it likewise). A sticky error is reported again by the launch itself. */
#define DISPATCH(dt, F, ...)                                                                                  \
    do {                                                                                                      \
        (void)cudaGetLastError();                                                                             \
        switch (dt) {                                                                                         \
        case DLT_DT_F32: F<float>(__VA_ARGS__); break;                                                        \
        case DLT_DT_F16: F<__half>(__VA_ARGS__); break;                                                       \
        case DLT_DT_BF16: F<__nv_bfloat16>(__VA_ARGS__); break;                                               \
        default: return (int)cudaErrorInvalidValue;                                                           \
        }                                                                                                     \
        return (int)cudaGetLastError();                                                                       \
    } while (0)

struct norm_consts {
    float mean[3], inv[3];
};

template <typename T> __global__ void k_normalize(const uint8_t *src, T *dst, size_t n, norm_consts k)
{
    GRID_STRIDE(i, n)
    {
        int c = (int)(i % 3);
        st(dst, i, ((float)src[i] - k.mean[c]) * k.inv[c]);
    }
}

template <typename T> __global__ void k_from_f32(const float *src, T *dst, size_t n)
{
    GRID_STRIDE(i, n) st(dst, i, src[i]);
}

template <typename T> __global__ void k_to_f32(const T *src, float *dst, size_t n)
{
    GRID_STRIDE(i, n) dst[i] = ld(src, i);
}

/* dst[o][h][w][i] = w[o][i][h][w], i < C; channels C..Cp-1 (padding) are zero. */
template <typename T> __global__ void k_oihw_to_ohwi(const float *w, T *dst, int K, int C, int Cp, int R, int S)
{
    size_t n = (size_t)K * Cp * R * S;
    GRID_STRIDE(j, n)
    {
        int i = (int)(j % Cp);
        size_t t = j / Cp;
        int x = (int)(t % S);
        t /= S;
        int y = (int)(t % R);
        int o = (int)(t / R);
        st(dst, j, i < C ? w[(((size_t)o * C + i) * R + y) * S + x] : 0.f);
    }
}

/* The inverse, dropping the padding channels. */
template <typename T> __global__ void k_ohwi_to_oihw(const T *w, float *dst, int K, int C, int Cp, int R, int S)
{
    size_t n = (size_t)K * C * R * S;
    GRID_STRIDE(j, n)
    {
        int x = (int)(j % S);
        size_t t = j / S;
        int y = (int)(t % R);
        t /= R;
        int i = (int)(t % C);
        int o = (int)(t / C);
        dst[j] = ld(w, (((size_t)o * R + y) * S + x) * Cp + i);
    }
}

/* [pixels, C] -> [pixels, Cp], the extra channels zero. */
template <typename T> __global__ void k_pad_channels(const T *x, T *xp, size_t pixels, int C, int Cp)
{
    GRID_STRIDE(j, pixels * (size_t)Cp)
    {
        int i = (int)(j % Cp);
        size_t p = j / Cp;
        xp[j] = i < C ? x[p * C + i] : T(0.f);
    }
}

/* sum_i x[i] * ((i % 7) + 1) in double: fixed grid, a tree in shared memory per block, then one
 * thread over the block sums in order, so the same data gives the same bits on every rank. */
constexpr int kSumBlocks = 256;

__global__ void k_checksum_blocks(const float *x, size_t n, double *partial)
{
    __shared__ double acc[kThreads];
    double v = 0;
    GRID_STRIDE(i, n) v += (double)x[i] * (double)((i % 7) + 1);
    acc[threadIdx.x] = v;
    __syncthreads();
    for (int h = kThreads / 2; h > 0; h /= 2) {
        if ((int)threadIdx.x < h)
            acc[threadIdx.x] += acc[threadIdx.x + h];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        partial[blockIdx.x] = acc[0];
}

__global__ void k_checksum_total(const double *partial, int nb, double *out)
{
    double v = 0;
    for (int b = 0; b < nb; b++)
        v += partial[b];
    *out = v;
}

template <typename T> __global__ void k_add_relu(T *y, const T *add, size_t n)
{
    GRID_STRIDE(i, n)
    {
        float v = ld(y, i) + (add ? ld(add, i) : 0.f);
        st(y, i, v > 0.f ? v : 0.f);
    }
}

template <typename T> __global__ void k_relu_bwd(const T *y, const T *dy, T *dz, size_t n)
{
    GRID_STRIDE(i, n) st(dz, i, ld(y, i) > 0.f ? ld(dy, i) : 0.f);
}

template <typename T> __global__ void k_accumulate(T *dst, const T *src, size_t n)
{
    GRID_STRIDE(i, n) st(dst, i, ld(dst, i) + ld(src, i));
}

template <typename T> __global__ void k_avgpool_fwd(const T *x, T *y, int N, int HW, int C)
{
    size_t n = (size_t)N * C;
    GRID_STRIDE(j, n)
    {
        size_t b = j / C;
        int c = (int)(j % C);
        float s = 0.f;
        for (int p = 0; p < HW; p++)
            s += ld(x, (b * HW + p) * C + c);
        st(y, j, s / (float)HW);
    }
}

template <typename T> __global__ void k_avgpool_bwd(const T *dy, T *dx, int N, int HW, int C)
{
    size_t n = (size_t)N * HW * C;
    GRID_STRIDE(j, n)
    {
        int c = (int)(j % C);
        size_t b = j / ((size_t)HW * C);
        st(dx, j, ld(dy, b * C + c) / (float)HW);
    }
}

template <typename T> __global__ void k_bias_rows(T *y, const float *b, int N, int K)
{
    size_t n = (size_t)N * K;
    GRID_STRIDE(j, n) st(y, j, b[j % K]);
}

template <typename T> __global__ void k_colsum(const T *dy, float *db, int N, int K)
{
    GRID_STRIDE(j, (size_t)K)
    {
        float s = 0.f;
        for (int i = 0; i < N; i++)
            s += ld(dy, (size_t)i * K + j);
        db[j] = s;
    }
}

__device__ float block_sum(float v, float *sh)
{
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int o = blockDim.x / 2; o > 0; o >>= 1) {
        if ((int)threadIdx.x < o)
            sh[threadIdx.x] += sh[threadIdx.x + o];
        __syncthreads();
    }
    float r = sh[0];
    __syncthreads();
    return r;
}

__device__ float block_max(float v, float *sh)
{
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int o = blockDim.x / 2; o > 0; o >>= 1) {
        if ((int)threadIdx.x < o)
            sh[threadIdx.x] = fmaxf(sh[threadIdx.x], sh[threadIdx.x + o]);
        __syncthreads();
    }
    float r = sh[0];
    __syncthreads();
    return r;
}

template <typename T>
__global__ void k_softmax_xent(const T *logits, const int32_t *labels, int N, int K, float smoothing, float scale,
                               T *dlogits, double *loss_acc, int *hits)
{
    __shared__ float sh[kThreads];
    int row = blockIdx.x;
    const size_t base = (size_t)row * K;
    int y = labels[row];
    if (y < 0 || y >= K) {
        if (threadIdx.x == 0)
            atomicExch(&hits[2], 1);
        return;
    }
    float zy = ld(logits, base + y);
    float mx = -INFINITY, above = 0.f;
    for (int j = threadIdx.x; j < K; j += blockDim.x) {
        float z = ld(logits, base + j);
        mx = fmaxf(mx, z);
        above += (z > zy || (z == zy && j < y)) ? 1.f : 0.f;
    }
    mx = block_max(mx, sh);
    float se = 0.f, sz = 0.f;
    for (int j = threadIdx.x; j < K; j += blockDim.x) {
        float z = ld(logits, base + j);
        se += expf(z - mx);
        sz += z;
    }
    se = block_sum(se, sh);
    sz = block_sum(sz, sh);
    above = block_sum(above, sh);
    float logsum = mx + logf(se);
    if (threadIdx.x == 0) {
        double mean_logp = (double)sz / K - (double)logsum;
        double loss = -(1.0 - smoothing) * ((double)zy - logsum) - smoothing * mean_logp;
        atomicAdd(loss_acc, loss);
        if (above < 1.f)
            atomicAdd(&hits[0], 1);
        if (above < 5.f)
            atomicAdd(&hits[1], 1);
    }
    if (dlogits) {
        float off = smoothing / K, on = 1.f - smoothing + off, f = scale / N;
        for (int j = threadIdx.x; j < K; j += blockDim.x) {
            float p = expf(ld(logits, base + j) - logsum);
            st(dlogits, base + j, (p - (j == y ? on : off)) * f);
        }
    }
}

__global__ void k_sgd(float *w, float *v, const float *g, size_t n, float lr, float mu, float wd, float gs)
{
    GRID_STRIDE(i, n)
    {
        float d = g[i] * gs + wd * w[i];
        float m = mu * v[i] + d;
        v[i] = m;
        w[i] -= lr * m;
    }
}

__global__ void k_all_finite(const float *x, size_t n, int *flag)
{
    GRID_STRIDE(i, n)
    {
        if (!isfinite(x[i]))
            *flag = 1;
    }
}

__global__ void k_bn_saved_to_var(const float *sm, const float *si, float *m, float *v, int c, float eps)
{
    GRID_STRIDE(i, (size_t)c)
    {
        m[i] = sm[i];
        v[i] = 1.f / (si[i] * si[i]) - eps;
    }
}

__global__ void k_bn_stats_update(float *rm, float *rv, const float *bm, const float *bv, int c, float mom, float unb)
{
    GRID_STRIDE(i, (size_t)c)
    {
        rm[i] = (1.f - mom) * rm[i] + mom * bm[i];
        rv[i] = (1.f - mom) * rv[i] + mom * bv[i] * unb;
    }
}

template <typename T> void l_normalize(const uint8_t *src, void *dst, size_t n, norm_consts k, cudaStream_t s)
{
    k_normalize<T><<<blocks_for(n), kThreads, 0, s>>>(src, (T *)dst, n, k);
}
template <typename T> void l_from_f32(const float *src, void *dst, size_t n, cudaStream_t s)
{
    k_from_f32<T><<<blocks_for(n), kThreads, 0, s>>>(src, (T *)dst, n);
}
template <typename T> void l_to_f32(const void *src, float *dst, size_t n, cudaStream_t s)
{
    k_to_f32<T><<<blocks_for(n), kThreads, 0, s>>>((const T *)src, dst, n);
}
template <typename T>
void l_oihw_to_ohwi(const float *w, void *dst, int K, int C, int Cp, int R, int S, cudaStream_t s)
{
    k_oihw_to_ohwi<T><<<blocks_for((size_t)K * Cp * R * S), kThreads, 0, s>>>(w, (T *)dst, K, C, Cp, R, S);
}
template <typename T>
void l_ohwi_to_oihw(const void *w, float *dst, int K, int C, int Cp, int R, int S, cudaStream_t s)
{
    k_ohwi_to_oihw<T><<<blocks_for((size_t)K * C * R * S), kThreads, 0, s>>>((const T *)w, dst, K, C, Cp, R, S);
}
template <typename T> void l_pad_channels(const void *x, void *xp, size_t pixels, int C, int Cp, cudaStream_t s)
{
    k_pad_channels<T><<<blocks_for(pixels * (size_t)Cp), kThreads, 0, s>>>((const T *)x, (T *)xp, pixels, C, Cp);
}
template <typename T> void l_add_relu(void *y, const void *add, size_t n, cudaStream_t s)
{
    k_add_relu<T><<<blocks_for(n), kThreads, 0, s>>>((T *)y, (const T *)add, n);
}
template <typename T> void l_relu_bwd(const void *y, const void *dy, void *dz, size_t n, cudaStream_t s)
{
    k_relu_bwd<T><<<blocks_for(n), kThreads, 0, s>>>((const T *)y, (const T *)dy, (T *)dz, n);
}
template <typename T> void l_accumulate(void *dst, const void *src, size_t n, cudaStream_t s)
{
    k_accumulate<T><<<blocks_for(n), kThreads, 0, s>>>((T *)dst, (const T *)src, n);
}
template <typename T> void l_avgpool_fwd(const void *x, void *y, int N, int HW, int C, cudaStream_t s)
{
    k_avgpool_fwd<T><<<blocks_for((size_t)N * C), kThreads, 0, s>>>((const T *)x, (T *)y, N, HW, C);
}
template <typename T> void l_avgpool_bwd(const void *dy, void *dx, int N, int HW, int C, cudaStream_t s)
{
    k_avgpool_bwd<T><<<blocks_for((size_t)N * HW * C), kThreads, 0, s>>>((const T *)dy, (T *)dx, N, HW, C);
}
template <typename T> void l_bias_rows(void *y, const float *b, int N, int K, cudaStream_t s)
{
    k_bias_rows<T><<<blocks_for((size_t)N * K), kThreads, 0, s>>>((T *)y, b, N, K);
}
template <typename T> void l_colsum(const void *dy, float *db, int N, int K, cudaStream_t s)
{
    k_colsum<T><<<blocks_for((size_t)K), kThreads, 0, s>>>((const T *)dy, db, N, K);
}
template <typename T>
void l_softmax(const void *z, const int32_t *labels, int N, int K, float sm, float sc, void *dz, double *loss,
               int *hits, cudaStream_t s)
{
    k_softmax_xent<T><<<N, kThreads, 0, s>>>((const T *)z, labels, N, K, sm, sc, (T *)dz, loss, hits);
}

} // namespace

extern "C" {

int dlt_k_normalize(const uint8_t *src, void *dst, dlt_dt dt, size_t pixels, const float mean[3],
                    const float inv_std[3], dlt_stream s)
{
    norm_consts k;
    for (int c = 0; c < 3; c++) {
        k.mean[c] = mean[c];
        k.inv[c] = inv_std[c];
    }
    DISPATCH(dt, l_normalize, src, dst, pixels * 3, k, (cudaStream_t)s);
}

int dlt_k_cast_from_f32(const float *src, void *dst, dlt_dt dt, size_t n, dlt_stream s)
{
    DISPATCH(dt, l_from_f32, src, dst, n, (cudaStream_t)s);
}

int dlt_k_cast_to_f32(const void *src, dlt_dt dt, float *dst, size_t n, dlt_stream s)
{
    DISPATCH(dt, l_to_f32, src, dst, n, (cudaStream_t)s);
}

int dlt_k_oihw_to_ohwi(const float *w, void *dst, dlt_dt dt, int k, int c, int cp, int r, int sz, dlt_stream s)
{
    DISPATCH(dt, l_oihw_to_ohwi, w, dst, k, c, cp, r, sz, (cudaStream_t)s);
}

int dlt_k_ohwi_to_oihw(const void *w, dlt_dt dt, float *dst, int k, int c, int cp, int r, int sz, dlt_stream s)
{
    DISPATCH(dt, l_ohwi_to_oihw, w, dst, k, c, cp, r, sz, (cudaStream_t)s);
}

int dlt_k_pad_channels(const void *x, void *xp, dlt_dt dt, size_t pixels, int c, int cp, dlt_stream s)
{
    DISPATCH(dt, l_pad_channels, x, xp, pixels, c, cp, (cudaStream_t)s);
}

size_t dlt_k_checksum_scratch(void)
{
    return (size_t)kSumBlocks * sizeof(double);
}

int dlt_k_checksum(const float *x, size_t n, double *scratch, double *out, dlt_stream s)
{
    (void)cudaGetLastError();
    k_checksum_blocks<<<kSumBlocks, kThreads, 0, (cudaStream_t)s>>>(x, n, scratch);
    k_checksum_total<<<1, 1, 0, (cudaStream_t)s>>>(scratch, kSumBlocks, out);
    return (int)cudaGetLastError();
}

int dlt_k_add_relu(void *y, const void *add, dlt_dt dt, size_t n, dlt_stream s)
{
    DISPATCH(dt, l_add_relu, y, add, n, (cudaStream_t)s);
}

int dlt_k_relu_bwd(const void *y, const void *dy, void *dz, dlt_dt dt, size_t n, dlt_stream s)
{
    DISPATCH(dt, l_relu_bwd, y, dy, dz, n, (cudaStream_t)s);
}

int dlt_k_accumulate(void *dst, const void *src, dlt_dt dt, size_t n, dlt_stream s)
{
    DISPATCH(dt, l_accumulate, dst, src, n, (cudaStream_t)s);
}

int dlt_k_avgpool_fwd(const void *x, void *y, dlt_dt dt, int n, int hw, int c, dlt_stream s)
{
    DISPATCH(dt, l_avgpool_fwd, x, y, n, hw, c, (cudaStream_t)s);
}

int dlt_k_avgpool_bwd(const void *dy, void *dx, dlt_dt dt, int n, int hw, int c, dlt_stream s)
{
    DISPATCH(dt, l_avgpool_bwd, dy, dx, n, hw, c, (cudaStream_t)s);
}

int dlt_k_bias_rows(void *y, const float *b, dlt_dt dt, int n, int k, dlt_stream s)
{
    DISPATCH(dt, l_bias_rows, y, b, n, k, (cudaStream_t)s);
}

int dlt_k_colsum(const void *dy, dlt_dt dt, float *db, int n, int k, dlt_stream s)
{
    DISPATCH(dt, l_colsum, dy, db, n, k, (cudaStream_t)s);
}

int dlt_k_softmax_xent(const void *logits, dlt_dt dt, const int32_t *labels, int n, int k, float smoothing,
                       float loss_scale, void *dlogits, double *loss_acc, int *hits, dlt_stream s)
{
    DISPATCH(dt, l_softmax, logits, labels, n, k, smoothing, loss_scale, dlogits, loss_acc, hits, (cudaStream_t)s);
}

int dlt_k_sgd(float *w, float *v, const float *g, size_t n, float lr, float mu, float wd, float grad_scale,
              dlt_stream s)
{
    (void)cudaGetLastError();
    k_sgd<<<blocks_for(n), kThreads, 0, (cudaStream_t)s>>>(w, v, g, n, lr, mu, wd, grad_scale);
    return (int)cudaGetLastError();
}

int dlt_k_all_finite(const float *x, size_t n, int *flag, dlt_stream s)
{
    (void)cudaGetLastError();
    k_all_finite<<<blocks_for(n), kThreads, 0, (cudaStream_t)s>>>(x, n, flag);
    return (int)cudaGetLastError();
}

int dlt_k_bn_saved_to_var(const float *save_mean, const float *save_inv, float *mean, float *var, int c, float eps,
                          dlt_stream s)
{
    (void)cudaGetLastError();
    k_bn_saved_to_var<<<blocks_for((size_t)c), kThreads, 0, (cudaStream_t)s>>>(save_mean, save_inv, mean, var, c, eps);
    return (int)cudaGetLastError();
}

int dlt_k_bn_stats_update(float *rm, float *rv, const float *bm, const float *bv, int c, float momentum,
                          float unbias, dlt_stream s)
{
    (void)cudaGetLastError();
    k_bn_stats_update<<<blocks_for((size_t)c), kThreads, 0, (cudaStream_t)s>>>(rm, rv, bm, bv, c, momentum, unbias);
    return (int)cudaGetLastError();
}

} // extern "C"
