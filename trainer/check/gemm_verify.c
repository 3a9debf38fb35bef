/* SPDX-License-Identifier: Apache-2.0 */
/* gemm_verify: the check's GEMM inputs and the exact check of its result. */
#include "config.h"

#include "trainer/check/gemm_check.h"

#include <stdlib.h>

/* Periods 5 and 7 in different directions: no two rows (or columns) of the product alike for
 * long, so a wrong entry cannot hide behind a neighbour's. */
float dlt_gemm_value_a(int64_t i, int64_t k)
{
    return (float)((i * 3 + k) % 5) - 2.0f;
}

float dlt_gemm_value_b(int64_t k, int64_t j)
{
    return (float)((k + j * 2) % 7 % 5) - 2.0f;
}

int dlt_gemm_verify(const float *c, int n, int *row, int *col, double *got, double *want)
{
    /* Integers: |entry| <= 4n, sums <= 4n^2, exact in double for any n this check uses. */
    double *b1 = calloc((size_t)n, sizeof(double)), *a1 = calloc((size_t)n, sizeof(double));
    int bad = 0;
    *row = *col = -1;
    *got = *want = 0;
    if (!b1 || !a1) {
        free(b1);
        free(a1);
        *row = *col = 0;
        return 1;
    }
    for (int k = 0; k < n; k++)
        for (int j = 0; j < n; j++) {
            b1[k] += dlt_gemm_value_b(k, j); /* B 1 */
            a1[k] += dlt_gemm_value_a(j, k); /* 1 A */
        }
    for (int i = 0; i < n && *row < 0; i++) {
        double s = 0, e = 0;
        for (int k = 0; k < n; k++)
            e += dlt_gemm_value_a(i, k) * b1[k];
        for (int j = 0; j < n; j++)
            s += c[(size_t)i * n + j];
        if (s != e)
            *row = i;
    }
    for (int j = 0; j < n && *col < 0; j++) {
        double s = 0, e = 0;
        for (int k = 0; k < n; k++)
            e += a1[k] * dlt_gemm_value_b(k, j);
        for (int i = 0; i < n; i++)
            s += c[(size_t)i * n + j];
        if (s != e)
            *col = j;
    }
    if (*row >= 0 || *col >= 0) {
        int i = *row >= 0 ? *row : 0, j = *col >= 0 ? *col : 0;
        double e = 0;
        for (int k = 0; k < n; k++)
            e += (double)dlt_gemm_value_a(i, k) * dlt_gemm_value_b(k, j);
        *got = c[(size_t)i * n + j];
        *want = e;
        bad = 1;
    }
    free(b1);
    free(a1);
    return bad;
}
