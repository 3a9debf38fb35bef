/* SPDX-License-Identifier: Apache-2.0 */
/* The synthetic source's DistributedSampler order: for 1..8 ranks every image is taken exactly once
 * per epoch across ranks (the remainder dropped), epochs are shuffled differently, and samples are
 * deterministic in (seed, index). */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "trainer/data/synthetic.h"

static void test_shards_cover_epoch(void **state)
{
    const int64_t size = 1000;
    (void)state;
    for (int world = 1; world <= 8; world++) {
        int *seen = calloc((size_t)size, sizeof(int));
        int64_t per = size / world, covered = 0;
        for (int rank = 0; rank < world; rank++) {
            dlt_synthetic s;
            assert_int_equal(dlt_synthetic_init(&s, 16, 10, size, 42, 42, 1, rank, world), 0);
            for (int64_t k = 0; k < per; k++) {
                int64_t idx = dlt_synthetic_index(&s, 3, k);
                assert_true(idx >= 0 && idx < size);
                seen[idx]++;
            }
            dlt_synthetic_free(&s);
        }
        for (int64_t i = 0; i < size; i++) {
            assert_true(seen[i] <= 1);
            covered += seen[i];
        }
        assert_int_equal(covered, per * world); /* all but the dropped remainder (< world) */
        assert_true(size - covered < world);
        free(seen);
    }
}

static void test_epochs_reshuffle_and_determinism(void **state)
{
    dlt_synthetic a, b;
    uint8_t ia[16 * 16 * 3], ib[16 * 16 * 3];
    int32_t la, lb;
    int same = 0;
    (void)state;
    assert_int_equal(dlt_synthetic_init(&a, 16, 10, 500, 7, 7, 1, 0, 1), 0);
    assert_int_equal(dlt_synthetic_init(&b, 16, 10, 500, 7, 7, 1, 0, 1), 0);
    for (int k = 0; k < 500; k++) {
        int64_t e0 = dlt_synthetic_index(&a, 0, k), e1 = dlt_synthetic_index(&b, 1, k);
        same += e0 == e1;
    }
    assert_true(same < 50);
    dlt_synthetic_sample(&a, 123, ia, &la);
    dlt_synthetic_sample(&b, 123, ib, &lb);
    assert_int_equal(la, lb);
    assert_memory_equal(ia, ib, sizeof(ia));
    assert_int_equal(la, 123 % 10);
    /* Refused configurations. */
    dlt_synthetic_free(&a);
    dlt_synthetic_free(&b);
    assert_int_not_equal(dlt_synthetic_init(&a, 16, 10, 3, 7, 7, 1, 0, 4), 0);
    assert_int_not_equal(dlt_synthetic_init(&a, 16, 10, 100, 7, 7, 1, 4, 4), 0);
}

/* The shuffle is a uniform permutation (Fisher-Yates), not a cyclic one (Sattolo's, which moves
 * every image): a uniform permutation of any size has one fixed point on average, so 60 epochs of
 * 1000 images have about 60 (Poisson: 30..95 holds with probability above 0.9999). */
static void test_shuffle_has_fixed_points(void **state)
{
    dlt_synthetic s;
    int fixed = 0;
    (void)state;
    assert_int_equal(dlt_synthetic_init(&s, 16, 10, 1000, 11, 11, 1, 0, 1), 0);
    for (int64_t epoch = 0; epoch < 60; epoch++)
        for (int64_t k = 0; k < 1000; k++)
            fixed += dlt_synthetic_index(&s, epoch, k) == k;
    dlt_synthetic_free(&s);
    if (fixed < 30 || fixed > 95)
        fail_msg("%d fixed points in 60 shuffles of 1000 (a uniform permutation has 60 on average)", fixed);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shuffle_has_fixed_points),
        cmocka_unit_test(test_shards_cover_epoch),
        cmocka_unit_test(test_epochs_reshuffle_and_determinism),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
