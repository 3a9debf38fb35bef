/* SPDX-License-Identifier: Apache-2.0 */
/* Every op of the CPU backend against a naive double-precision reference written here from the
 * definitions, on random inputs of several shapes, strides and paddings. Outputs are poisoned
 * (NaN) before each call so an op that skips part of its output fails. */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/rng.h"
#include "trainer/backend/backend.h"

static dlt_rng g_rng;

static float *_rand(size_t n, float scale)
{
    float *p = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        p[i] = scale * (2.f * dlt_rng_uniform(&g_rng) - 1.f);
    return p;
}

static float *_poisoned(size_t n)
{
    float *p = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        p[i] = NAN;
    return p;
}

/* max |got - ref| / max(max |ref|, 1e-6): relative to the output's scale. */
static double _rel_err(const float *got, const double *ref, size_t n)
{
    double num = 0, den = 1e-6;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - ref[i]);
        if (isnan(got[i]))
            return INFINITY;
        num = d > num ? d : num;
        den = fabs(ref[i]) > den ? fabs(ref[i]) : den;
    }
    return num / den;
}

/* n activations of be's type (float, or bf16 under --precision bf16), poisoned with NaN. */
static float *_act(dlt_backend *be, size_t n)
{
    float *nan = _poisoned(n), *a = malloc(n * be->act_size);
    assert_int_equal(be->ops->act_from_float(be, a, nan, n), 0);
    free(nan);
    return a;
}

/* x in be's activation type. */
static float *_to_act(dlt_backend *be, const float *x, size_t n)
{
    float *a = malloc(n * be->act_size);
    assert_int_equal(be->ops->act_from_float(be, a, x, n), 0);
    return a;
}

#define X(n, h, w, c, C, H, W) ((((size_t)(n) * (H) + (h)) * (W) + (w)) * (C) + (c))

static void _conv_case(dlt_backend *be, dlt_conv_shape s, double tol)
{
    dlt_op *op = NULL;
    size_t xn = (size_t)s.n * s.h * s.w * s.c, wn = (size_t)s.k * s.c * s.r * s.s, yn;
    float *x, *w, *y, *dy, *dx, *dw;
    double *ry, *rdx, *rdw;
    char msg[160];
    s.oh = dlt_out_size(s.h, s.r, s.stride, s.pad);
    s.ow = dlt_out_size(s.w, s.s, s.stride, s.pad);
    yn = (size_t)s.n * s.oh * s.ow * s.k;
    snprintf(msg, sizeof(msg), "conv n%d c%d %dx%d k%d %dx%d/%d pad %d", s.n, s.c, s.h, s.w, s.k, s.r, s.s, s.stride,
             s.pad);
    assert_int_equal(be->ops->conv_plan(be, &s, &op), 0);
    x = _rand(xn, 1.f);
    w = _rand(wn, 0.5f);
    dy = _rand(yn, 1.f);
    y = _poisoned(yn);
    dx = _poisoned(xn);
    dw = _poisoned(wn);
    ry = calloc(yn, sizeof(double));
    rdx = calloc(xn, sizeof(double));
    rdw = calloc(wn, sizeof(double));
    for (int n = 0; n < s.n; n++)
        for (int oh = 0; oh < s.oh; oh++)
            for (int ow = 0; ow < s.ow; ow++)
                for (int k = 0; k < s.k; k++)
                    for (int c = 0; c < s.c; c++)
                        for (int r = 0; r < s.r; r++)
                            for (int q = 0; q < s.s; q++) {
                                int h = oh * s.stride - s.pad + r, ww = ow * s.stride - s.pad + q;
                                size_t wi = (((size_t)k * s.r + r) * s.s + q) * s.c + c; /* KRSC */
                                size_t yi = X(n, oh, ow, k, s.k, s.oh, s.ow);
                                if (h < 0 || h >= s.h || ww < 0 || ww >= s.w)
                                    continue;
                                ry[yi] += (double)x[X(n, h, ww, c, s.c, s.h, s.w)] * w[wi];
                                rdx[X(n, h, ww, c, s.c, s.h, s.w)] += (double)dy[yi] * w[wi];
                                rdw[wi] += (double)x[X(n, h, ww, c, s.c, s.h, s.w)] * dy[yi];
                            }
    assert_int_equal(be->ops->conv_bind_weights(be, op, w), 0);
    {
        /* activations in the backend's type (bf16 ones rounded there), weights float */
        float *ax = _to_act(be, x, xn), *ady = _to_act(be, dy, yn), *ay = _act(be, yn), *adx = _act(be, xn);
        assert_int_equal(be->ops->conv_fwd(be, op, ax, ay), 0);
        assert_int_equal(be->ops->conv_bwd_weights(be, op, ax, ady, dw), 0);
        assert_int_equal(be->ops->conv_bwd_data(be, op, ady, adx), 0);
        assert_int_equal(be->ops->act_to_float(be, y, ay, yn), 0);
        assert_int_equal(be->ops->act_to_float(be, dx, adx, xn), 0);
        free(ax), free(ady), free(ay), free(adx);
    }
    if (_rel_err(y, ry, yn) > tol)
        fail_msg("%s forward: relative error %g > %g", msg, _rel_err(y, ry, yn), tol);
    if (_rel_err(dx, rdx, xn) > tol)
        fail_msg("%s backward data: relative error %g > %g", msg, _rel_err(dx, rdx, xn), tol);
    if (_rel_err(dw, rdw, wn) > tol)
        fail_msg("%s backward weights: relative error %g > %g", msg, _rel_err(dw, rdw, wn), tol);
    be->ops->op_destroy(be, op);
    free(x), free(w), free(y), free(dy), free(dx), free(dw), free(ry), free(rdx), free(rdw);
}

static const dlt_conv_shape g_conv_cases[] = {
    {2, 3, 9, 7, 5, 3, 3, 1, 1, 0, 0},
    {2, 8, 10, 10, 16, 3, 3, 2, 1, 0, 0},
    {2, 16, 7, 7, 8, 1, 1, 2, 0, 0, 0},
    {1, 3, 15, 15, 4, 7, 7, 2, 3, 0, 0},
    {3, 32, 6, 6, 64, 1, 1, 1, 0, 0, 0},
    {2, 5, 8, 8, 7, 3, 3, 1, 0, 0, 0},
    /* 3x3, channels in blocks of 8, outputs of 56x56 or more: fp32 staged through oneDNN's blocked
     * layout; then one below 56x56 (NHWC) */
    {1, 16, 56, 56, 8, 3, 3, 1, 1, 0, 0},
    {1, 8, 113, 113, 16, 3, 3, 2, 1, 0, 0},
    {2, 16, 9, 9, 32, 3, 3, 1, 1, 0, 0},
};

