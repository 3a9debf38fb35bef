/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of step_end: the step is ended once, after the grace and not before, from a thread,
 * and a pending end is carried out (not dropped) by dlt_step_end_finish. */
#include "config.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "plugin/step_end.h"

static int g_calls, g_said_ended, g_said_code;
static uint32_t g_job, g_step;
static double g_when;
static char g_what[256];

static double _mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int _end_ok(uint32_t job, uint32_t step)
{
    g_calls++;
    g_job = job;
    g_step = step;
    g_when = _mono();
    return 0;
}

static int _end_gone(uint32_t job, uint32_t step)
{
    (void)job;
    (void)step;
    g_calls++;
    errno = ESRCH;
    return -1;
}

static void _said(int ended, int code, const char *what)
{
    g_said_ended = ended;
    g_said_code = code;
    snprintf(g_what, sizeof(g_what), "%s", what);
}

static int _reset(void **state)
{
    (void)state;
    g_calls = g_said_ended = g_said_code = 0;
    g_job = g_step = 0;
    g_when = 0;
    g_what[0] = '\0';
    return 0;
}

static void test_ended_after_grace_once(void **state)
{
    dlt_step_end e;
    double t0 = _mono();
    (void)state;
    memset(&e, 0, sizeof(e));
    assert_int_equal(dlt_step_end_after(&e, 1.2, 41, 2, "node n2: task 3 exited with status 3", _end_ok, _said), 0);
    /* a second cause while one is pending: still one end */
    assert_int_equal(dlt_step_end_after(&e, 0.0, 99, 9, "other", _end_ok, _said), 0);
    struct timespec nap = {0, 100000000L};
    nanosleep(&nap, NULL);
    assert_int_equal(g_calls, 0); /* not before the grace */
    dlt_step_end_finish(&e);
    assert_int_equal(g_calls, 1);
    assert_int_equal(g_job, 41);
    assert_int_equal(g_step, 2);
    assert_true(g_when - t0 >= 1.19); /* whole seconds and the fraction both count */
    assert_int_equal(g_said_ended, 1);
    assert_string_equal(g_what, "node n2: task 3 exited with status 3");
    dlt_step_end_finish(&e); /* nothing pending: returns at once */
    assert_int_equal(g_calls, 1);
}

static void test_step_already_over_said(void **state)
{
    dlt_step_end e;
    (void)state;
    memset(&e, 0, sizeof(e));
    assert_int_equal(dlt_step_end_after(&e, 0.0, 7, 0, "node n1: task 0 ...", _end_gone, _said), 0);
    dlt_step_end_finish(&e);
    assert_int_equal(g_calls, 1);
    assert_int_equal(g_said_ended, 0);
    assert_int_equal(g_said_code, ESRCH);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_ended_after_grace_once, _reset),
        cmocka_unit_test_setup(test_step_already_over_said, _reset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
