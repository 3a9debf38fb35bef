/* SPDX-License-Identifier: Apache-2.0 */
/* The op profile's accounting (trainer/backend/op_profile.c) against a stub backend whose timeline
 * is a clock the test sets: each call's class and milliseconds, the calls per step, the step's
 * time outside the timed calls ("other"), the wrapped table running the backend's own ops and put
 * back by detach, a step with more calls than marks, a mark that fails, and the host clock of a
 * backend without a timeline. */
#include "config.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "trainer/backend/op_profile.h"

/* The stub's clock (ms): each op advances it by its cost; the test advances it between calls. */
static struct {
    double now;
    double at[64];
    int marks_fail_at; /* a mark of this slot fails (-1: none) */
    int conv_calls, bn_calls, sync_calls;
} g;

static int _conv_fwd(dlt_backend *be, dlt_op *op, const float *x, float *y)
{
    (void)be, (void)op, (void)x;
    y[0] = 1.f;
    g.conv_calls++;
    g.now += 2.0;
    return 0;
}

static int _bn_fwd_train(dlt_backend *be, dlt_op *op, const float *x, const float *gamma, const float *beta, float *y,
                         float *mean, float *var)
{
    (void)be, (void)op, (void)x, (void)gamma, (void)beta, (void)mean, (void)var;
    y[0] = 2.f;
    g.bn_calls++;
    g.now += 3.0;
    return 0;
}

static int _sgd_step(dlt_backend *be, float *w, float *v, const float *gr, float lr, float mu, float wd, float wdn,
                     float sc)
{
    (void)be, (void)w, (void)v, (void)gr, (void)lr, (void)mu, (void)wd, (void)wdn, (void)sc;
    g.now += 0.25;
    return 0;
}

static int _sync(dlt_backend *be)
{
    (void)be;
    g.sync_calls++;
    return 0;
}

static int _mark(dlt_backend *be, int slot)
{
    if (slot == g.marks_fail_at)
        return dlt_fail(be->err, -EIO, "stub: mark %d failed", slot);
    assert_true(slot >= 0 && slot < 64);
    g.at[slot] = g.now;
    return 0;
}

static int _elapsed(dlt_backend *be, int a, int b, float *ms)
{
    (void)be;
    assert_true(b > a);
    *ms = (float)(g.at[b] - g.at[a]);
    return 0;
}

static dlt_timer_ops g_timer = {64, _mark, _elapsed};
static dlt_backend_ops g_ops;
static dlt_err g_err;
static dlt_backend g_be;

static int _setup(void **state)
{
    (void)state;
    memset(&g, 0, sizeof(g));
    g.marks_fail_at = -1;
    memset(&g_ops, 0, sizeof(g_ops));
    g_ops.name = "stub";
    g_ops.conv_fwd = _conv_fwd;
    g_ops.bn_fwd_train = _bn_fwd_train;
    g_ops.sgd_step = _sgd_step;
    g_ops.sync = _sync;
    memset(&g_be, 0, sizeof(g_be));
    g_be.ops = &g_ops;
    g_be.timer = &g_timer;
    g_timer.slots = 64;
    g_err = (dlt_err)DLT_ERR_INIT;
    g_be.err = &g_err;
    return 0;
}

/* One step: conv (2 ms), gap 0.5, bn (3 ms), gap 0.5, conv (2 ms), sgd (0.25 ms), gap 1. */
static void _step(dlt_op_profile *p)
{
    float x = 0, y = 0;
    assert_int_equal(dlt_op_profile_step_begin(p), 0);
    assert_int_equal(g_be.ops->conv_fwd(&g_be, NULL, &x, &y), 0);
    g.now += 0.5;
    assert_int_equal(g_be.ops->bn_fwd_train(&g_be, NULL, &x, NULL, NULL, &y, NULL, NULL), 0);
    g.now += 0.5;
    assert_int_equal(g_be.ops->conv_fwd(&g_be, NULL, &x, &y), 0);
    assert_int_equal(g_be.ops->sgd_step(&g_be, NULL, NULL, NULL, 0, 0, 0, 0, 1), 0);
    g.now += 1.0;
    assert_int_equal(g_be.ops->sync(&g_be), 0); /* not timed: passes straight through */
    assert_int_equal(dlt_op_profile_step_end(p), 0);
}