static void test_conv_fp32(void **state)
{
    dlt_backend *be;
    dlt_err err = DLT_ERR_INIT;
    (void)state;
    assert_int_equal(dlt_backend_cpu_create(&be, DLT_PREC_FP32, dlt_err_fresh(&err)), 0);
    for (size_t i = 0; i < sizeof(g_conv_cases) / sizeof(g_conv_cases[0]); i++)
        _conv_case(be, g_conv_cases[i], 1e-4);
    be->ops->destroy(be);
}

static void test_conv_bf16(void **state)
{
    dlt_backend *be;
    dlt_err err = DLT_ERR_INIT;
    (void)state;
    if (!dlt_backend_cpu_has_bf16()) {
        assert_int_not_equal(dlt_backend_cpu_create(&be, DLT_PREC_BF16, dlt_err_fresh(&err)), 0);
        assert_non_null(strstr(err.msg, "AVX512-BF16"));
        return; /* refusal checked: no bf16 kernels on this CPU */
    }
    assert_int_equal(dlt_backend_cpu_create(&be, DLT_PREC_BF16, dlt_err_fresh(&err)), 0);
    for (size_t i = 0; i < sizeof(g_conv_cases) / sizeof(g_conv_cases[0]); i++)
        _conv_case(be, g_conv_cases[i], 1.5e-2);
    be->ops->destroy(be);
}

static void test_batchnorm(void **state)
{
    dlt_backend *be;
    dlt_op *op;
    dlt_err err = DLT_ERR_INIT;
    const dlt_act_shape s = {4, 6, 5, 3};
    const size_t n = (size_t)s.n * s.h * s.w * s.c, per = n / s.c;
    const float eps = 1e-5f;
    float *x, *g, *b, *y, *mean, *var, *dy, *dx, *dg, *db, *yi;
    double *ry, *rdx, rdg[6], rdb[6], rm[6], rv[6], *ryi;
    (void)state;
    assert_int_equal(dlt_backend_cpu_create(&be, DLT_PREC_FP32, dlt_err_fresh(&err)), 0);
    assert_int_equal(be->ops->bn_plan(be, &s, eps, &op), 0);
    x = _rand(n, 2.f);
    g = _rand(s.c, 1.f);
    b = _rand(s.c, 1.f);
    dy = _rand(n, 1.f);
    y = _poisoned(n), dx = _poisoned(n), yi = _poisoned(n);
    mean = _poisoned(s.c), var = _poisoned(s.c), dg = _poisoned(s.c), db = _poisoned(s.c);
    ry = calloc(n, sizeof(double)), rdx = calloc(n, sizeof(double)), ryi = calloc(n, sizeof(double));
    for (int c = 0; c < s.c; c++) {
        double m = 0, v = 0, sdy = 0, sdyx = 0, sd;
        for (size_t i = 0; i < per; i++)
            m += x[i * s.c + c];
        m /= per;
        for (size_t i = 0; i < per; i++)
            v += (x[i * s.c + c] - m) * (x[i * s.c + c] - m);
        v /= per;
        sd = sqrt(v + eps);
        rm[c] = m, rv[c] = v;
        for (size_t i = 0; i < per; i++) {
            double xh = (x[i * s.c + c] - m) / sd;
            ry[i * s.c + c] = g[c] * xh + b[c];
            sdy += dy[i * s.c + c];
            sdyx += dy[i * s.c + c] * xh;
        }
        rdg[c] = sdyx, rdb[c] = sdy;
        for (size_t i = 0; i < per; i++) {
            double xh = (x[i * s.c + c] - m) / sd;
            rdx[i * s.c + c] = g[c] / sd * (dy[i * s.c + c] - sdy / per - xh * sdyx / per);
            /* inference with made-up running stats: mean 0.5, var 2 */
            ryi[i * s.c + c] = g[c] * (x[i * s.c + c] - 0.5) / sqrt(2.0 + eps) + b[c];
        }
    }
    assert_int_equal(be->ops->bn_fwd_train(be, op, x, g, b, y, mean, var), 0);
    assert_int_equal(be->ops->bn_bwd(be, op, x, dy, g, b, mean, var, dx, dg, db), 0);
    assert_true(_rel_err(y, ry, n) < 1e-4);
    assert_true(_rel_err(mean, rm, (size_t)s.c) < 1e-4);
    assert_true(_rel_err(var, rv, (size_t)s.c) < 1e-4);
    assert_true(_rel_err(dx, rdx, n) < 1e-4);
    assert_true(_rel_err(dg, rdg, (size_t)s.c) < 1e-4);
    assert_true(_rel_err(db, rdb, (size_t)s.c) < 1e-4);
    for (int c = 0; c < s.c; c++)
        mean[c] = 0.5f, var[c] = 2.f;
    assert_int_equal(be->ops->bn_fwd_infer(be, op, x, g, b, mean, var, yi), 0);
    assert_true(_rel_err(yi, ryi, n) < 1e-4);
    be->ops->op_destroy(be, op);
    be->ops->destroy(be);
    free(x), free(g), free(b), free(y), free(mean), free(var), free(dy), free(dx), free(dg), free(db), free(yi);
    free(ry), free(rdx), free(ryi);
}

static void test_maxpool(void **state)
{
    dlt_backend *be;
    dlt_op *op;
    dlt_err err = DLT_ERR_INIT;
    const dlt_act_shape s = {2, 5, 9, 8};
    int oh = dlt_out_size(s.h, 3, 2, 1), ow = dlt_out_size(s.w, 3, 2, 1);
    size_t xn = (size_t)s.n * s.h * s.w * s.c, yn = (size_t)s.n * oh * ow * s.c;
    float *x = _rand(xn, 1.f), *dy = _rand(yn, 1.f), *y = _poisoned(yn), *dx = _poisoned(xn);
    double *ry = calloc(yn, sizeof(double)), *rdx = calloc(xn, sizeof(double));
    (void)state;
    for (int n = 0; n < s.n; n++)
        for (int i = 0; i < oh; i++)
            for (int j = 0; j < ow; j++)
                for (int c = 0; c < s.c; c++) {
                    double best = -INFINITY;
                    size_t arg = 0;
                    for (int r = 0; r < 3; r++)
                        for (int q = 0; q < 3; q++) {
                            int h = i * 2 - 1 + r, w = j * 2 - 1 + q;
                            if (h < 0 || w < 0 || h >= s.h || w >= s.w)
                                continue; /* padding never wins */
                            if (x[X(n, h, w, c, s.c, s.h, s.w)] > best)
                                best = x[X(n, h, w, c, s.c, s.h, s.w)], arg = X(n, h, w, c, s.c, s.h, s.w);
                        }
                    ry[X(n, i, j, c, s.c, oh, ow)] = best;
                    rdx[arg] += dy[X(n, i, j, c, s.c, oh, ow)];
                }
    assert_int_equal(dlt_backend_cpu_create(&be, DLT_PREC_FP32, dlt_err_fresh(&err)), 0);
    assert_int_equal(be->ops->maxpool_plan(be, &s, 3, 2, 1, &op), 0);
    assert_int_equal(be->ops->maxpool_fwd(be, op, x, y), 0);
    assert_int_equal(be->ops->maxpool_bwd(be, op, dy, dx), 0);
    assert_true(_rel_err(y, ry, yn) < 1e-6);
    assert_true(_rel_err(dx, rdx, xn) < 1e-6);
    be->ops->op_destroy(be, op);
    be->ops->destroy(be);
    free(x), free(dy), free(y), free(dx), free(ry), free(rdx);
}

