/* SPDX-License-Identifier: Apache-2.0 */
/* test_sampler: trainer/data/sampler.c against DistributedSampler's contract worked out by hand:
 * each rank's share (floor(size / world) when training, positions r, r + world, ... below size when
 * evaluating), the shares of all ranks disjoint and, exactly, covering every image once; the same
 * order on every rank and in every run for one seed and epoch, another order for another epoch;
 * and the shuffle uniform: every image at every position equally often (chi-square), one fixed
 * point per permutation on average (a shuffle that never leaves an image in place has none). */
#include "config.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "trainer/data/sampler.h"

static void test_refusals(void **state)
{
    dlt_sampler s;
    (void)state;
    assert_int_equal(dlt_sampler_init(&s, 3, 1, 0, 4, 1), -EINVAL); /* fewer images than ranks */
    assert_int_equal(dlt_sampler_init(&s, 8, 1, 4, 4, 1), -EINVAL); /* rank == world */
    assert_int_equal(dlt_sampler_init(&s, 8, 1, -1, 4, 1), -EINVAL);
    assert_int_equal(dlt_sampler_init(&s, 8, 1, 0, 0, 1), -EINVAL);
    assert_int_equal(dlt_sampler_init_exact(&s, 0, 0, 1), -EINVAL);
    assert_int_equal(dlt_sampler_init_exact(&s, 5, 2, 2), -EINVAL);
    assert_int_equal(dlt_sampler_init(&s, 4, 1, 3, 4, 1), 0); /* one image a rank */
    assert_int_equal(dlt_sampler_per_rank(&s), 1);
    dlt_sampler_free(&s);
}

/* All ranks' shares of one epoch: disjoint; with exact, every image once and in order. */
static void _check_shares(int64_t size, int world, int exact, int shuffle, int64_t epoch)
{
    int *seen = calloc((size_t)size, sizeof(int));
    int64_t total = 0;
    for (int r = 0; r < world; r++) {
        dlt_sampler s;
        int64_t n, want;
        if (exact)
            assert_int_equal(dlt_sampler_init_exact(&s, size, r, world), 0);
        else
            assert_int_equal(dlt_sampler_init(&s, size, 42, r, world, shuffle), 0);
        n = dlt_sampler_per_rank(&s);
        want = exact ? (r < size ? (size - 1 - r) / world + 1 : 0) : size / world;
        assert_int_equal(n, want);
        for (int64_t k = 0; k < n; k++) {
            int64_t i = dlt_sampler_index(&s, epoch, k);
            assert_true(i >= 0 && i < size);
            assert_int_equal(seen[i], 0);
            seen[i] = 1;
            if (exact || !shuffle)
                assert_int_equal(i, r + k * world); /* in order */
        }
        total += n;
        dlt_sampler_free(&s);
    }
    assert_int_equal(total, exact ? size : size / world * world);
    free(seen);
}

static void test_shares(void **state)
{
    (void)state;
    for (int64_t size = 1; size <= 23; size++)
        for (int world = 1; world <= 7; world++) {
            _check_shares(size, world, 1, 0, 0);
            if (size >= world) {
                _check_shares(size, world, 0, 1, 3);
                _check_shares(size, world, 0, 0, 3);
            }
        }
}

static void test_same_order_everywhere(void **state)
{
    dlt_sampler a, b;
    int differ = 0;
    (void)state;
    assert_int_equal(dlt_sampler_init(&a, 1000, 7, 1, 4, 1), 0);
    assert_int_equal(dlt_sampler_init(&b, 1000, 7, 1, 4, 1), 0);
    /* one seed and epoch: the same order (asked in another order of epochs) */
    for (int64_t k = 0; k < 250; k++)
        assert_int_equal(dlt_sampler_index(&a, 5, k), dlt_sampler_index(&b, 5, k));
    (void)dlt_sampler_index(&b, 6, 0);
    for (int64_t k = 0; k < 250; k++) {
        int64_t x = dlt_sampler_index(&a, 6, k);
        differ += x != dlt_sampler_index(&b, 5, k);
        assert_int_equal(dlt_sampler_index(&b, 6, k), x);
    }
    assert_true(differ > 200); /* another epoch, another order */
    dlt_sampler_free(&a);
    dlt_sampler_free(&b);
}

static void test_shuffle_uniform(void **state)
{
    enum { N = 6, EPOCHS = 6000 };
    long at[N][N];
    long fixed = 0;
    double chi2 = 0;
    dlt_sampler s;
    (void)state;
    memset(at, 0, sizeof(at));
    assert_int_equal(dlt_sampler_init(&s, N, 12345, 0, 1, 1), 0);
    for (int64_t e = 0; e < EPOCHS; e++)
        for (int64_t k = 0; k < N; k++) {
            int64_t i = dlt_sampler_index(&s, e, k);
            at[i][k]++;
            fixed += i == k;
        }
    dlt_sampler_free(&s);
    /* one fixed point per permutation on average: 6000 +- 3 sd (sd of the mean ~ 1/sqrt(6000)) */
    assert_true(fixed > EPOCHS * 0.96 && fixed < EPOCHS * 1.04);
    for (int i = 0; i < N; i++)
        for (int k = 0; k < N; k++) {
            double e = (double)EPOCHS / N, d = (double)at[i][k] - e;
            chi2 += d * d / e;
        }
    /* 36 cells, 25 degrees of freedom: P(chi2 > 60) < 1e-4 */
    if (chi2 > 60)
        fail_msg("image-by-position counts are not uniform: chi-square %.1f over 25 degrees of freedom", chi2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_shares),
        cmocka_unit_test(test_same_order_everywhere),
        cmocka_unit_test(test_shuffle_uniform),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