static void test_accounting(void **state)
{
    dlt_op_profile *p = calloc(1, sizeof(*p));
    char buf[4096];
    FILE *f;
    (void)state;
    assert_non_null(p);
    dlt_op_profile_attach(p, &g_be);
    assert_ptr_not_equal(g_be.ops, &g_ops);
    assert_null(g_be.ops->fc_fwd); /* an op the backend lacks stays absent */
    assert_ptr_equal(g_be.ops->sync, _sync);
    _step(p);
    _step(p);
    dlt_op_profile_detach(p);
    assert_ptr_equal(g_be.ops, &g_ops);
    assert_int_equal(g.conv_calls, 4);
    assert_int_equal(g.bn_calls, 2);
    assert_int_equal(g.sync_calls, 2);
    assert_int_equal(p->steps, 2);
    assert_true(p->ms[DLT_OPC_CONV_FWD] / 2 > 3.999 && p->ms[DLT_OPC_CONV_FWD] / 2 < 4.001);
    assert_true(p->ms[DLT_OPC_BN] / 2 > 2.999 && p->ms[DLT_OPC_BN] / 2 < 3.001);
    assert_true(p->ms[DLT_OPC_SGD] / 2 > 0.249 && p->ms[DLT_OPC_SGD] / 2 < 0.251);
    assert_int_equal(p->calls[DLT_OPC_CONV_FWD], 4);
    assert_int_equal(p->calls[DLT_OPC_BN], 2);
    assert_int_equal(p->calls[DLT_OPC_SGD], 2);
    assert_int_equal(p->calls[DLT_OPC_ELEMENTWISE], 0);
    assert_true(p->step_ms / 2 > 9.249 && p->step_ms / 2 < 9.251); /* 2 + .5 + 3 + .5 + 2 + .25 + 1 */
    assert_int_equal(p->overflow, 0);
    f = fmemopen(buf, sizeof(buf), "w");
    assert_non_null(f);
    dlt_op_profile_json(p, f);
    fclose(f);
    assert_non_null(strstr(buf, "\"steps\":2,\"step_ms\":9.2500"));
    assert_non_null(strstr(buf, "\"conv_fwd\":{\"ms\":4.0000,\"share\":0.43243,\"calls\":2.00}"));
    assert_non_null(strstr(buf, "\"other\":{\"ms\":2.0000,\"share\":0.21622}")); /* the gaps: .5 + .5 + 1 */
    f = fmemopen(buf, sizeof(buf), "w");
    dlt_op_profile_print(p, f, "on a stub");
    fclose(f);
    assert_non_null(strstr(buf, "(2 steps, each call timed on a stub)"));
    assert_non_null(strstr(buf, "conv forward"));
    assert_null(strstr(buf, "element-wise")); /* a class without calls is left out of the table */
    assert_non_null(strstr(buf, "other                       2.000   21.6%"));
    free(p);
}

/* Marks for 2 calls only (begin, 2 pairs, end = 6 of 7 slots): the third call runs untimed. */
static void test_overflow(void **state)
{
    dlt_op_profile *p = calloc(1, sizeof(*p));
    float x = 0, y = 0;
    (void)state;
    g_timer.slots = 7;
    dlt_op_profile_attach(p, &g_be);
    assert_int_equal(dlt_op_profile_step_begin(p), 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(g_be.ops->conv_fwd(&g_be, NULL, &x, &y), 0);
    assert_int_equal(dlt_op_profile_step_end(p), 0);
    dlt_op_profile_detach(p);
    assert_int_equal(g.conv_calls, 3);
    assert_int_equal(p->calls[DLT_OPC_CONV_FWD], 2);
    assert_int_equal(p->overflow, 1);
    assert_true(p->step_ms > 5.999 && p->step_ms < 6.001); /* the third call counted in the step */
    free(p);
}

/* A mark that fails fails the call with its error; a call outside a step runs untimed. */
static void test_mark_fails(void **state)
{
    dlt_op_profile *p = calloc(1, sizeof(*p));
    float x = 0, y = 0;
    (void)state;
    dlt_op_profile_attach(p, &g_be);
    assert_int_equal(g_be.ops->conv_fwd(&g_be, NULL, &x, &y), 0); /* no step begun */
    assert_int_equal(p->calls[DLT_OPC_CONV_FWD], 0);
    g.marks_fail_at = 1;
    assert_int_equal(dlt_op_profile_step_begin(p), 0);
    assert_int_equal(g_be.ops->conv_fwd(&g_be, NULL, &x, &y), -EIO);
    assert_non_null(strstr(g_err.msg, "stub: mark 1 failed"));
    assert_int_equal(g.conv_calls, 1); /* the op itself did not run */
    dlt_op_profile_detach(p);
    free(p);
}

/* Without a timeline the host clock times the calls: a call that sleeps 20 ms is timed so. */
static int _slow_conv(dlt_backend *be, dlt_op *op, const float *x, float *y)
{
    struct timespec ts = {0, 20000000L};
    (void)be, (void)op, (void)x, (void)y;
    nanosleep(&ts, NULL);
    return 0;
}

static void test_host_clock(void **state)
{
    dlt_op_profile *p = calloc(1, sizeof(*p));
    float x = 0, y = 0;
    (void)state;
    g_be.timer = NULL;
    g_ops.conv_fwd = _slow_conv;
    dlt_op_profile_attach(p, &g_be);
    assert_int_equal(dlt_op_profile_step_begin(p), 0);
    assert_int_equal(g_be.ops->conv_fwd(&g_be, NULL, &x, &y), 0);
    assert_int_equal(dlt_op_profile_step_end(p), 0);
    dlt_op_profile_detach(p);
    assert_true(p->ms[DLT_OPC_CONV_FWD] >= 19.9 && p->ms[DLT_OPC_CONV_FWD] < 500);
    assert_true(p->step_ms >= p->ms[DLT_OPC_CONV_FWD]);
    free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_accounting, _setup),
        cmocka_unit_test_setup(test_overflow, _setup),
        cmocka_unit_test_setup(test_mark_fails, _setup),
        cmocka_unit_test_setup(test_host_clock, _setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