static void test_avgpool_gemm_eltwise(void **state)
{
    dlt_backend *be;
    dlt_err err = DLT_ERR_INIT;
    const dlt_act_shape s = {3, 7, 4, 5};
    size_t xn = (size_t)s.n * s.h * s.w * s.c, yn = (size_t)s.n * s.c;
    float *x = _rand(xn, 1.f), *dy = _rand(yn, 1.f), *y = _poisoned(yn), *dx = _poisoned(xn);
    double *ry = calloc(yn, sizeof(double)), *rdx = calloc(xn, sizeof(double));
    const int m = 5, n = 7, k = 9;
    float *a = _rand((size_t)m * k, 1.f), *b = _rand((size_t)k * n, 1.f), *cc = _poisoned((size_t)m * n);
    double rc[35];
    float *e = _rand(100, 1.f), *add = _rand(100, 1.f), *dz = _poisoned(100), *up = _rand(100, 1.f);
    double re[100], rdz[100];
    (void)state;
    for (int i = 0; i < s.n; i++)
        for (int p = 0; p < s.h * s.w; p++)
            for (int c = 0; c < s.c; c++) {
                ry[(size_t)i * s.c + c] += x[((size_t)i * s.h * s.w + p) * s.c + c] / (double)(s.h * s.w);
                rdx[((size_t)i * s.h * s.w + p) * s.c + c] = dy[(size_t)i * s.c + c] / (double)(s.h * s.w);
            }
    assert_int_equal(dlt_backend_cpu_create(&be, DLT_PREC_FP32, dlt_err_fresh(&err)), 0);
    assert_int_equal(be->ops->avgpool_fwd(be, &s, x, y), 0);
    assert_int_equal(be->ops->avgpool_bwd(be, &s, dy, dx), 0);
    assert_true(_rel_err(y, ry, yn) < 1e-6);
    assert_true(_rel_err(dx, rdx, xn) < 1e-6);
    /* C = A B^T with A [m,k], B stored [n,k] (the FC layer's form), beta = 0 over a poisoned C. */
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            rc[i * n + j] = 0;
            for (int q = 0; q < k; q++)
                rc[i * n + j] += (double)a[i * k + q] * b[j * k + q];
        }
    for (int i = 0; i < m * n; i++)
        cc[i] = 0.f; /* sgemm with beta = 0 may read C: zero, not NaN */
    assert_int_equal(dlt_backend_cpu_gemm(be, 0, 1, m, n, k, 1.f, a, k, b, k, 0.f, cc, n), 0);
    assert_true(_rel_err(cc, rc, (size_t)m * n) < 1e-5);
    for (int i = 0; i < 100; i++) {
        double v = (double)e[i] + add[i];
        re[i] = v > 0 ? v : 0;
        rdz[i] = re[i] > 0 ? up[i] : 0;
    }
    assert_int_equal(be->ops->add_relu(be, e, add, 100), 0);
    assert_true(_rel_err(e, re, 100) < 1e-7);
    assert_int_equal(be->ops->relu_bwd(be, e, up, dz, 100), 0);
    assert_true(_rel_err(dz, rdz, 100) < 1e-7);
    be->ops->destroy(be);
    free(x), free(dy), free(y), free(dx), free(ry), free(rdx), free(a), free(b), free(cc), free(e), free(add), free(dz),
        free(up);
}

