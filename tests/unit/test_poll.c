/* SPDX-License-Identifier: Apache-2.0 */
/* test_poll: the one busy-wait of the GPU-side waits (common/poll.c): it asks until the
 * answer is done (0) or an error (returned as is), keeps asking past the yielding polls into the
 * sleeping ones, and gives up with -ETIMEDOUT once a bound passes, never before. */
#include "config.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/clock.h"
#include "common/poll.h"
#include "common/tunables.h"

typedef struct {
    int calls, done_at, answer; /* answer (1 or < 0) on call done_at; 0 before */
} probe;

static int _probe(void *arg)
{
    probe *p = arg;
    return ++p->calls == p->done_at ? p->answer : 0;
}

static void test_asks_until_done(void **state)
{
    probe p = {0, DLT_POLL_SPINS + 5, 1}; /* into the sleeping polls */
    (void)state;
    assert_int_equal(dlt_poll(_probe, &p, 0), 0);
    assert_int_equal(p.calls, DLT_POLL_SPINS + 5);
    p = (probe){0, 1, 1};
    assert_int_equal(dlt_poll(_probe, &p, 5.0), 0);
    assert_int_equal(p.calls, 1);
}

static void test_error_returned_as_is(void **state)
{
    probe p = {0, 3, -EIO};
    (void)state;
    assert_int_equal(dlt_poll(_probe, &p, 0), -EIO);
    assert_int_equal(p.calls, 3);
}

static void test_times_out_after_the_bound(void **state)
{
    probe p = {0, -1, 1}; /* never done */
    double t0 = dlt_now(), took;
    (void)state;
    assert_int_equal(dlt_poll(_probe, &p, 0.05), -ETIMEDOUT);
    took = dlt_now() - t0;
    assert_true(took >= 0.05 && took < 5.0);
    assert_true(p.calls > 1);
}

int main(void)
{
    /* A poll that never ends (an error taken for "not yet") must fail this test, not hang the suite:
     * every case here ends within seconds. */
    alarm(120);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_asks_until_done),
        cmocka_unit_test(test_error_returned_as_is),
        cmocka_unit_test(test_times_out_after_the_bound),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
