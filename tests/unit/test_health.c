/* SPDX-License-Identifier: Apache-2.0 */
/* test_health: the pure parts of dltrain check and the straggler detection: the GEMM result check
 * (exact product accepted, one wrong entry found with its exact value), the all-reduce sweep's
 * exact sums and busbw definition, and the straggler verdict. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "trainer/check/allreduce_check.h"
#include "trainer/check/gemm_check.h"
#include "trainer/train/straggler.h"

/* The naive product of the check's inputs. */
static float *_product(int n)
{
    float *c = calloc((size_t)n * n, sizeof(float));
    for (int i = 0; c && i < n; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int k = 0; k < n; k++)
                s += (double)dlt_gemm_value_a(i, k) * dlt_gemm_value_b(k, j);
            c[(size_t)i * n + j] = (float)s;
        }
    return c;
}

static void test_gemm_verify(void **state)
{
    int n = 67, row, col;
    double got, want;
    float *c = _product(n);
    (void)state;
    assert_non_null(c);
    for (int i = 0; i < n; i++) /* the inputs are small integers */
        assert_true(dlt_gemm_value_a(i, 3) >= -2 && dlt_gemm_value_a(i, 3) <= 2 && dlt_gemm_value_b(3, i) >= -2 &&
                    dlt_gemm_value_b(3, i) <= 2);
    assert_int_equal(dlt_gemm_verify(c, n, &row, &col, &got, &want), 0);
    c[(size_t)40 * n + 17] += 1.0f;
    assert_int_equal(dlt_gemm_verify(c, n, &row, &col, &got, &want), 1);
    assert_int_equal(row, 40);
    assert_int_equal(col, 17);
    assert_true(got == want + 1);
    /* Two errors that keep a row sum (a swap inside a row) still change two column sums. */
    c[(size_t)40 * n + 17] -= 1.0f;
    c[(size_t)5 * n + 1] += 2.0f;
    c[(size_t)5 * n + 2] -= 2.0f;
    assert_int_equal(dlt_gemm_verify(c, n, &row, &col, &got, &want), 1);
    assert_int_equal(col, 1);
    free(c);
}

static void test_allreduce_definitions(void **state)
{
    (void)state;
    assert_true(dlt_ar_busbw(10.0, 1) == 0.0);
    assert_true(dlt_ar_busbw(10.0, 2) == 10.0);
    assert_true(dlt_ar_busbw(10.0, 4) == 15.0);
    assert_true(dlt_ar_busbw(8.0, 8) == 14.0);
    for (int n = 1; n <= 8; n++)
        for (size_t i = 0; i < 16; i++) {
            double s = 0;
            for (int r = 0; r < n; r++)
                s += dlt_ar_value(r, i);
            assert_true(dlt_ar_expected(n, i) == s);
            assert_true(dlt_ar_value(n, i) >= 1 && dlt_ar_value(n, i) <= 8); /* exact in float for any rank count */
        }
}

static void test_sweep_single(void **state)
{
    char err[256] = "";
    dlt_comm *c;
    dlt_ar_point pts[8];
    int np = 0;
    (void)state;
    assert_int_equal(dlt_comm_single_create(&c, err, sizeof(err)), 0);
    assert_int_equal(dlt_ar_sweep(c, 8, 1024, 2, pts, 8, &np), 0);
    assert_int_equal(np, 8);
    for (int i = 0; i < np; i++) {
        assert_int_equal(pts[i].bytes, (size_t)8 << i);
        assert_int_equal(pts[i].wrong, 0);
        assert_int_equal(pts[i].iters, 2);
        assert_true(pts[i].busbw == 0.0);
    }
    /* A split of one rank is one rank; color < 0 joins none. */
    {
        dlt_comm *s = NULL;
        assert_int_equal(c->ops->split(c, -1, 0, &s), 0);
        assert_null(s);
        assert_int_equal(c->ops->split(c, 3, 0, &s), 0);
        assert_non_null(s);
        assert_int_equal(s->size, 1);
        s->ops->destroy(s);
    }
    c->ops->destroy(c);
}

static void test_straggler_judge(void **state)
{
    double c4[4] = {1.0, 1.02, 1.5, 0.98}, d4[4] = {0.01, 0.01, 0.01, 0.3};
    double c2[2] = {1.0, 1.5}, d2[2] = {0, 0};
    int sc[4], sd[4];
    (void)state;
    /* Rank 2 computes 1.49x the median (1.01); rank 3 waits 0.29 s more for data than the median. */
    assert_int_equal(dlt_straggler_judge(c4, d4, 4, 1.15, sc, sd), 2); /* the longest compute + data */
    assert_int_equal(sc[0] + sc[1] + sc[3], 0);
    assert_int_equal(sc[2], 1);
    assert_int_equal(sd[0] + sd[1] + sd[2], 0);
    assert_int_equal(sd[3], 1);
    /* Two ranks: the median is the mean; 1.5 / 1.25 = 1.2 > 1.15. */
    assert_int_equal(dlt_straggler_judge(c2, d2, 2, 1.15, sc, sd), 1);
    assert_int_equal(sc[0], 0);
    assert_int_equal(sc[1], 1);
    assert_int_equal(dlt_straggler_judge(c2, d2, 2, 1.25, sc, sd), 1);
    assert_int_equal(sc[1], 0);
    /* Near-zero data waits: 3x the median but not a tenth of a step longer: not named. */
    {
        double c[3] = {1, 1, 1}, d[3] = {0.001, 0.001, 0.003};
        dlt_straggler_judge(c, d, 3, 1.15, sc, sd);
        assert_int_equal(sd[2], 0);
    }
    /* One rank: nothing to compare. */
    dlt_straggler_judge(c2, d2, 1, 1.15, sc, sd);
    assert_int_equal(sc[0], 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm_verify),
        cmocka_unit_test(test_allreduce_definitions),
        cmocka_unit_test(test_sweep_single),
        cmocka_unit_test(test_straggler_judge),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