static void test_softmax_xent(void **state)
{
    dlt_backend *be;
    dlt_err err = DLT_ERR_INIT;
    const int n = 6, k = 9;
    const float eps = 0.1f;
    float *z = _rand((size_t)n * k, 4.f), *dz = _poisoned((size_t)n * k);
    int32_t labels[6] = {0, 3, 8, 2, 2, 5};
    double rdz[54], rloss = 0, loss = 0;
    int r1 = 0, r5 = 0;
    double res[DLT_RES_COUNT];
    (void)state;
    for (int i = 0; i < n; i++) {
        double mx = -INFINITY, s = 0;
        int rank = 0;
        for (int j = 0; j < k; j++)
            mx = fmax(mx, z[i * k + j]);
        for (int j = 0; j < k; j++)
            s += exp(z[i * k + j] - mx);
        for (int j = 0; j < k; j++) {
            double p = exp(z[i * k + j] - mx) / s, t = (j == labels[i] ? 1.0 - (double)eps : 0.0) + (double)eps / k;
            rloss -= t * log(p);
            rdz[i * k + j] = (p - t) / n;
            rank += z[i * k + j] > z[i * k + labels[i]];
        }
        r1 += rank < 1;
        r5 += rank < 5;
    }
    assert_int_equal(dlt_backend_cpu_create(&be, DLT_PREC_FP32, dlt_err_fresh(&err)), 0);
    assert_int_equal(be->ops->results_reset(be), 0);
    assert_int_equal(be->ops->softmax_xent(be, z, labels, n, k, eps, 1.f, dz), 0);
    assert_int_equal(be->ops->results_read(be, res), 0);
    loss = res[DLT_RES_LOSS];
    if (fabs(loss - rloss) > 1e-9 * fabs(rloss) + 1e-9)
        fail_msg("loss %.17g, reference %.17g", loss, rloss);
    assert_true(_rel_err(dz, rdz, (size_t)n * k) < 1e-6);
    assert_true(res[DLT_RES_TOP1] == r1);
    assert_true(res[DLT_RES_TOP5] == r5);
    assert_true(res[DLT_RES_BAD_LABELS] == 0);
    assert_false(dlt_results_skip(res));
    /* A loss scale multiplies the gradient only (fp16 loss scaling), never the reported loss. */
    for (int i = 0; i < n * k; i++)
        rdz[i] *= 1024.0;
    assert_int_equal(be->ops->results_reset(be), 0);
    assert_int_equal(be->ops->softmax_xent(be, z, labels, n, k, eps, 1024.f, dz), 0);
    assert_int_equal(be->ops->results_read(be, res), 0);
    assert_true(fabs(res[DLT_RES_LOSS] - rloss) <= 1e-9 * fabs(rloss) + 1e-9);
    assert_true(_rel_err(dz, rdz, (size_t)n * k) < 1e-6);
    /* Batches add up until the next reset (a validation pass reads once). */
    assert_int_equal(be->ops->softmax_xent(be, z, labels, n, k, eps, 1.f, NULL), 0);
    assert_int_equal(be->ops->results_read(be, res), 0);
    assert_true(fabs(res[DLT_RES_LOSS] - 2 * rloss) <= 1e-9 * fabs(rloss) + 1e-9);
    assert_true(res[DLT_RES_TOP1] == 2 * r1);
    labels[0] = 9; /* out of range: counted, its gradient zero, and the step is void */
    assert_int_equal(be->ops->results_reset(be), 0);
    assert_int_equal(be->ops->softmax_xent(be, z, labels, n, k, eps, 1.f, dz), 0);
    assert_int_equal(be->ops->results_read(be, res), 0);
    assert_true(res[DLT_RES_BAD_LABELS] == 1);
    assert_true(dlt_results_skip(res));
    for (int j = 0; j < k; j++)
        assert_true(dz[j] == 0.f);
    /* The top-5 boundary, exactly: the label's logit the 5th highest is a hit, the 6th is not (ties
     * go to the lower class); a row with a NaN anywhere is a miss, never a hit, and counted. */
    {
        float zz[3 * 9];
        int32_t ll[3] = {4, 5, 0};
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 9; j++)
                zz[i * 9 + j] = (float)(9 - j); /* class j is the (j+1)-th highest */
        zz[2 * 9 + 7] = NAN;                    /* row 2: its label is the highest, but a NaN is there */
        assert_int_equal(be->ops->results_reset(be), 0);
        assert_int_equal(be->ops->softmax_xent(be, zz, ll, 3, 9, 0.f, 1.f, NULL), 0);
        assert_int_equal(be->ops->results_read(be, res), 0);
        assert_true(res[DLT_RES_TOP5] == 1); /* row 0 only: 5th; row 1 is 6th; row 2 not finite */
        assert_true(res[DLT_RES_TOP1] == 0);
        assert_true(res[DLT_RES_NONFINITE_ROWS] == 1);
    }
    be->ops->destroy(be);
    free(z), free(dz);
}

/* The flat optimizer: one step over three segments (the middle one without weight decay) against
 * a double-precision loop, and the steps results void leave every bit as it was. */
static void test_sgd_and_input(void **state)
{
    dlt_backend *be;
    dlt_err err = DLT_ERR_INIT;
    float *w = _rand(50, 1.f), *v = _rand(50, 0.1f), *g = _rand(50, 1.f), w0[50], v0[50];
    const dlt_param_segment segs[3] = {{0, 20, 0}, {20, 7, 1}, {27, 23, 0}};
    double rw[50], rv[50];
    uint8_t px[12] = {0, 128, 255, 10, 20, 30, 40, 50, 60, 70, 80, 90};
    float out[12];
    const float mean[3] = {1, 2, 3}, inv[3] = {0.5f, 0.25f, 2.f};
    const dlt_param_segment gap[2] = {{0, 20, 0}, {21, 29, 0}};
    (void)state;
    for (int i = 0; i < 50; i++) {
        double d = g[i] * 0.5 + (i >= 20 && i < 27 ? 1e-2 : 1e-4) * w[i];
        rv[i] = 0.9 * v[i] + d;
        rw[i] = w[i] - 0.1 * rv[i];
    }
    assert_int_equal(dlt_backend_cpu_create(&be, DLT_PREC_FP32, dlt_err_fresh(&err)), 0);
    assert_int_not_equal(be->ops->sgd_plan(be, w, 50, gap, 2), 0); /* segments must tile the buffer */
    assert_int_equal(be->ops->sgd_plan(be, w, 50, segs, 3), 0);
    assert_int_equal(be->ops->results_reset(be), 0);
    assert_int_equal(be->ops->sgd_step(be, w, v, g, 0.1f, 0.9f, 1e-4f, 1e-2f, 0.5f), 0);
    assert_true(_rel_err(w, rw, 50) < 1e-6);
    assert_true(_rel_err(v, rv, 50) < 1e-6);
    /* Void steps: an overflow, a rank without its batch, a non-finite loss. */
    memcpy(w0, w, sizeof(w0));
    memcpy(v0, v, sizeof(v0));
    for (int slot = 0; slot < 3; slot++) {
        int which[3] = {DLT_RES_NONFINITE, DLT_RES_INPUT_FAILED, DLT_RES_LOSS};
        assert_int_equal(be->ops->results_reset(be), 0);
        assert_int_equal(be->ops->results_put(be, which[slot], slot == 2 ? NAN : 1.0), 0);
        assert_int_equal(be->ops->sgd_step(be, w, v, g, 0.1f, 0.9f, 1e-4f, 1e-2f, 0.5f), 0);
        assert_memory_equal(w, w0, sizeof(w0));
        assert_memory_equal(v, v0, sizeof(v0));
    }
    assert_int_not_equal(be->ops->results_put(be, DLT_RES_COUNT, 1.0), 0);
    /* Staged batches are consumed in order; none staged, or the wrong size, is refused. */
    assert_int_not_equal(be->ops->normalize_input(be, out, 4, mean, inv), 0);
    assert_int_equal(be->ops->input_stage(be, px, 4), 0);
    assert_int_equal(be->ops->input_stage(be, px + 6, 2), 0);
    assert_int_not_equal(be->ops->input_stage(be, px, 4), 0); /* at most DLT_INPUT_STAGED */
    assert_int_equal(be->ops->normalize_input(be, out, 4, mean, inv), 0);
    for (int i = 0; i < 12; i++)
        assert_true(fabsf(out[i] - ((float)px[i] - mean[i % 3]) * inv[i % 3]) < 1e-6f);
    assert_int_not_equal(be->ops->normalize_input(be, out, 4, mean, inv), 0); /* the next is 2 pixels */
    be->ops->destroy(be);
    free(w), free(v), free(g);
}

/* The fully connected layer, the running-statistics update and the finiteness check: the ops
 * the network used to do in its own loops, now in the table so a GPU backend can run them. */
