/* SPDX-License-Identifier: Apache-2.0 */
/* cuda_kernels: elementwise, pooling, loss and optimizer kernels of the CUDA backend. Arithmetic
 * in float whatever the storage type; grid-stride loops so any size launches. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>

#include "trainer/backend/cuda_kernels.h"

namespace
{

__device__ __forceinline__ float ld(const float *p, size_t i)
{
    return p[i];
}
__device__ __forceinline__ float ld(const __half *p, size_t i)
{
    return __half2float(p[i]);
}
__device__ __forceinline__ float ld(const __nv_bfloat16 *p, size_t i)
{
    return __bfloat162float(p[i]);
}
__device__ __forceinline__ void st(float *p, size_t i, float v)
{
    p[i] = v;
}
__device__ __forceinline__ void st(__half *p, size_t i, float v)
{
    p[i] = __float2half_rn(v);
}
__device__ __forceinline__ void st(__nv_bfloat16 *p, size_t i, float v)
{
    p[i] = __float2bfloat16_rn(v);
}

/* 16 bytes of T as floats: 4 floats, or 8 halves / bfloat16s read as four half2 / bfloat162
 * pairs (one 128-bit load or store, the widest a thread issues). The pair conversions round each
 * element as the scalar st() does (round to nearest even), so both paths give the same bits. */
template <typename T> struct vec16;
template <> struct vec16<float> {
    static constexpr int N = 4;
    __device__ static void load(const float *p, float *f)
    {
        float4 t = *reinterpret_cast<const float4 *>(p);
        f[0] = t.x, f[1] = t.y, f[2] = t.z, f[3] = t.w;
    }
    __device__ static void store(float *p, const float *f)
    {
        *reinterpret_cast<float4 *>(p) = make_float4(f[0], f[1], f[2], f[3]);
    }
};
/* The 16-bit types' pair type and its conversions (round to nearest even, as st()). */
template <typename T> struct pair16;
template <> struct pair16<__half> {
    using P = __half2;
    __device__ static float2 to_float2(P p)
    {
        return __half22float2(p);
    }
    __device__ static P from_floats(float a, float b)
    {
        return __floats2half2_rn(a, b);
    }
};
template <> struct pair16<__nv_bfloat16> {
    using P = __nv_bfloat162;
    __device__ static float2 to_float2(P p)
    {
        return __bfloat1622float2(p);
    }
    __device__ static P from_floats(float a, float b)
    {
        return __floats2bfloat162_rn(a, b);
    }
};
template <typename T> struct vec16 {
    static constexpr int N = 8;
    using P = typename pair16<T>::P;
    __device__ static void load(const T *p, float *f)
    {
        alignas(16) P h[4];
        *reinterpret_cast<uint4 *>(h) = *reinterpret_cast<const uint4 *>(p);
        for (int k = 0; k < 4; k++) {
            float2 t = pair16<T>::to_float2(h[k]);
            f[2 * k] = t.x, f[2 * k + 1] = t.y;
        }
    }
    __device__ static void store(T *p, const float *f)
    {
        alignas(16) P h[4];
        for (int k = 0; k < 4; k++)
            h[k] = pair16<T>::from_floats(f[2 * k], f[2 * k + 1]);
        *reinterpret_cast<uint4 *>(p) = *reinterpret_cast<const uint4 *>(h);
    }
};

/* Four consecutive values stored as T (16 bytes of float, 8 of half: the pointer must be aligned
 * to that). */
__device__ __forceinline__ void store4(float *p, float a, float b, float c, float d)
{
    *reinterpret_cast<float4 *>(p) = make_float4(a, b, c, d);
}
template <typename T> __device__ __forceinline__ void store4(T *p, float a, float b, float c, float d)
{
    alignas(8) typename pair16<T>::P h[2] = {pair16<T>::from_floats(a, b), pair16<T>::from_floats(c, d)};
    *reinterpret_cast<uint2 *>(p) = *reinterpret_cast<const uint2 *>(h);
}

inline bool aligned(const void *p, size_t bytes)
{
    return ((uintptr_t)p % bytes) == 0;
}

constexpr int kThreads = 256;

inline unsigned blocks_for(size_t n)
{
    size_t b = (n + kThreads - 1) / kThreads;
    if (b < 1)
        b = 1;
    return (unsigned)(b > (1u << 20) ? (1u << 20) : b);
}

#define GRID_STRIDE(i, n)                                                                                              \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

/* Runs F<T> with T the storage type of dt. */
/* The launch's own status: the thread's last error is cleared first, because a cudaStreamQuery or
 * cudaEventQuery that answered cudaErrorNotReady (ours, or NCCL's on this thread) leaves that
 * there, and cudaGetLastError after the launch would report it as a launch failure (PyTorch's
 * CUDAStream::query clears it likewise). A sticky error is reported again by the launch itself. */
