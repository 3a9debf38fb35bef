/* SPDX-License-Identifier: Apache-2.0 */
/* common/run_lock.c: the holder line round-trips with its restart count and a line of the
 * earlier five-field form still parses (restart unknown); a requeue (an earlier incarnation) is
 * told from a concurrent step of the same incarnation and from another job. */
#include "config.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/run_lock.h"

static dlt_run_holder _h(const char *job, const char *step, int restart)
{
    dlt_run_holder h;
    memset(&h, 0, sizeof(h));
    snprintf(h.host, sizeof(h.host), "n1");
    h.pid = 42;
    snprintf(h.job, sizeof(h.job), "%s", job);
    snprintf(h.step, sizeof(h.step), "%s", step);
    snprintf(h.since, sizeof(h.since), "2026-01-01T00:00:00Z");
    h.restart = restart;
    return h;
}

static void test_holder_line(void **state)
{
    dlt_run_holder a = _h("77", "3", 2), b;
    char line[256];
    (void)state;
    assert_true(dlt_run_holder_format(&a, line, sizeof(line)) > 0);
    assert_int_equal(dlt_run_holder_parse(line, &b), 0);
    assert_string_equal(b.job, "77");
    assert_string_equal(b.step, "3");
    assert_int_equal(b.restart, 2);
    /* written by the previous version */
    assert_int_equal(dlt_run_holder_parse("host=n1 pid=9 job=77 step=0 since=2026-01-01T00:00:00Z\n", &b), 0);
    assert_int_equal(b.restart, -1);
    assert_int_equal(dlt_run_holder_parse("host=n1 pid=0 job=77 step=0 since=x\n", &b), -EINVAL);
}

static void test_relation(void **state)
{
    dlt_run_holder me = _h("77", "0", 1), h;
    (void)state;
    h = _h("77", "0", 0);
    assert_int_equal(dlt_run_holder_relate(&me, &h), DLT_HOLDER_EARLIER); /* requeued once */
    h = _h("77", "-", -1);
    assert_int_equal(dlt_run_holder_relate(&me, &h), DLT_HOLDER_EARLIER); /* an older holder line */
    h = _h("77", "1", 1);
    assert_int_equal(dlt_run_holder_relate(&me, &h), DLT_HOLDER_SAME_JOB); /* a concurrent step */
    h = _h("77", "0", 2);
    assert_int_equal(dlt_run_holder_relate(&me, &h), DLT_HOLDER_SAME_JOB); /* a later incarnation */
    h = _h("78", "0", 0);
    assert_int_equal(dlt_run_holder_relate(&me, &h), DLT_HOLDER_OTHER);
    me = _h("-", "-", 0);
    h = _h("-", "-", 0);
    assert_int_equal(dlt_run_holder_relate(&me, &h), DLT_HOLDER_OTHER); /* outside Slurm: no waiting */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_holder_line),
        cmocka_unit_test(test_relation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