static void test_fc_stats_finite(void **state)
{
    enum { N = 5, C = 7, K = 4 };
    dlt_backend *be;
    dlt_err err = DLT_ERR_INIT;
    float *x = _rand(N * C, 1.f), *w = _rand(K * C, 1.f), *b = _rand(K, 1.f), *dy = _rand(N * K, 1.f);
    float *y = _poisoned(N * K), *dx = _poisoned(N * C), *dw = _poisoned(K * C), *db = _poisoned(K);
    double ry[N * K], rdx[N * C], rdw[K * C], rdb[K];
    float rm[3] = {1, 2, 3}, rv[3] = {4, 5, 6}, bm[3] = {0.5f, -1, 2}, bv[3] = {1, 2, 0.25f};
    double res[DLT_RES_COUNT];
    (void)state;
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++) {
            double a = b[k];
            for (int c = 0; c < C; c++)
                a += (double)x[n * C + c] * w[k * C + c];
            ry[n * K + k] = a;
        }
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) {
            double a = 0;
            for (int k = 0; k < K; k++)
                a += (double)dy[n * K + k] * w[k * C + c];
            rdx[n * C + c] = a;
        }
    for (int k = 0; k < K; k++) {
        rdb[k] = 0;
        for (int n = 0; n < N; n++)
            rdb[k] += dy[n * K + k];
        for (int c = 0; c < C; c++) {
            double a = 0;
            for (int n = 0; n < N; n++)
                a += (double)dy[n * K + k] * x[n * C + c];
            rdw[k * C + c] = a;
        }
    }
    assert_int_equal(dlt_backend_cpu_create(&be, DLT_PREC_FP32, dlt_err_fresh(&err)), 0);
    assert_int_equal(be->ops->fc_fwd(be, x, w, b, y, N, C, K), 0);
    assert_true(_rel_err(y, ry, N * K) < 1e-6);
    assert_int_equal(be->ops->fc_bwd(be, x, w, dy, dx, dw, db, N, C, K), 0);
    assert_true(_rel_err(dx, rdx, N * C) < 1e-6);
    assert_true(_rel_err(dw, rdw, K * C) < 1e-6);
    assert_true(_rel_err(db, rdb, K) < 1e-6);
    /* PyTorch: running = (1 - m) running + m batch, the variance unbiased by n / (n - 1). */
    assert_int_equal(be->ops->bn_stats_update(be, rm, rv, bm, bv, 3, 0.1f, 2.f), 0);
    assert_true(fabsf(rm[1] - (0.9f * 2 + 0.1f * -1)) < 1e-6f && fabsf(rv[2] - (0.9f * 6 + 0.1f * 0.5f)) < 1e-6f);
    assert_int_equal(be->ops->results_reset(be), 0);
    assert_int_equal(be->ops->count_nonfinite(be, x, N * C), 0);
    assert_int_equal(be->ops->results_read(be, res), 0);
    assert_true(res[DLT_RES_NONFINITE] == 0);
    x[N * C - 1] = INFINITY;
    assert_int_equal(be->ops->count_nonfinite(be, x, N * C), 0);
    assert_int_equal(be->ops->results_read(be, res), 0);
    assert_true(res[DLT_RES_NONFINITE] != 0);
    x[N * C - 1] = NAN;
    x[0] = 1.f;
    assert_int_equal(be->ops->results_reset(be), 0);
    assert_int_equal(be->ops->count_nonfinite(be, x, N * C), 0);
    assert_int_equal(be->ops->results_read(be, res), 0);
    assert_true(res[DLT_RES_NONFINITE] != 0);
    /* fp16 and tf32 are GPU precisions: the CPU backend refuses them by name. */
    {
        dlt_backend *refused = NULL;
        assert_int_not_equal(dlt_backend_cpu_create(&refused, DLT_PREC_FP16, dlt_err_fresh(&err)), 0);
        assert_null(refused);
        assert_non_null(strstr(err.msg, "CUDA"));
    }
    be->ops->destroy(be);
    free(x), free(w), free(b), free(dy), free(y), free(dx), free(dw), free(db);
}

/* The replica checksum against the same sum taken in another order (by residue class). */
static void test_checksum(void **state)
{
    dlt_backend *be;
    dlt_err err = DLT_ERR_INIT;
    const size_t n = 10007;
    float *x = _rand(n, 3.f);
    double got = 0, by_class[7] = {0}, ref = 0;
    (void)state;
    assert_int_equal(dlt_backend_cpu_create(&be, DLT_PREC_FP32, dlt_err_fresh(&err)), 0);
    assert_int_equal(be->ops->checksum(be, x, n, &got), 0);
    for (size_t i = 0; i < n; i++)
        by_class[i % 7] += (double)x[i];
    for (int k = 0; k < 7; k++)
        ref += (k + 1) * by_class[k];
    assert_true(fabs(got - ref) <= 1e-12 * fmax(1.0, fabs(ref)));
    free(x);
    be->ops->destroy(be);
}

/* ---------------------------------------------------------------- bf16 activations */

/* The nearest bfloat16 of f as a float, ties to even, from the two neighbours' distances in
 * double: the reference for the backend's rounding, written another way. */
static float _bf16_ref(float f)
{
    uint32_t u, lo_u, hi_u;
    float lo, hi;
    double dl, dh;
    memcpy(&u, &f, 4);
    if (isnan(f) || isinf(f))
        return f;
    lo_u = u & 0xffff0000u;
    hi_u = lo_u + 0x10000u; /* away from zero; past the largest finite value: infinity */
    memcpy(&lo, &lo_u, 4);
    memcpy(&hi, &hi_u, 4);
    dl = fabs((double)f - lo);
    /* infinity counts as 2^128 there (IEEE 754's overflow: past the largest finite value plus half
     * its unit in the last place, rounding gives infinity) */
    dh = fabs((double)f - (isinf(hi) ? copysign(ldexp(1.0, 128), hi) : hi));
    if (dl < dh || (dl == dh && !(lo_u & 0x10000u)))
        return lo;
    return hi;
}

/* The bf16 backend's values of x (rounded once into its type and widened back). */
static float *_via_bf16(dlt_backend *h, const float *x, size_t n)
{
    float *a = _to_act(h, x, n), *back = malloc(n * sizeof(float));
    assert_int_equal(h->ops->act_to_float(h, back, a, n), 0);
    free(a);
    return back;
}

