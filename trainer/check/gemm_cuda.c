/* SPDX-License-Identifier: Apache-2.0 */
/* gemm_cuda: the check's GEMM through cuBLAS in the run's precision, timed with CUDA events;
 * fp16/bf16 inputs accumulate and store in fp32, so the small-integer product stays exact. */
#include "config.h"

#include "trainer/check/gemm_check.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cuda_check.h"
#include "common/status.h"

/* The bits of v in {-2..2} as an IEEE half or a bfloat16 (both exact for these values). */
static uint16_t _half_bits(float v, int bf16)
{
    uint32_t f;
    memcpy(&f, &v, sizeof(f));
    if (bf16)
        return (uint16_t)(f >> 16);
    if (v == 0)
        return 0;
    /* sign, exponent rebased from 127 to 15, top 10 mantissa bits (zero for these integers) */
    return (uint16_t)(((f >> 16) & 0x8000u) | ((((f >> 23) & 0xffu) - 127u + 15u) << 10) | ((f >> 13) & 0x3ffu));
}

typedef struct {
    void *a, *b;
    float *c;
    cublasHandle_t h;
    cudaEvent_t e0, e1;
    cudaStream_t s;
} _gemm_bufs;

static void _release(_gemm_bufs *g)
{
    if (g->s)
        cudaStreamSynchronize(g->s);
    cudaFree(g->a);
    cudaFree(g->b);
    cudaFree(g->c);
    if (g->h)
        cublasDestroy(g->h);
    if (g->e0)
        cudaEventDestroy(g->e0);
    if (g->e1)
        cudaEventDestroy(g->e1);
    if (g->s)
        cudaStreamDestroy(g->s);
}