#define DISPATCH(dt, F, ...)                                                                                           \
    do {                                                                                                               \
        (void)cudaGetLastError();                                                                                      \
        switch (dt) {                                                                                                  \
        case DLT_DT_F32: F<float>(__VA_ARGS__); break;                                                                 \
        case DLT_DT_F16: F<__half>(__VA_ARGS__); break;                                                                \
        case DLT_DT_BF16: F<__nv_bfloat16>(__VA_ARGS__); break;                                                        \
        default: return (int)cudaErrorInvalidValue;                                                                    \
        }                                                                                                              \
        return (int)cudaGetLastError();                                                                                \
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

template <typename T> __global__ void k_from_f32(const float *src, T *dst, size_t n, float mul)
{
    GRID_STRIDE(i, n) st(dst, i, src[i] * mul);
}

template <typename T> __global__ void k_to_f32(const T *src, float *dst, size_t n)
{
    GRID_STRIDE(i, n) dst[i] = ld(src, i);
}

/* The vector forms: `groups` packs of vec16<T>::N elements (a multiple of 4 floats on the float
 * side). */
template <typename T> __global__ void kv_from_f32(const float *src, T *dst, size_t groups, float mul)
{
    constexpr int N = vec16<T>::N;
    float f[N];
    GRID_STRIDE(g, groups)
    {
        for (int k = 0; k < N; k += 4)
            vec16<float>::load(src + g * N + k, f + k);
        for (int k = 0; k < N; k++)
            f[k] *= mul; /* in float, before the one rounding to T (x * 1 is x: a plain cast is exact) */
        vec16<T>::store(dst + g * N, f);
    }
}

template <typename T> __global__ void kv_to_f32(const T *src, float *dst, size_t groups)
{
    constexpr int N = vec16<T>::N;
    float f[N];
    GRID_STRIDE(g, groups)
    {
        vec16<T>::load(src + g * N, f);
        for (int k = 0; k < N; k += 4)
            vec16<float>::store(dst + g * N + k, f + k);
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

/* [pixels, Cp] (T) -> [pixels, C] (float), dropping the extra channels. */
template <typename T> __global__ void k_unpad_to_f32(const T *x, float *y, size_t pixels, int Cp, int C)
{
    GRID_STRIDE(j, pixels * (size_t)C)
    {
        int i = (int)(j % C);
        size_t p = j / C;
        y[j] = ld(x, p * Cp + i);
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

template <typename T> __global__ void kv_add_relu(T *y, const T *add, size_t groups)
{
    constexpr int N = vec16<T>::N;
    float a[N], b[N];
    GRID_STRIDE(g, groups)
    {
        vec16<T>::load(y + g * N, a);
        if (add) {
            vec16<T>::load(add + g * N, b);
            for (int k = 0; k < N; k++)
                a[k] += b[k];
        }
        for (int k = 0; k < N; k++)
            a[k] = a[k] > 0.f ? a[k] : 0.f;
        vec16<T>::store(y + g * N, a);
    }
}

template <typename T> __global__ void k_relu_bwd(const T *y, const T *dy, T *dz, size_t n)
{
    GRID_STRIDE(i, n) st(dz, i, ld(y, i) > 0.f ? ld(dy, i) : 0.f);
}

/* dz may be dy (every element is read before it is written, by the same thread). */
template <typename T> __global__ void kv_relu_bwd(const T *y, const T *dy, T *dz, size_t groups)
{
    constexpr int N = vec16<T>::N;
    float a[N], b[N];
    GRID_STRIDE(g, groups)
    {
        vec16<T>::load(y + g * N, a);
        vec16<T>::load(dy + g * N, b);
        for (int k = 0; k < N; k++)
            b[k] = a[k] > 0.f ? b[k] : 0.f;
        vec16<T>::store(dz + g * N, b);
    }
}

template <typename T> __global__ void k_accumulate(T *dst, const T *src, size_t n)
{
    GRID_STRIDE(i, n) st(dst, i, ld(dst, i) + ld(src, i));
}

template <typename T> __global__ void kv_accumulate(T *dst, const T *src, size_t groups)
{
    constexpr int N = vec16<T>::N;
    float a[N], b[N];
    GRID_STRIDE(g, groups)
    {
        vec16<T>::load(dst + g * N, a);
        vec16<T>::load(src + g * N, b);
        for (int k = 0; k < N; k++)
            a[k] += b[k];
        vec16<T>::store(dst + g * N, a);
    }
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

/* Results are added with double atomics (native since sm_60): the step's loss and hit counts stay
 * on the device until the one read at the end of the step. */
template <typename T>
__global__ void k_softmax_xent(const T *logits, const int32_t *labels, int N, int K, float smoothing, float scale,
                               T *dlogits, double *loss_acc, double *top1, double *top5, double *bad, double *nonfinite)
{
    __shared__ float sh[kThreads];
    int row = blockIdx.x;
    const size_t base = (size_t)row * K;
    int y = labels[row];
    if (y < 0 || y >= K) {
        /* Counted (the step is void and the host names the label); no gradient from this row. */
        if (threadIdx.x == 0)
            atomicAdd(bad, 1.0);
        if (dlogits)
            for (int j = threadIdx.x; j < K; j += blockDim.x)
                st(dlogits, base + j, 0.f);
        return;
    }
    float zy = ld(logits, base + y);
    float mx = -INFINITY, above = 0.f, odd = 0.f;
    for (int j = threadIdx.x; j < K; j += blockDim.x) {
        float z = ld(logits, base + j);
        mx = fmaxf(mx, z);
        above += (z > zy || (z == zy && j < y)) ? 1.f : 0.f;
        odd += isfinite(z) ? 0.f : 1.f; /* a NaN compares false with everything: never a hit */
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
    odd = block_sum(odd, sh);
    float logsum = mx + logf(se);
    if (threadIdx.x == 0) {
        double mean_logp = (double)sz / K - (double)logsum;
        double loss = -(1.0 - smoothing) * ((double)zy - logsum) - smoothing * mean_logp;
        atomicAdd(loss_acc, loss);
        if (odd > 0.f)
            atomicAdd(nonfinite, 1.0);
        else if (above < 1.f)
            atomicAdd(top1, 1.0);
        if (odd == 0.f && above < 5.f)
            atomicAdd(top5, 1.0);
    }
    if (dlogits) {
        float off = smoothing / K, on = 1.f - smoothing + off, f = scale / N;
        for (int j = threadIdx.x; j < K; j += blockDim.x) {
            float p = expf(ld(logits, base + j) - logsum);
            st(dlogits, base + j, (p - (j == y ? on : off)) * f);
        }
    }
}

/* Per block one shared counter and at most one global atomic: an overflow step (every gradient
 * inf) must not queue millions of atomics on one address. */
__global__ void k_count_nonfinite(const float *x, size_t n, int vec, double *count)
{
    __shared__ unsigned long long block_bad;
    unsigned long long bad = 0;
    if (threadIdx.x == 0)
        block_bad = 0;
    __syncthreads();
    size_t body = 0;
    if (vec) {
        body = n / 4 * 4;
        GRID_STRIDE(g, n / 4)
        {
            float4 t = reinterpret_cast<const float4 *>(x)[g];
            bad += !isfinite(t.x) + !isfinite(t.y) + !isfinite(t.z) + !isfinite(t.w);
        }
    }
    GRID_STRIDE(j, n - body) bad += !isfinite(x[body + j]);
    if (bad)
        atomicAdd(&block_bad, bad);
    __syncthreads();
    if (threadIdx.x == 0 && block_bad)
        atomicAdd(count, (double)block_bad);
}

/* ------------------------------------------------------------------ the flat optimizer */

/* PyTorch's SGD with momentum (torch/optim/sgd.py: d = g + wd w; buf = mu buf + d; w -= lr buf),
 * each operation rounded on its own (the _rn intrinsics are never contracted into FMAs), the
 * order the CPU backend's loop evaluates in, so both give the same floats. */
__device__ __forceinline__ float sgd_one(float w, float *v, float g, float lr, float mu, float wd, float gs)
{
    float d = __fadd_rn(__fmul_rn(g, gs), __fmul_rn(wd, w));
    float m = __fadd_rn(__fmul_rn(mu, *v), d);
    *v = m;
    return __fsub_rn(w, __fmul_rn(lr, m));
}

/* The copy of weight i in dt: the stem's padded buffer inside [lo, hi), else the twin. */
template <typename T> __device__ __forceinline__ void put_lp(T *twin, T *stem, size_t lo, size_t hi, size_t i, float w)
{
    if (i >= lo && i < hi) {
        size_t j = i - lo;
        st(stem, (j / 3) * 4 + j % 3, w);
    } else if (twin) {
        st(twin, i, w);
    }
}

/* Four new weights from index i (a multiple of 4): one 8- or 16-byte store into the twin unless
 * the four touch the stem range. */
template <typename T>
__device__ __forceinline__ void put_lp4(T *twin, T *stem, size_t lo, size_t hi, size_t i, float4 w)
{
    if (i + 4 <= lo || i >= hi) {
        if (twin)
            store4(twin + i, w.x, w.y, w.z, w.w);
    } else {
        put_lp(twin, stem, lo, hi, i, w.x);
        put_lp(twin, stem, lo, hi, i + 1, w.y);
        put_lp(twin, stem, lo, hi, i + 2, w.z);
        put_lp(twin, stem, lo, hi, i + 3, w.w);
    }
}

/* The same rule as dlt_results_skip (backend.h), on the device: the host never decides. */
__device__ __forceinline__ bool results_skip(const dlt_sgd_args &a)
{
    const double *r = a.results;
    return r[a.slot_nonfinite] != 0 || r[a.slot_input_failed] != 0 || r[a.slot_bad_labels] != 0 ||
           !isfinite(r[a.slot_loss]);
}

/* One block per chunk. With vec (w, v, g 16-byte aligned, the twin 4-element aligned) a chunk is a
 * scalar head up to the next multiple of 4, float4 groups, and a scalar tail: chunk offsets are
 * wherever the segments put them. */
template <typename T> __global__ void __launch_bounds__(kThreads) k_sgd_flat(dlt_sgd_args a, int vec)
{
    if (a.lr_dev)
        a.lr = *a.lr_dev; /* a recorded step: the replay's learning rate */
    if (results_skip(a))
        return;
    T *twin = (T *)a.twin, *stem = (T *)a.stem;
    const bool lp = twin || stem;
    for (int ci = blockIdx.x; ci < a.nchunks; ci += gridDim.x) {
        const dlt_sgd_chunk ck = a.chunks[ci];
        const size_t lo = ck.off, hi = lo + ck.len;
        const float wd = ck.no_decay ? a.wd_no_decay : a.wd;
        size_t b0 = lo, b1 = lo; /* [b0, b1): the vector body */
        if (vec) {
            b0 = (lo + 3) & ~(size_t)3;
            b0 = b0 < hi ? b0 : hi;
            b1 = hi & ~(size_t)3;
            b1 = b1 > b0 ? b1 : b0;
        }
        for (size_t i = lo + threadIdx.x; i < b0; i += blockDim.x) {
            float w = sgd_one(a.w[i], &a.v[i], a.g[i], a.lr, a.mu, wd, a.grad_scale);
            a.w[i] = w;
            if (lp)
                put_lp(twin, stem, a.stem_lo, a.stem_hi, i, w);
        }
        for (size_t i = b0 + 4 * (size_t)threadIdx.x; i < b1; i += 4 * (size_t)blockDim.x) {
            float4 w = *reinterpret_cast<const float4 *>(a.w + i);
            float4 v = *reinterpret_cast<const float4 *>(a.v + i);
            const float4 g = *reinterpret_cast<const float4 *>(a.g + i);
            w.x = sgd_one(w.x, &v.x, g.x, a.lr, a.mu, wd, a.grad_scale);
            w.y = sgd_one(w.y, &v.y, g.y, a.lr, a.mu, wd, a.grad_scale);
            w.z = sgd_one(w.z, &v.z, g.z, a.lr, a.mu, wd, a.grad_scale);
            w.w = sgd_one(w.w, &v.w, g.w, a.lr, a.mu, wd, a.grad_scale);
            *reinterpret_cast<float4 *>(a.w + i) = w;
            *reinterpret_cast<float4 *>(a.v + i) = v;
            if (lp)
                put_lp4(twin, stem, a.stem_lo, a.stem_hi, i, w);
        }
        for (size_t i = b1 + threadIdx.x; i < hi; i += blockDim.x) {
            float w = sgd_one(a.w[i], &a.v[i], a.g[i], a.lr, a.mu, wd, a.grad_scale);
            a.w[i] = w;
            if (lp)
                put_lp(twin, stem, a.stem_lo, a.stem_hi, i, w);
        }
    }
}

/* The copies after an upload: the whole buffer when there is a twin, else the stem range only. */
template <typename T>
__global__ void k_params_to_lp(const float *w, size_t lo, size_t hi, T *twin, T *stem, size_t slo, size_t shi, int vec)
{
    size_t body = lo;
    if (vec) { /* lo is 0 here, w 16-byte and the twin 4-element aligned */
        body = hi / 4 * 4;
        GRID_STRIDE(g, hi / 4)
        {
            put_lp4(twin, stem, slo, shi, g * 4, reinterpret_cast<const float4 *>(w)[g]);
        }
    }
    GRID_STRIDE(j, hi - body) put_lp(twin, stem, slo, shi, body + j, w[body + j]);
}

__global__ void k_bn_saved_to_var(const float *sm, const float *si, float *m, float *v, int c, float eps)
{
    GRID_STRIDE(i, (size_t)c)
    {
        m[i] = sm[i];
        v[i] = 1.f / (si[i] * si[i]) - eps;
    }
}

/* Running statistics as PyTorch keeps them (bn_stats_update's, and the chain's finalize's). */
__device__ __forceinline__ void running_update(float *rm, float *rv, size_t i, float m, float v, float mom, float unb)
{
    rm[i] = (1.f - mom) * rm[i] + mom * m;
    rv[i] = (1.f - mom) * rv[i] + mom * v * unb;
}

__global__ void k_bn_stats_update(float *rm, float *rv, const float *bm, const float *bv, int c, float mom, float unb)
{
    GRID_STRIDE(i, (size_t)c) running_update(rm, rv, i, bm[i], bv[i], mom, unb);
}

/* ---- the convolution + batch-norm chain */

template <typename T>
__global__ void k_bn_finalize(const float *stats, const float *gamma, const float *beta, int C, double count, float eps,
                              float *mean, float *var, T *sb, float *rm, float *rv, float mom, float unb)
{
    GRID_STRIDE(i, (size_t)C)
    {
        const double m = stats[i] / count, v0 = stats[C + i] / count - m * m, v = v0 > 0 ? v0 : 0;
        const float sc = gamma[i] * rsqrtf((float)v + eps);
        mean[i] = (float)m;
        var[i] = (float)v;
        st(sb, i, sc);
        st(sb, C + i, beta[i] - (float)m * sc);
        if (rm)
            running_update(rm, rv, i, (float)m, (float)v, mom, unb);
    }
}

/* x * scale + bias as cuDNN's prologue computes it: the product rounded to float, then the sum
 * (no fused multiply-add), so the backward's ReLU mask is the forward's. */
__device__ __forceinline__ float bn_pre(float x, float scale, float bias)
{
    return __fadd_rn(__fmul_rn(x, scale), bias);
}

template <typename T>
__global__ void k_bn_apply(const T *x, const T *sb, const T *z, const T *zsb, int relu, T *y, size_t n, int C)
{
    GRID_STRIDE(i, n)
    {
        const int c = (int)(i % (size_t)C);
        float v = bn_pre(ld(x, i), ld(sb, c), ld(sb, C + c));
        if (z)
            v += zsb ? bn_pre(ld(z, i), ld(zsb, c), ld(zsb, C + c)) : ld(z, i);
        st(y, i, relu && v < 0.f ? 0.f : v);
    }
}

/* 16 bytes at a time: C a multiple of the pack, so a pack's channels are consecutive. */
template <typename T>
__global__ void kv_bn_apply(const T *x, const T *sb, const T *z, const T *zsb, int relu, T *y, size_t groups, int C)
{
    constexpr int N = vec16<T>::N;
    float a[N], b[N];
    GRID_STRIDE(g, groups)
    {
        const int c0 = (int)((g * N) % (size_t)C);
        vec16<T>::load(x + g * N, a);
        if (z)
            vec16<T>::load(z + g * N, b);
        for (int k = 0; k < N; k++) {
            float v = bn_pre(a[k], ld(sb, c0 + k), ld(sb, C + c0 + k));
            if (z)
                v += zsb ? bn_pre(b[k], ld(zsb, c0 + k), ld(zsb, C + c0 + k)) : b[k];
            a[k] = relu && v < 0.f ? 0.f : v;
        }
        vec16<T>::store(y + g * N, a);
    }
}

/* The backward's reduction: a block of kRx channels by kRy rows of pixels; thread (tx, ty) sums
 * channel c over rows ty, ty + kRy * gridDim.y, ...; the block's kRy partials go to part[blockIdx.y]
 * (2C floats: sum of g, sum of g (x - mean), g the gradient through the ReLU). */
constexpr int kRx = 32, kRy = 8, kRblocks = 1024;

template <typename T>
__device__ __forceinline__ float bn_grad(const T *x, const T *y, int relu, const T *dy, size_t i, float xv, float sc,
                                         float bi)
{
    float g = ld(dy, i);
    if (relu && !(y ? ld(y, i) > 0.f : bn_pre(xv, sc, bi) > 0.f))
        g = 0.f;
    return g;
}

template <typename T>
__global__ void k_bn_bwd_reduce(const T *x, const T *y, const T *sb, int relu, const T *dy, T *dz, const float *mean,
                                size_t P, int C, float *part)
{
    __shared__ float sh[2][kRy][kRx + 1];
    const int c = blockIdx.x * kRx + threadIdx.x;
    float s1 = 0.f, s2 = 0.f;
    if (c < C) {
        const float m = mean[c], sc = ld(sb, c), bi = ld(sb, C + c);
        for (size_t p = blockIdx.y * (size_t)kRy + threadIdx.y; p < P; p += (size_t)gridDim.y * kRy) {
            const size_t i = p * C + c;
            const float xv = ld(x, i), g = bn_grad(x, y, relu, dy, i, xv, sc, bi);
            if (dz)
                st(dz, i, g);
            s1 += g;
            s2 += g * (xv - m);
        }
    }
    sh[0][threadIdx.y][threadIdx.x] = s1;
    sh[1][threadIdx.y][threadIdx.x] = s2;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        float a = 0.f, b = 0.f;
        for (int k = 0; k < kRy; k++)
            a += sh[0][k][threadIdx.x], b += sh[1][k][threadIdx.x];
        part[(size_t)blockIdx.y * 2 * C + c] = a;
        part[(size_t)blockIdx.y * 2 * C + C + c] = b;
    }
}

/* The partials' totals in block order (double), dgamma and dbeta, and the data gradient's
 * per-channel coefficients: dx = coef[c] (g - coef[C + c] - (x - mean) coef[2C + c]). */
__global__ void k_bn_bwd_finish(const float *part, int rows, int C, double count, const float *gamma, const float *var,
                                float eps, float *dgamma, float *dbeta, float *coef)
{
    GRID_STRIDE(c, (size_t)C)
    {
        double a = 0, b = 0;
        for (int r = 0; r < rows; r++)
            a += part[(size_t)r * 2 * C + c], b += part[(size_t)r * 2 * C + C + c];
        const float inv = rsqrtf(var[c] + eps);
        dbeta[c] = (float)a;
        dgamma[c] = (float)b * inv;
        coef[c] = gamma[c] * inv;
        coef[C + c] = (float)(a / count);
        coef[2 * C + c] = inv * inv * (float)(b / count);
    }
}

template <typename T>
__global__ void k_bn_bwd_apply(const T *x, const T *y, const T *sb, int relu, const T *dy, const float *mean,
                               const float *coef, T *dx, size_t n, int C)
{
    GRID_STRIDE(i, n)
    {
        const int c = (int)(i % (size_t)C);
        const float xv = ld(x, i), g = bn_grad(x, y, relu, dy, i, xv, ld(sb, c), ld(sb, C + c));
        st(dx, i, coef[c] * (g - coef[C + c] - (xv - mean[c]) * coef[2 * C + c]));
    }
}

/* Blocks of the reduction for C channels over P rows: every channel's column, and as many row
 * groups as keep the grid near kRblocks blocks (at least one, at most one per kRy rows). */
inline void bn_bwd_grid(size_t P, int C, unsigned *gx, unsigned *gy)
{
    size_t x = ((size_t)C + kRx - 1) / kRx, y = kRblocks / x, most = (P + kRy - 1) / kRy;
    *gx = (unsigned)x;
    *gy = (unsigned)(y < 1 ? 1 : y > most ? (most < 1 ? 1 : most) : y);
}

template <typename T>
void l_bn_finalize(const float *stats, const float *gamma, const float *beta, int C, double count, float eps,
                   float *mean, float *var, void *sb, float *rm, float *rv, float mom, float unb, cudaStream_t s)
{
    k_bn_finalize<T><<<blocks_for((size_t)C), kThreads, 0, s>>>(stats, gamma, beta, C, count, eps, mean, var, (T *)sb,
                                                                rm, rv, mom, unb);
}
template <typename T>
void l_bn_apply(const void *x, const void *sb, const void *z, const void *zsb, int relu, void *y, size_t pixels, int C,
                cudaStream_t s)
{
    constexpr int N = vec16<T>::N;
    const size_t n = pixels * (size_t)C;
    if (aligned(x, 16) && aligned(y, 16) && aligned(z, 16) && C % N == 0)
        kv_bn_apply<T><<<blocks_for(n / N), kThreads, 0, s>>>((const T *)x, (const T *)sb, (const T *)z, (const T *)zsb,
                                                              relu, (T *)y, n / N, C);
    else
        k_bn_apply<T><<<blocks_for(n), kThreads, 0, s>>>((const T *)x, (const T *)sb, (const T *)z, (const T *)zsb,
                                                         relu, (T *)y, n, C);
}
template <typename T>
void l_bn_bwd(const void *x, const void *y, const void *sb, int relu, const void *dy, void *dz, const float *mean,
              const float *var, const float *gamma, float eps, void *dx, float *dgamma, float *dbeta, size_t P, int C,
              float *scratch, cudaStream_t s)
{
    unsigned gx, gy;
    bn_bwd_grid(P, C, &gx, &gy);
    float *part = scratch, *coef = scratch + (size_t)gy * 2 * C;
    k_bn_bwd_reduce<T><<<dim3(gx, gy), dim3(kRx, kRy), 0, s>>>((const T *)x, (const T *)y, (const T *)sb, relu,
                                                               (const T *)dy, (T *)dz, mean, P, C, part);
    k_bn_bwd_finish<<<blocks_for((size_t)C), kThreads, 0, s>>>(part, (int)gy, C, (double)P, gamma, var, eps, dgamma,
                                                               dbeta, coef);
    k_bn_bwd_apply<T><<<blocks_for(P * (size_t)C), kThreads, 0, s>>>(
        (const T *)x, (const T *)y, (const T *)sb, relu, (const T *)dy, mean, coef, (T *)dx, P * (size_t)C, C);
}

template <typename T> void l_normalize(const uint8_t *src, void *dst, size_t n, norm_consts k, cudaStream_t s)
{
    k_normalize<T><<<blocks_for(n), kThreads, 0, s>>>(src, (T *)dst, n, k);
}
/* The vector kernels when every pointer is 16-byte aligned and n a whole number of packs, else
 * the scalar ones. */
template <typename T> void l_from_f32(const float *src, void *dst, size_t n, float mul, cudaStream_t s)
{
    constexpr int N = vec16<T>::N;
    if (aligned(src, 16) && aligned(dst, 16) && n % N == 0)
        kv_from_f32<T><<<blocks_for(n / N), kThreads, 0, s>>>(src, (T *)dst, n / N, mul);
    else
        k_from_f32<T><<<blocks_for(n), kThreads, 0, s>>>(src, (T *)dst, n, mul);
}
template <typename T> void l_to_f32(const void *src, float *dst, size_t n, cudaStream_t s)
{
    constexpr int N = vec16<T>::N;
    if (aligned(src, 16) && aligned(dst, 16) && n % N == 0)
        kv_to_f32<T><<<blocks_for(n / N), kThreads, 0, s>>>((const T *)src, dst, n / N);
    else
        k_to_f32<T><<<blocks_for(n), kThreads, 0, s>>>((const T *)src, dst, n);
}
template <typename T> void l_pad_channels(const void *x, void *xp, size_t pixels, int C, int Cp, cudaStream_t s)
{
    k_pad_channels<T><<<blocks_for(pixels * (size_t)Cp), kThreads, 0, s>>>((const T *)x, (T *)xp, pixels, C, Cp);
}
template <typename T> void l_unpad_to_f32(const void *x, float *y, size_t pixels, int Cp, int C, cudaStream_t s)
{
    k_unpad_to_f32<T><<<blocks_for(pixels * (size_t)C), kThreads, 0, s>>>((const T *)x, y, pixels, Cp, C);
}
template <typename T> void l_add_relu(void *y, const void *add, size_t n, cudaStream_t s)
{
    constexpr int N = vec16<T>::N;
    if (aligned(y, 16) && aligned(add, 16) && n % N == 0)
        kv_add_relu<T><<<blocks_for(n / N), kThreads, 0, s>>>((T *)y, (const T *)add, n / N);
    else
        k_add_relu<T><<<blocks_for(n), kThreads, 0, s>>>((T *)y, (const T *)add, n);
}
template <typename T> void l_relu_bwd(const void *y, const void *dy, void *dz, size_t n, cudaStream_t s)
{
    constexpr int N = vec16<T>::N;
    if (aligned(y, 16) && aligned(dy, 16) && aligned(dz, 16) && n % N == 0)
        kv_relu_bwd<T><<<blocks_for(n / N), kThreads, 0, s>>>((const T *)y, (const T *)dy, (T *)dz, n / N);
    else
        k_relu_bwd<T><<<blocks_for(n), kThreads, 0, s>>>((const T *)y, (const T *)dy, (T *)dz, n);
}
template <typename T> void l_accumulate(void *dst, const void *src, size_t n, cudaStream_t s)
{
    constexpr int N = vec16<T>::N;
    if (aligned(dst, 16) && aligned(src, 16) && n % N == 0)
        kv_accumulate<T><<<blocks_for(n / N), kThreads, 0, s>>>((T *)dst, (const T *)src, n / N);
    else
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
               double *top1, double *top5, double *bad, double *nonfinite, cudaStream_t s)
{
    k_softmax_xent<T>
        <<<N, kThreads, 0, s>>>((const T *)z, labels, N, K, sm, sc, (T *)dz, loss, top1, top5, bad, nonfinite);
}
template <typename T> void l_sgd_flat(const dlt_sgd_args &a, cudaStream_t s)
{
    int vec = aligned(a.w, 16) && aligned(a.v, 16) && aligned(a.g, 16) && aligned(a.twin, 4 * sizeof(T));
    k_sgd_flat<T><<<(unsigned)a.nchunks, kThreads, 0, s>>>(a, vec);
}
template <typename T>
void l_params_to_lp(const float *w, size_t n, void *twin, void *stem, size_t slo, size_t shi, cudaStream_t s)
{
    /* Without a twin only the stem range has a copy to write. */
    size_t lo = twin ? 0 : slo, hi = twin ? n : shi;
    int vec = twin && aligned(w, 16) && aligned(twin, 4 * sizeof(T));
    k_params_to_lp<T>
        <<<blocks_for(vec ? (hi - lo) / 4 : hi - lo), kThreads, 0, s>>>(w, lo, hi, (T *)twin, (T *)stem, slo, shi, vec);
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
    DISPATCH(dt, l_from_f32, src, dst, n, 1.f, (cudaStream_t)s);
}

int dlt_k_cast_scaled_from_f32(const float *src, void *dst, dlt_dt dt, size_t n, float mul, dlt_stream s)
{
    DISPATCH(dt, l_from_f32, src, dst, n, mul, (cudaStream_t)s);
}

int dlt_k_cast_to_f32(const void *src, dlt_dt dt, float *dst, size_t n, dlt_stream s)
{
    DISPATCH(dt, l_to_f32, src, dst, n, (cudaStream_t)s);
}

int dlt_k_pad_channels(const void *x, void *xp, dlt_dt dt, size_t pixels, int c, int cp, dlt_stream s)
{
    DISPATCH(dt, l_pad_channels, x, xp, pixels, c, cp, (cudaStream_t)s);
}

int dlt_k_unpad_to_f32(const void *src, dlt_dt dt, float *dst, size_t pixels, int cp, int c, dlt_stream s)
{
    DISPATCH(dt, l_unpad_to_f32, src, dst, pixels, cp, c, (cudaStream_t)s);
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
                       float loss_scale, void *dlogits, double *loss, double *top1, double *top5, double *bad,
                       double *nonfinite, dlt_stream s)
{
    DISPATCH(dt, l_softmax, logits, labels, n, k, smoothing, loss_scale, dlogits, loss, top1, top5, bad, nonfinite,
             (cudaStream_t)s);
}

int dlt_k_count_nonfinite(const float *x, size_t n, double *count, dlt_stream s)
{
    int vec = aligned(x, 16);
    (void)cudaGetLastError();
    k_count_nonfinite<<<blocks_for(vec ? n / 4 + 1 : n), kThreads, 0, (cudaStream_t)s>>>(x, n, vec, count);
    return (int)cudaGetLastError();
}

int dlt_k_sgd_flat(const dlt_sgd_args *a, dlt_stream s)
{
    if (a->nchunks <= 0)
        return (int)cudaErrorInvalidValue;
    DISPATCH(a->dt, l_sgd_flat, *a, (cudaStream_t)s);
}

int dlt_k_params_to_lp(const float *w, size_t n, void *twin, void *stem, size_t stem_lo, size_t stem_hi, dlt_dt dt,
                       dlt_stream s)
{
    if (!twin && (!stem || stem_hi <= stem_lo))
        return 0;
    DISPATCH(dt, l_params_to_lp, w, n, twin, stem, stem_lo, stem_hi, (cudaStream_t)s);
}

int dlt_k_bn_saved_to_var(const float *save_mean, const float *save_inv, float *mean, float *var, int c, float eps,
                          dlt_stream s)
{
    (void)cudaGetLastError();
    k_bn_saved_to_var<<<blocks_for((size_t)c), kThreads, 0, (cudaStream_t)s>>>(save_mean, save_inv, mean, var, c, eps);
    return (int)cudaGetLastError();
}

int dlt_k_bn_stats_update(float *rm, float *rv, const float *bm, const float *bv, int c, float momentum, float unbias,
                          dlt_stream s)
{
    (void)cudaGetLastError();
    k_bn_stats_update<<<blocks_for((size_t)c), kThreads, 0, (cudaStream_t)s>>>(rm, rv, bm, bv, c, momentum, unbias);
    return (int)cudaGetLastError();
}

int dlt_k_bn_finalize(const float *stats, const float *gamma, const float *beta, int c, double count, float eps,
                      float *mean, float *var, void *sb, dlt_dt dt, float *rm, float *rv, float momentum, float unbias,
                      dlt_stream s)
{
    DISPATCH(dt, l_bn_finalize, stats, gamma, beta, c, count, eps, mean, var, sb, rm, rv, momentum, unbias,
             (cudaStream_t)s);
}

int dlt_k_bn_apply(const void *x, const void *sb, const void *z, const void *zsb, int relu, void *y, dlt_dt dt,
                   size_t pixels, int c, dlt_stream s)
{
    DISPATCH(dt, l_bn_apply, x, sb, z, zsb, relu, y, pixels, c, (cudaStream_t)s);
}

size_t dlt_k_bn_bwd_scratch(int c)
{
    /* The partials of at most kRblocks blocks of kRx channels (2 floats a channel), then 3c
     * coefficients. */
    const size_t cols = (size_t)kRblocks * kRx > (size_t)c ? (size_t)kRblocks * kRx : (size_t)c;
    return (cols * 2 + 3 * (size_t)c) * sizeof(float);
}

int dlt_k_bn_bwd(const void *x, const void *y, const void *sb, int relu, const void *dy, void *dz, const float *mean,
                 const float *var, const float *gamma, float eps, void *dx, float *dgamma, float *dbeta, dlt_dt dt,
                 size_t pixels, int c, float *scratch, dlt_stream s)
{
    DISPATCH(dt, l_bn_bwd, x, y, sb, relu, dy, dz, mean, var, gamma, eps, dx, dgamma, dbeta, pixels, c, scratch,
             (cudaStream_t)s);
}

} // extern "C"