/* max |got - ref| / max |ref| (both float); NaN in got fails. */
static double _rel_err_ff(const float *got, const float *ref, size_t n)
{
    double num = 0, den = 1e-6;
    for (size_t i = 0; i < n; i++) {
        if (isnan(got[i]))
            return INFINITY;
        num = fmax(num, fabs((double)got[i] - ref[i]));
        den = fmax(den, fabs((double)ref[i]));
    }
    return num / den;
}

static int _bf16_backend(dlt_backend **h)
{
    dlt_err err = DLT_ERR_INIT;
    if (!dlt_backend_cpu_has_bf16())
        return 0;
    assert_int_equal(dlt_backend_cpu_create(h, DLT_PREC_BF16, dlt_err_fresh(&err)), 0);
    assert_int_equal((int)(*h)->act_size, 2);
    return 1;
}

/* The batch norm's ReLU forms (bn_fwd_train_relu, bn_bwd_relu) on backend be against the plain ops
 * the network would otherwise call (bn_fwd_train then add_relu; relu_bwd then bn_bwd), which
 * test_batchnorm and the element-wise tests check against double loops: the same bits, with and
 * without a residual z, through oneDNN's fused ReLU (no z) and through the loops (z, or a backward
 * whose forward had a z: its ReLU gradient into dx, then the batch norm's backward in place); dy
 * is left as it is; a backward before any forward is refused. 24 channels: not a multiple of the
 * vector width. */
static void _bn_relu_case(dlt_backend *be)
{
    dlt_op *op, *fresh;
    const dlt_act_shape s = {3, 24, 5, 7};
    const size_t n = (size_t)s.n * s.h * s.w * s.c, nb = n * be->act_size, cb = (size_t)s.c * sizeof(float);
    float *xf = _rand(n, 2.f), *zf = _rand(n, 1.f), *dyf = _rand(n, 1.f), *g = _rand(s.c, 1.f), *b = _rand(s.c, 0.5f);
    float *x = _to_act(be, xf, n), *z = _to_act(be, zf, n), *dy = _to_act(be, dyf, n), *dy0 = _to_act(be, dyf, n);
    float *y[2], *dx[2], *dz[2], *m[2], *v[2], *dg[2], *db[2];
    for (int k = 0; k < 2; k++) {
        y[k] = _act(be, n), dx[k] = _act(be, n), dz[k] = _act(be, n);
        m[k] = _poisoned(s.c), v[k] = _poisoned(s.c), dg[k] = _poisoned(s.c), db[k] = _poisoned(s.c);
    }
    assert_int_equal(be->ops->bn_plan(be, &s, 1e-5f, &op), 0);
    assert_int_equal(be->ops->bn_plan(be, &s, 1e-5f, &fresh), 0);
    assert_int_equal(be->ops->bn_bwd_relu(be, fresh, x, y[0], dy, g, b, dx[0], NULL, dg[0], db[0]), -EPROTO);
    for (int res = 0; res < 2; res++) {
        const float *zz = res ? z : NULL;
        /* 0: the plain ops */
        assert_int_equal(be->ops->bn_fwd_train(be, op, x, g, b, y[0], m[0], v[0]), 0);
        assert_int_equal(be->ops->add_relu(be, y[0], zz, n), 0);
        memcpy(dz[0], dy, nb);
        assert_int_equal(be->ops->relu_bwd(be, y[0], dz[0], dz[0], n), 0);
        assert_int_equal(be->ops->bn_bwd(be, op, x, dz[0], g, b, m[0], v[0], dx[0], dg[0], db[0]), 0);
        /* 1: the ReLU forms */
        assert_int_equal(be->ops->bn_fwd_train_relu(be, op, x, zz, g, b, y[1], m[1], v[1]), 0);
        assert_int_equal(be->ops->bn_bwd_relu(be, op, x, y[1], dy, g, b, dx[1], res ? dz[1] : NULL, dg[1], db[1]), 0);
        assert_memory_equal(y[0], y[1], nb);
        assert_memory_equal(m[0], m[1], cb);
        assert_memory_equal(v[0], v[1], cb);
        assert_memory_equal(dx[0], dx[1], nb);
        assert_memory_equal(dg[0], dg[1], cb);
        assert_memory_equal(db[0], db[1], cb);
        if (res)
            assert_memory_equal(dz[0], dz[1], nb);
        assert_memory_equal(dy, dy0, nb);
    }
    /* The residual forward left no mask: a backward without dz takes the loops, in place. */
    memset(dx[1], 0xff, nb);
    assert_int_equal(be->ops->bn_fwd_train(be, op, x, g, b, y[0], m[0], v[0]), 0);
    assert_int_equal(be->ops->add_relu(be, y[0], z, n), 0);
    memcpy(dz[0], dy, nb);
    assert_int_equal(be->ops->relu_bwd(be, y[0], dz[0], dz[0], n), 0);
    assert_int_equal(be->ops->bn_bwd(be, op, x, dz[0], g, b, m[0], v[0], dx[0], dg[0], db[0]), 0);
    assert_int_equal(be->ops->bn_fwd_train_relu(be, op, x, z, g, b, y[1], NULL, NULL), 0);
    assert_int_equal(be->ops->bn_bwd_relu(be, op, x, y[1], dy, g, b, dx[1], NULL, dg[1], db[1]), 0);
    assert_memory_equal(dx[0], dx[1], nb);
    assert_memory_equal(dg[0], dg[1], cb);
    assert_memory_equal(db[0], db[1], cb);
    assert_memory_equal(dy, dy0, nb);
    be->ops->op_destroy(be, op);
    be->ops->op_destroy(be, fresh);
    for (int k = 0; k < 2; k++)
        free(y[k]), free(dx[k]), free(dz[k]), free(m[k]), free(v[k]), free(dg[k]), free(db[k]);
    free(xf), free(zf), free(dyf), free(g), free(b), free(x), free(z), free(dy), free(dy0);
}

static void test_bn_relu_forms(void **state)
{
    dlt_backend *be;
    dlt_err err = DLT_ERR_INIT;
    (void)state;
    assert_int_equal(dlt_backend_cpu_create(&be, DLT_PREC_FP32, dlt_err_fresh(&err)), 0);
    _bn_relu_case(be);
    be->ops->destroy(be);
    if (_bf16_backend(&be)) {
        _bn_relu_case(be);
        be->ops->destroy(be);
    }
}

/* act_from_float rounds to nearest even, keeps NaN a NaN and infinities infinite; act_to_float
 * widens exactly. */
