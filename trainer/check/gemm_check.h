/* SPDX-License-Identifier: Apache-2.0 */
/* gemm_check: one GEMM per rank on its device (oneDNN on the CPU, cuBLAS on a GPU) with inputs
 * whose exact product is checkable in O(n^2): small-integer matrices, every row and column sum of
 * the result compared exactly (double arithmetic on integers) with A(B1) and (1A)B. */
#ifndef DLT_GEMM_CHECK_H
#define DLT_GEMM_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "trainer/backend/backend.h"

typedef struct dlt_gemm_timing {
    int n;             /* square size */
    int iters;         /* timed GEMMs */
    double seconds;    /* per GEMM */
    double tflops;     /* 2 n^3 / seconds / 1e12 */
    char model[64];    /* GPU name or CPU model */
    char device[64];   /* PCI bus id, or "cpu LIST" (the CPUs this rank may run on) */
    const char *dtype; /* what the inputs and the arithmetic were: "fp32", "tf32", "fp16", "bf16" */
} dlt_gemm_timing;

/* A[i][k] and B[k][j] in {-2..2} (exact in every dtype), the same on every rank. */
float dlt_gemm_value_a(int64_t i, int64_t k);
float dlt_gemm_value_b(int64_t k, int64_t j);

/* C (n x n, row-major) against A B of the values above: 0 when every row sum and every column
 * sum is exact; else 1 with *row and *col the first wrong row and column (a single wrong entry is
 * at their crossing) and *got / *want that entry and its exact value. */
int dlt_gemm_verify(const float *c, int n, int *row, int *col, double *got, double *want);

/* Runs warm-up plus timed GEMMs for about budget_s seconds (at least 3) and leaves the last
 * result in c (n*n host floats). Returns 0 or a negative status with err filled. */
int dlt_gemm_run_cpu(int n, double budget_s, float *c, dlt_gemm_timing *t, dlt_err *err);
#ifdef DLT_HAVE_CUDA_BACKEND
/* cuBLAS on CUDA device `device` in precision p (fp16/bf16: those inputs, fp32 accumulation and
 * output; tf32: fp32 data, TF32 tensor cores), timed with CUDA events. */
int dlt_gemm_run_cuda(int device, dlt_precision p, int n, double budget_s, float *c, dlt_gemm_timing *t, dlt_err *err);
#endif

#endif