static int _run(_gemm_bufs *g, int device, dlt_precision p, int n, double budget_s, float *c, dlt_gemm_timing *t,
                dlt_err *err)
{
    size_t nn = (size_t)n * n, esz = p == DLT_PREC_FP16 || p == DLT_PREC_BF16 ? 2 : 4;
    cudaDataType_t dt = p == DLT_PREC_FP16 ? CUDA_R_16F : p == DLT_PREC_BF16 ? CUDA_R_16BF : CUDA_R_32F;
    cublasComputeType_t ct = p == DLT_PREC_TF32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    const float one = 1.f, zero = 0.f;
    struct cudaDeviceProp prop;
    void *ha = malloc(nn * esz), *hb = malloc(nn * esz);
    float ms = 0;
    int iters = 3, dev = 0, rc;
    if (!ha || !hb) {
        free(ha);
        free(hb);
        return dlt_fail(err, -ENOMEM, "GEMM check: no host memory for %d x %d inputs", n, n);
    }
    for (size_t i = 0; i < nn; i++) {
        float va = dlt_gemm_value_a((int64_t)(i / n), (int64_t)(i % n)),
              vb = dlt_gemm_value_b((int64_t)(i / n), (int64_t)(i % n));
        if (esz == 2) {
            ((uint16_t *)ha)[i] = _half_bits(va, p == DLT_PREC_BF16);
            ((uint16_t *)hb)[i] = _half_bits(vb, p == DLT_PREC_BF16);
        } else {
            ((float *)ha)[i] = va;
            ((float *)hb)[i] = vb;
        }
    }
    rc = dlt_cuda_select_device(device, &dev, err);
    if (rc == 0 && (cudaMalloc(&g->a, nn * esz) != cudaSuccess || cudaMalloc(&g->b, nn * esz) != cudaSuccess ||
                    cudaMalloc((void **)&g->c, nn * sizeof(float)) != cudaSuccess))
        rc = dlt_fail(err, -ENOMEM, "GEMM check: no device memory for %d x %d matrices on device %d", n, n, dev);
    if (rc == 0 && (cudaMemcpy(g->a, ha, nn * esz, cudaMemcpyHostToDevice) != cudaSuccess ||
                    cudaMemcpy(g->b, hb, nn * esz, cudaMemcpyHostToDevice) != cudaSuccess))
        rc = dlt_fail(err, -EIO, "GEMM check: copying the inputs to device %d failed", dev);
    free(ha);
    free(hb);
    if (rc)
        return rc;
    DLT_TRY(err, DLT_CUDA_CHECK(err, cudaStreamCreateWithFlags(&g->s, cudaStreamNonBlocking)));
    DLT_TRY(err, DLT_CUDA_CHECK(err, cudaEventCreate(&g->e0)));
    DLT_TRY(err, DLT_CUDA_CHECK(err, cudaEventCreate(&g->e1)));
    DLT_TRY(err, DLT_CUBLAS_CHECK(err, cublasCreate(&g->h)));
    DLT_TRY(err, DLT_CUBLAS_CHECK(err, cublasSetStream(g->h, g->s)));
    /* Row-major C = A B is column-major C^T = B^T A^T: B first. */
#define DLT_GEMM_ONCE()                                                                                                \
    DLT_TRY(err, DLT_CUBLAS_CHECK(err, cublasGemmEx(g->h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, g->b, dt, n, g->a,  \
                                                    dt, n, &zero, g->c, CUDA_R_32F, n, ct, CUBLAS_GEMM_DEFAULT)))
    DLT_GEMM_ONCE(); /* warm-up, and a first timing to size the loop */
    DLT_TRY(err, DLT_CUDA_CHECK(err, cudaEventRecord(g->e0, g->s)));
    DLT_GEMM_ONCE();
    DLT_TRY(err, DLT_CUDA_CHECK(err, cudaEventRecord(g->e1, g->s)));
    DLT_TRY(err, DLT_CUDA_CHECK(err, cudaEventSynchronize(g->e1)));
    DLT_TRY(err, DLT_CUDA_CHECK(err, cudaEventElapsedTime(&ms, g->e0, g->e1)));
    if (ms > 0 && budget_s * 1e3 / ms > iters)
        iters = budget_s * 1e3 / ms > 1000 ? 1000 : (int)(budget_s * 1e3 / ms);
    DLT_TRY(err, DLT_CUDA_CHECK(err, cudaEventRecord(g->e0, g->s)));
    for (int i = 0; i < iters; i++)
        DLT_GEMM_ONCE();
#undef DLT_GEMM_ONCE
    DLT_TRY(err, DLT_CUDA_CHECK(err, cudaEventRecord(g->e1, g->s)));
    DLT_TRY(err, DLT_CUDA_CHECK(err, cudaEventSynchronize(g->e1)));
    DLT_TRY(err, DLT_CUDA_CHECK(err, cudaEventElapsedTime(&ms, g->e0, g->e1)));
    DLT_TRY(err, DLT_CUDA_CHECK(err, cudaMemcpy(c, g->c, nn * sizeof(float), cudaMemcpyDeviceToHost)));
    DLT_TRY(err, DLT_CUDA_CHECK(err, cudaGetDeviceProperties(&prop, dev)));
    t->n = n;
    t->iters = iters;
    t->seconds = ms * 1e-3 / iters;
    t->tflops = t->seconds > 0 ? 2.0 * n * (double)n * n / t->seconds / 1e12 : 0;
    t->dtype = dlt_precision_name(p);
    snprintf(t->model, sizeof(t->model), "%.63s", prop.name);
    if (dlt_backend_gpu_id(dev, t->device, sizeof(t->device)) != 0)
        snprintf(t->device, sizeof(t->device), "cuda %d", dev);
    return 0;
}

int dlt_gemm_run_cuda(int device, dlt_precision p, int n, double budget_s, float *c, dlt_gemm_timing *t, dlt_err *err)
{
    _gemm_bufs g;
    int rc;
    memset(&g, 0, sizeof(g));
    memset(t, 0, sizeof(*t));
    rc = _run(&g, device, p, n, budget_s, c, t, err);
    _release(&g);
    return rc;
}