static void test_bf16_rounding(void **state)
{
    dlt_backend *h;
    const size_t n = 4096;
    float *x, *got;
    uint32_t special[] = {
        0x3f808000u, /* tie, even below: 1.0 */
        0x3f818000u, /* tie, odd below: up */
        0x3f808001u, 0x7f7fffffu /* rounds to infinity */, 0x7f800001u /* NaN whose carry would make infinity */,
        0xff800000u, 0x00000001u /* denormal: to zero */,  0x80000000u};
    (void)state;
    if (!_bf16_backend(&h))
        skip(); /* test_conv_bf16 checks the refusal (also under valgrind, which has no AVX-512) */
    x = _rand(n, 3.f);
    for (size_t i = 0; i < sizeof(special) / sizeof(special[0]); i++)
        memcpy(&x[i], &special[i], 4);
    x[100] = 1e30f, x[101] = -1e-30f;
    got = _via_bf16(h, x, n);
    for (size_t i = 0; i < n; i++) {
        float r = _bf16_ref(x[i]);
        if (isnan(x[i]))
            assert_true(isnan(got[i]));
        else if (memcmp(&got[i], &r, 4) != 0)
            fail_msg("element %zu: %a rounded to %a, nearest-even bf16 is %a", i, (double)x[i], (double)got[i],
                     (double)r);
    }
    free(x), free(got);
    h->ops->destroy(h);
}

/* Every activation op of the bf16 backend against the fp32 backend on the same bf16-exact inputs:
 * outputs within bf16's rounding (2^-8 relative to their scale, a few roundings deep), the
 * float-side outputs (BN statistics, parameter gradients, the loss) within float rounding of
 * fp32's, and the ops that only select (ReLU, its backward, max pooling forward) bit for bit. */
