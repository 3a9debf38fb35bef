/* SPDX-License-Identifier: Apache-2.0 */
/* test_health: the pure parts of dltrain check and the straggler detection: the GEMM result check
 * (exact product accepted, one wrong entry found with its exact value), the all-reduce sweep's
 * exact sums and busbw definition, and the straggler verdict. */
#include "config.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/clock.h"
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
    dlt_err err = DLT_ERR_INIT;
    dlt_comm *c;
    dlt_ar_point pts[8];
    int np = 0;
    (void)state;
    assert_int_equal(dlt_comm_single_create(&c, dlt_err_fresh(&err)), 0);
    assert_int_equal(dlt_ar_sweep(c, 8, 1024, 2, pts, 8, &np, NULL), 0);
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

static void _count_point(const dlt_ar_point *p, double elapsed, void *arg)
{
    int *n = arg;
    assert_true(p->bytes > 0 && elapsed >= 0);
    (*n)++;
}

/* The budget: a generous one changes nothing; one already spent stops after the first size,
 * saying it cut; the callback sees every size measured. */
static void test_sweep_budget(void **state)
{
    dlt_err err = DLT_ERR_INIT;
    dlt_comm *c;
    dlt_ar_point pts[8];
    int np = 0, seen = 0;
    dlt_ar_budget wide = {dlt_now(), 1e9, _count_point, &seen, 0, 0};
    dlt_ar_budget spent = {dlt_now() - 10, 5, _count_point, &seen, 0, 0};
    (void)state;
    assert_int_equal(dlt_comm_single_create(&c, dlt_err_fresh(&err)), 0);
    assert_int_equal(dlt_ar_sweep(c, 8, 1024, 2, pts, 8, &np, &wide), 0);
    assert_int_equal(np, 8);
    assert_int_equal(seen, 8);
    assert_int_equal(wide.cut, 0);
    assert_true(wide.elapsed >= 0 && wide.elapsed < 60);
    seen = 0;
    assert_int_equal(dlt_ar_sweep(c, 8, 1024, 2, pts, 8, &np, &spent), 0);
    assert_int_equal(np, 1);
    assert_int_equal(seen, 1);
    assert_int_equal(spent.cut, 1);
    assert_true(spent.elapsed >= 10);
    /* The last size is never "cut": nothing was left out. */
    spent.cut = 0;
    assert_int_equal(dlt_ar_sweep(c, 1024, 1024, 2, pts, 8, &np, &spent), 0);
    assert_int_equal(np, 1);
    assert_int_equal(spent.cut, 0);
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

/* ---- dltrain check's group points: a sub-communicator whose collective fails is discarded
 * (NCCL: aborted, no wait for the lost peer), a healthy one destroyed. */
static char g_calls[16];
static int g_sub_fails;

static void _call(char c)
{
    size_t n = strlen(g_calls);
    if (n + 1 < sizeof(g_calls))
        g_calls[n] = c;
}

static int _sub_allreduce(dlt_comm *c, void *buf, size_t count, dlt_dtype type)
{
    if (g_sub_fails) {
        return dlt_fail(c->err, -EIO, "NCCL failed while the GPU worked (a peer lost?)");
    }
    for (size_t i = 0; i < count; i++) /* two ranks, the twin's values: rank 1's are rank 0's + 1 */
        if (type == DLT_DTYPE_F32)
            ((float *)buf)[i] = ((float *)buf)[i] + dlt_ar_value(1, i);
    return 0;
}

static int _sub_none(dlt_comm *c)
{
    (void)c;
    return 0;
}

static void _sub_destroy(dlt_comm *c)
{
    _call('D');
    free(c);
}

static void _sub_discard(dlt_comm *c)
{
    _call('X');
    free(c);
}

/* Every rank of the double says what this one says (the twin; the world's other ranks). */
static int _same_everywhere(dlt_comm *c, const void *mine, size_t bytes, void *all)
{
    for (int k = 0; k < c->size; k++)
        memcpy((char *)all + (size_t)k * bytes, mine, bytes);
    return 0;
}

static const dlt_comm_ops g_sub_ops = {"sub",        _sub_allreduce,   NULL, _sub_none, _sub_destroy, NULL, NULL, NULL,
                                       _sub_discard, _same_everywhere, NULL, NULL,      NULL};

static int _world_split(dlt_comm *c, int color, int key, dlt_comm **out)
{
    dlt_comm *s = calloc(1, sizeof(*s));
    (void)color, (void)key;
    if (!s)
        return -ENOMEM;
    s->ops = &g_sub_ops;
    s->rank = 0;
    s->size = 2;
    s->err = c->err;
    *out = s;
    return 0;
}

static int _world_allreduce(dlt_comm *c, void *buf, size_t count, dlt_dtype type)
{
    (void)c, (void)buf, (void)count, (void)type;
    return 0;
}

static const dlt_comm_ops g_world_ops = {"world", _world_allreduce, NULL, _sub_none, NULL, NULL, NULL, _world_split,
                                         NULL,    _same_everywhere, NULL, NULL,      NULL};

static void test_group_point_discards_failed_sub(void **state)
{
    dlt_err err = DLT_ERR_INIT;
    dlt_comm world = {.ops = &g_world_ops, .rank = 0, .size = 4, .err = &err};
    double vec[4];
    (void)state;
    g_calls[0] = 0;
    g_sub_fails = 0;
    assert_int_equal(dlt_ar_group_point(&world, 0, 0, 1024, 2, vec, 1, 4), 0);
    assert_string_equal(g_calls, "D");
    assert_true(vec[1] > 0);
    assert_true(vec[0] == 0 && vec[2] == 0 && vec[3] == 0); /* the group's figure in its slot alone */
    memset(g_calls, 0, sizeof(g_calls));
    g_sub_fails = 1;
    assert_int_equal(dlt_ar_group_point(&world, 0, 0, 1024, 2, vec, 1, 4), -EIO);
    if (strcmp(g_calls, "X") != 0)
        fail_msg("a sub-communicator whose all-reduce failed was torn down by \"%s\" (D: destroy, which waits for a "
                 "lost peer; X: discard)",
                 g_calls);
    assert_non_null(strstr(err.msg, "peer lost"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm_verify),     cmocka_unit_test(test_allreduce_definitions),
        cmocka_unit_test(test_sweep_single),    cmocka_unit_test(test_sweep_budget),
        cmocka_unit_test(test_straggler_judge), cmocka_unit_test(test_group_point_discards_failed_sub),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