static void test_bf16_ops(void **state)
{
    dlt_backend *f, *h;
    dlt_err err = DLT_ERR_INIT;
    dlt_op *bf, *bh, *pf, *ph;
    const dlt_act_shape s = {2, 16, 7, 6};
    const size_t n = (size_t)s.n * s.h * s.w * s.c, pn = (size_t)s.n * 4 * 3 * s.c, gn = (size_t)s.n * s.c;
    const int fn = 3, fc = 16, fk = 10;
    float *x, *dy, *g, *b, *ref, *got, *hx, *hdy;
    float mf[16], vf[16], mh[16], vh[16], dgf[16], dbf[16], dgh[16], dbh[16];
    (void)state;
    if (!_bf16_backend(&h))
        skip();
    g = _rand(s.c, 1.f), b = _rand(s.c, 1.f);
    assert_int_equal(dlt_backend_cpu_create(&f, DLT_PREC_FP32, dlt_err_fresh(&err)), 0);
    {
        float *rx = _rand(n, 2.f), *rdy = _rand(n, 1.f);
        x = _via_bf16(h, rx, n), dy = _via_bf16(h, rdy, n); /* inputs both backends hold exactly */
        free(rx), free(rdy);
    }
    hx = _to_act(h, x, n), hdy = _to_act(h, dy, n);
    ref = _poisoned(n), got = _poisoned(n);

    /* batch norm, forward and backward */
    {
        float *hy = _act(h, n), *hdx = _act(h, n);
        assert_int_equal(f->ops->bn_plan(f, &s, 1e-5f, &bf), 0);
        assert_int_equal(h->ops->bn_plan(h, &s, 1e-5f, &bh), 0);
        assert_int_equal(f->ops->bn_fwd_train(f, bf, x, g, b, ref, mf, vf), 0);
        assert_int_equal(h->ops->bn_fwd_train(h, bh, hx, g, b, hy, mh, vh), 0);
        assert_int_equal(h->ops->act_to_float(h, got, hy, n), 0);
        assert_true(_rel_err_ff(got, ref, n) < 8e-3);
        assert_true(_rel_err_ff(mh, mf, 16) < 1e-5 && _rel_err_ff(vh, vf, 16) < 1e-5);
        assert_int_equal(f->ops->bn_bwd(f, bf, x, dy, g, b, mf, vf, ref, dgf, dbf), 0);
        assert_int_equal(h->ops->bn_bwd(h, bh, hx, hdy, g, b, mh, vh, hdx, dgh, dbh), 0);
        assert_int_equal(h->ops->act_to_float(h, got, hdx, n), 0);
        assert_true(_rel_err_ff(got, ref, n) < 8e-3);
        assert_true(_rel_err_ff(dgh, dgf, 16) < 1e-4 && _rel_err_ff(dbh, dbf, 16) < 1e-4);
        f->ops->op_destroy(f, bf), h->ops->op_destroy(h, bh);
        free(hy), free(hdx);
    }
    /* max pooling 3x3/2 pad 1: the same maxima, bit for bit; its backward sums overlapping windows */
    {
        float *hy = _act(h, pn), *hdx = _act(h, n), *hpd = _to_act(h, dy, pn);
        assert_int_equal(f->ops->maxpool_plan(f, &s, 3, 2, 1, &pf), 0);
        assert_int_equal(h->ops->maxpool_plan(h, &s, 3, 2, 1, &ph), 0);
        assert_int_equal(f->ops->maxpool_fwd(f, pf, x, ref), 0);
        assert_int_equal(h->ops->maxpool_fwd(h, ph, hx, hy), 0);
        assert_int_equal(h->ops->act_to_float(h, got, hy, pn), 0);
        assert_memory_equal(got, ref, pn * sizeof(float));
        assert_int_equal(f->ops->maxpool_bwd(f, pf, dy, ref), 0);
        assert_int_equal(h->ops->maxpool_bwd(h, ph, hpd, hdx), 0);
        assert_int_equal(h->ops->act_to_float(h, got, hdx, n), 0);
        assert_true(_rel_err_ff(got, ref, n) < 8e-3);
        f->ops->op_destroy(f, pf), h->ops->op_destroy(h, ph);
        free(hy), free(hdx), free(hpd);
    }
    /* element-wise: relu(y + add), relu alone and relu's backward select; accumulate rounds once */
    {
        float *fy = malloc(n * 4), *hy = _to_act(h, x, n), *hz = _act(h, n);
        memcpy(fy, x, n * 4);
        assert_int_equal(f->ops->add_relu(f, fy, dy, n), 0);
        assert_int_equal(h->ops->add_relu(h, hy, hdy, n), 0);
        assert_int_equal(h->ops->act_to_float(h, got, hy, n), 0);
        for (size_t i = 0; i < n; i++)
            assert_true(got[i] == _bf16_ref(fy[i]));
        assert_int_equal(f->ops->relu_bwd(f, fy, dy, ref, n), 0);
        assert_int_equal(h->ops->relu_bwd(h, hy, hdy, hz, n), 0);
        assert_int_equal(h->ops->act_to_float(h, got, hz, n), 0);
        assert_memory_equal(got, ref, n * 4);
        memcpy(fy, x, n * 4);
        free(hy), hy = _to_act(h, x, n);
        assert_int_equal(f->ops->add_relu(f, fy, NULL, n), 0);
        assert_int_equal(h->ops->add_relu(h, hy, NULL, n), 0);
        assert_int_equal(h->ops->act_to_float(h, got, hy, n), 0);
        assert_memory_equal(got, fy, n * 4);
        memcpy(fy, x, n * 4);
        free(hy), hy = _to_act(h, x, n);
        assert_int_equal(f->ops->accumulate(f, fy, dy, n), 0);
        assert_int_equal(h->ops->accumulate(h, hy, hdy, n), 0);
        assert_int_equal(h->ops->act_to_float(h, got, hy, n), 0);
        for (size_t i = 0; i < n; i++)
            assert_true(got[i] == _bf16_ref(fy[i]));
        free(fy), free(hy), free(hz);
    }
    /* global average pooling and its backward */
    {
        float *hy = _act(h, gn), *hdx = _act(h, n), *hg = _to_act(h, dy, gn);
        assert_int_equal(f->ops->avgpool_fwd(f, &s, x, ref), 0);
        assert_int_equal(h->ops->avgpool_fwd(h, &s, hx, hy), 0);
        assert_int_equal(h->ops->act_to_float(h, got, hy, gn), 0);
        for (size_t i = 0; i < gn; i++) /* sums in float, one rounding */
            assert_true(fabsf(got[i] - ref[i]) <= fabsf(ref[i]) * 0x1p-8f + 1e-6f);
        assert_int_equal(f->ops->avgpool_bwd(f, &s, dy, ref), 0);
        assert_int_equal(h->ops->avgpool_bwd(h, &s, hg, hdx), 0);
        assert_int_equal(h->ops->act_to_float(h, got, hdx, n), 0);
        assert_true(_rel_err_ff(got, ref, n) < 4e-3);
        free(hy), free(hdx), free(hg);
    }
    /* the FC layer: float weights and gradients, bf16 activations in and out */
    {
        float *w = _rand((size_t)fk * fc, 1.f), *bias = _rand(fk, 1.f), *dwf = _poisoned((size_t)fk * fc),
              *dwh = _poisoned((size_t)fk * fc), dbf2[10], dbh2[10];
        float *hy = _act(h, (size_t)fn * fk), *hdx = _act(h, (size_t)fn * fc), *hg = _to_act(h, dy, (size_t)fn * fk);
        assert_int_equal(f->ops->fc_fwd(f, x, w, bias, ref, fn, fc, fk), 0);
        assert_int_equal(h->ops->fc_fwd(h, hx, w, bias, hy, fn, fc, fk), 0);
        assert_int_equal(h->ops->act_to_float(h, got, hy, (size_t)fn * fk), 0);
        assert_true(_rel_err_ff(got, ref, (size_t)fn * fk) < 4e-3);
        assert_int_equal(f->ops->fc_bwd(f, x, w, dy, ref, dwf, dbf2, fn, fc, fk), 0);
        assert_int_equal(h->ops->fc_bwd(h, hx, w, hg, hdx, dwh, dbh2, fn, fc, fk), 0);
        assert_int_equal(h->ops->act_to_float(h, got, hdx, (size_t)fn * fc), 0);
        assert_true(_rel_err_ff(got, ref, (size_t)fn * fc) < 4e-3);
        assert_true(_rel_err_ff(dwh, dwf, (size_t)fk * fc) < 1e-5 && _rel_err_ff(dbh2, dbf2, 10) < 1e-5);
        free(w), free(bias), free(dwf), free(dwh), free(hy), free(hdx), free(hg);
    }
    /* loss: the same from the same logits; dlogits rounded once */
    {
        const int32_t labels[3] = {1, 7, 42}; /* 42: outside 0..9, counted */
        float *hz = _act(h, (size_t)fn * fk);
        assert_int_equal(f->ops->results_reset(f), 0);
        assert_int_equal(h->ops->results_reset(h), 0);
        assert_int_equal(f->ops->softmax_xent(f, x, labels, fn, fk, 0.1f, 128.f, ref), 0);
        assert_int_equal(h->ops->softmax_xent(h, hx, labels, fn, fk, 0.1f, 128.f, hz), 0);
        assert_int_equal(h->ops->act_to_float(h, got, hz, (size_t)fn * fk), 0);
        for (int i = 0; i < fn * fk; i++)
            assert_true(got[i] == _bf16_ref(ref[i]));
        for (int slot = 0; slot < DLT_RES_COUNT; slot++)
            assert_true(fabs(h->results[slot] - f->results[slot]) <= 1e-9 * fmax(1.0, fabs(f->results[slot])));
        assert_true(h->results[DLT_RES_BAD_LABELS] == 1);
        free(hz);
    }
    /* the input's normalization, rounded once */
    {
        uint8_t px[5 * 3];
        const float mean[3] = {123.675f, 116.28f, 103.53f}, inv[3] = {1 / 58.395f, 1 / 57.12f, 1 / 57.375f};
        float *hn = _act(h, 15);
        for (int i = 0; i < 15; i++)
            px[i] = (uint8_t)(i * 17);
        assert_int_equal(f->ops->input_stage(f, px, 5), 0);
        assert_int_equal(h->ops->input_stage(h, px, 5), 0);
        assert_int_equal(f->ops->normalize_input(f, ref, 5, mean, inv), 0);
        assert_int_equal(h->ops->normalize_input(h, hn, 5, mean, inv), 0);
        assert_int_equal(h->ops->act_to_float(h, got, hn, 15), 0);
        for (int i = 0; i < 15; i++)
            assert_true(got[i] == _bf16_ref(ref[i]));
        free(hn);
    }
    free(x), free(dy), free(g), free(b), free(ref), free(got), free(hx), free(hdy);
    f->ops->destroy(f);
    h->ops->destroy(h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv_fp32),
        cmocka_unit_test(test_conv_bf16),
        cmocka_unit_test(test_batchnorm),
        cmocka_unit_test(test_maxpool),
        cmocka_unit_test(test_avgpool_gemm_eltwise),
        cmocka_unit_test(test_softmax_xent),
        cmocka_unit_test(test_checksum),
        cmocka_unit_test(test_sgd_and_input),
        cmocka_unit_test(test_fc_stats_finite),
        cmocka_unit_test(test_bf16_rounding),
        cmocka_unit_test(test_bf16_ops),
        cmocka_unit_test(test_bn_relu_forms),
    };
    dlt_rng_seed(&g_rng, 12345, 1);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
