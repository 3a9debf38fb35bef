/* cuda_ops_check: every op of the CUDA backend against the CPU backend (itself checked against
 * naive double loops by tests/unit/test_cpu_ops) on the same random inputs, in fp32, tf32, fp16
 * and bf16. Error = max |gpu - cpu| / max |cpu| per output; tolerances: fp32 1e-5, tf32 3e-4,
 * fp16/bf16 1e-2 (bf16 has 8 significant bits: 2e-2). Prints one line per check and
 * "N passed, M failed"; exits 0 as skipped without a GPU. Usage: cuda_ops_check [PRECISION...] */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/backend/backend.h"
#include "trainer/backend/cuda_backend.h"
#include "trainer/common/cuda_check.h"
#include "trainer/common/rng.h"

typedef struct {
    dlt_backend *cpu, *gpu;
    const char *prec;
    double tol;
    int passed, failed;
    dlt_rng rng;
} ctx;

static float *_rand(ctx *c, size_t n, float scale)
{
    float *p = malloc((n ? n : 1) * sizeof(float));
    for (size_t i = 0; i < n; i++)
        p[i] = scale * (2.f * dlt_rng_uniform(&c->rng) - 1.f);
    return p;
}

static float *_zeros(size_t n)
{
    return calloc(n ? n : 1, sizeof(float));
}

/* GPU copies of host floats: activations in the backend's type, or float parameters. */
static float *_gact(ctx *c, const float *h, size_t n)
{
    float *d = c->gpu->ops->alloc(c->gpu, (n ? n : 1) * c->gpu->act_size);
    if (!d || (h && c->gpu->ops->act_from_float(c->gpu, d, h, n) != 0)) {
        fprintf(stderr, "cuda_ops_check: device buffer: %s\n", c->gpu->err);
        exit(1);
    }
    return d;
}

static float *_gf32(ctx *c, const float *h, size_t n)
{
    float *d = c->gpu->ops->alloc(c->gpu, (n ? n : 1) * sizeof(float));
    if (!d || (h && c->gpu->ops->upload(c->gpu, d, h, n * sizeof(float)) != 0)) {
        fprintf(stderr, "cuda_ops_check: device buffer: %s\n", c->gpu->err);
        exit(1);
    }
    return d;
}

static void _free(ctx *c, float *d)
{
    c->gpu->ops->release(c->gpu, d);
}

static double _err(const float *got, const float *ref, size_t n)
{
    double num = 0, den = 1e-12;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i]))
            return INFINITY;
        num = fmax(num, fabs((double)got[i] - ref[i]));
        den = fmax(den, fabs((double)ref[i]));
    }
    return num / den;
}

static void _report(ctx *c, const char *what, double err, double tol)
{
    int ok = err <= tol;
    printf("%s %-6s %-36s err %.3e (tol %.0e)\n", ok ? "ok  " : "FAIL", c->prec, what, err, tol);
    if (ok)
        c->passed++;
    else
        c->failed++;
}

/* Compares a GPU activation (or float) buffer with the CPU result. */
static void _cmp(ctx *c, const char *what, const float *dgpu, const float *cpu, size_t n, int is_act, double tol)
{
    float *h = malloc((n ? n : 1) * sizeof(float));
    int rc = is_act ? c->gpu->ops->act_to_float(c->gpu, h, dgpu, n) : c->gpu->ops->download(c->gpu, h, dgpu, n * 4);
    if (rc != 0) {
        printf("FAIL %-6s %-36s reading back: %s\n", c->prec, what, c->gpu->err);
        c->failed++;
    } else {
        _report(c, what, _err(h, cpu, n), tol);
    }
    free(h);
}

#define GPU_OK(c, call)                                                                                       \
    do {                                                                                                      \
        if ((call) != 0) {                                                                                    \
            printf("FAIL %-6s %s: %s\n", (c)->prec, #call, (c)->gpu->err);                                   \
            (c)->failed++;                                                                                    \
            return;                                                                                           \
        }                                                                                                     \
    } while (0)
#define CPU_OK(c, call)                                                                                       \
    do {                                                                                                      \
        if ((call) != 0) {                                                                                    \
            printf("FAIL cpu reference %s: %s\n", #call, (c)->cpu->err);                                     \
            exit(1);                                                                                          \
        }                                                                                                     \
    } while (0)

static void _conv(ctx *c, int n, int h, int w, int ch, int k, int r, int stride, int pad)
{
    dlt_conv_shape s = {n, ch, h, w, k, r, r, stride, pad, 0, 0};
    dlt_op *co = NULL, *go = NULL;
    size_t xn, wn = (size_t)k * ch * r * r, yn;
    char name[64];
    s.oh = dlt_out_size(h, r, stride, pad);
    s.ow = dlt_out_size(w, r, stride, pad);
    xn = (size_t)n * h * w * ch;
    yn = (size_t)n * s.oh * s.ow * k;
    float *x = _rand(c, xn, 1), *wt = _rand(c, wn, 0.2f), *dy = _rand(c, yn, 1);
    float *y = _zeros(yn), *dx = _zeros(xn), *dw = _zeros(wn);
    float *gx = _gact(c, x, xn), *gw = _gf32(c, wt, wn), *gdy = _gact(c, dy, yn);
    float *gy = _gact(c, NULL, yn), *gdx = _gact(c, NULL, xn), *gdw = _gf32(c, NULL, wn);
    CPU_OK(c, c->cpu->ops->conv_plan(c->cpu, &s, &co));
    CPU_OK(c, c->cpu->ops->conv_set_weights(c->cpu, co, wt));
    CPU_OK(c, c->cpu->ops->conv_fwd(c->cpu, co, x, y));
    CPU_OK(c, c->cpu->ops->conv_bwd_data(c->cpu, co, dy, dx));
    CPU_OK(c, c->cpu->ops->conv_bwd_weights(c->cpu, co, x, dy, dw));
    GPU_OK(c, c->gpu->ops->conv_plan(c->gpu, &s, &go));
    GPU_OK(c, c->gpu->ops->conv_set_weights(c->gpu, go, gw));
    GPU_OK(c, c->gpu->ops->conv_fwd(c->gpu, go, gx, gy));
    /* The image-input (stem) convolution's data gradient is never computed by the trainer, and
     * the padded stem refuses it: not checked. */
    if (ch != 3)
        GPU_OK(c, c->gpu->ops->conv_bwd_data(c->gpu, go, gdy, gdx));
    GPU_OK(c, c->gpu->ops->conv_bwd_weights(c->gpu, go, gx, gdy, gdw));
    snprintf(name, sizeof(name), "conv%dx%d/%d c%d->%d %dx%d fwd%s", r, r, stride, ch, k, h, w,
             ch == 3 && c->gpu->precision != DLT_PREC_FP32 ? " (input padded to 4)" : "");
    _cmp(c, name, gy, y, yn, 1, c->tol);
    snprintf(name, sizeof(name), "conv%dx%d/%d c%d->%d bwd-data", r, r, stride, ch, k);
    if (ch != 3)
        _cmp(c, name, gdx, dx, xn, 1, c->tol);
    snprintf(name, sizeof(name), "conv%dx%d/%d c%d->%d bwd-weights", r, r, stride, ch, k);
    _cmp(c, name, gdw, dw, wn, 0, c->tol);
    c->cpu->ops->op_destroy(c->cpu, co);
    c->gpu->ops->op_destroy(c->gpu, go);
    free(x), free(wt), free(dy), free(y), free(dx), free(dw);
    _free(c, gx), _free(c, gw), _free(c, gdy), _free(c, gy), _free(c, gdx), _free(c, gdw);
}

static void _batchnorm(ctx *c)
{
    dlt_act_shape s = {8, 64, 7, 7};
    size_t n = (size_t)s.n * s.c * s.h * s.w;
    dlt_op *co = NULL, *go = NULL;
    float *x = _rand(c, n, 2), *z = _rand(c, n, 1), *dy = _rand(c, n, 1), *g = _rand(c, 64, 1), *b = _rand(c, 64, 1);
    float *y = _zeros(n), *dx = _zeros(n), *dg = _zeros(64), *db = _zeros(64), *m = _zeros(64), *v = _zeros(64);
    float *yi = _zeros(n), *dz = _zeros(n), *rm = _rand(c, 64, 1), *rv = _zeros(64);
    float *gx = _gact(c, x, n), *gz = _gact(c, z, n), *gdy = _gact(c, dy, n), *gg = _gf32(c, g, 64), *gb = _gf32(c, b, 64);
    float *gy = _gact(c, NULL, n), *gdx = _gact(c, NULL, n), *gdg = _gf32(c, NULL, 64), *gdb = _gf32(c, NULL, 64);
    float *gm = _gf32(c, NULL, 64), *gv = _gf32(c, NULL, 64), *gyi = _gact(c, NULL, n), *gdz = _gact(c, NULL, n);
    float *grm, *grv;
    double tol = c->tol * 2; /* statistics over 392 values per channel, then normalised */
    for (int i = 0; i < 64; i++)
        rv[i] = 0.5f + (float)i / 64;
    grm = _gf32(c, rm, 64);
    grv = _gf32(c, rv, 64);
    CPU_OK(c, c->cpu->ops->bn_plan(c->cpu, &s, 1e-5f, &co));
    CPU_OK(c, c->cpu->ops->bn_fwd_train(c->cpu, co, x, g, b, y, m, v));
    CPU_OK(c, c->cpu->ops->bn_bwd(c->cpu, co, x, dy, g, b, m, v, dx, dg, db));
    CPU_OK(c, c->cpu->ops->bn_fwd_infer(c->cpu, co, x, g, b, rm, rv, yi));
    GPU_OK(c, c->gpu->ops->bn_plan(c->gpu, &s, 1e-5f, &go));
    GPU_OK(c, c->gpu->ops->bn_fwd_train(c->gpu, go, gx, gg, gb, gy, gm, gv));
    GPU_OK(c, c->gpu->ops->bn_bwd(c->gpu, go, gx, gdy, gg, gb, gm, gv, gdx, gdg, gdb));
    GPU_OK(c, c->gpu->ops->bn_fwd_infer(c->gpu, go, gx, gg, gb, grm, grv, gyi));
    _cmp(c, "batchnorm train fwd y", gy, y, n, 1, tol);
    _cmp(c, "batchnorm batch mean", gm, m, 64, 0, tol);
    _cmp(c, "batchnorm batch var (biased)", gv, v, 64, 0, tol);
    _cmp(c, "batchnorm bwd dx", gdx, dx, n, 1, tol);
    _cmp(c, "batchnorm bwd dgamma", gdg, dg, 64, 0, tol);
    _cmp(c, "batchnorm bwd dbeta", gdb, db, 64, 0, tol);
    _cmp(c, "batchnorm inference", gyi, yi, n, 1, tol);
    if (c->gpu->ops->bn_fwd_train_relu) {
        /* Fused y = relu(bn(x) + z) and its backward against the unfused CPU sequence. */
        CPU_OK(c, c->cpu->ops->bn_fwd_train(c->cpu, co, x, g, b, y, m, v));
        CPU_OK(c, c->cpu->ops->add_relu(c->cpu, y, z, n));
        memcpy(dz, dy, n * sizeof(float));
        CPU_OK(c, c->cpu->ops->relu_bwd(c->cpu, y, dz, dz, n));
        CPU_OK(c, c->cpu->ops->bn_bwd(c->cpu, co, x, dz, g, b, m, v, dx, dg, db));
        GPU_OK(c, c->gpu->ops->bn_fwd_train_relu(c->gpu, go, gx, gz, gg, gb, gy, gm, gv));
        GPU_OK(c, c->gpu->ops->bn_bwd_relu(c->gpu, go, gx, gy, gdy, gg, gb, gdx, gdz, gdg, gdb));
        _cmp(c, "fused bn+add+relu fwd", gy, y, n, 1, tol);
        _cmp(c, "fused bn+add+relu bwd dx", gdx, dx, n, 1, tol);
        _cmp(c, "fused bn+add+relu bwd dz (residual)", gdz, dz, n, 1, tol);
        _cmp(c, "fused bn+add+relu bwd dgamma", gdg, dg, 64, 0, tol);
    }
    /* Running statistics (float, exact arithmetic on both sides). */
    CPU_OK(c, c->cpu->ops->bn_stats_update(c->cpu, rm, rv, m, v, 64, 0.1f, 1.01f));
    GPU_OK(c, c->gpu->ops->upload(c->gpu, gm, m, 64 * 4));
    GPU_OK(c, c->gpu->ops->upload(c->gpu, gv, v, 64 * 4));
    GPU_OK(c, c->gpu->ops->bn_stats_update(c->gpu, grm, grv, gm, gv, 64, 0.1f, 1.01f));
    _cmp(c, "batchnorm running mean update", grm, rm, 64, 0, 1e-6);
    _cmp(c, "batchnorm running var update", grv, rv, 64, 0, 1e-6);
    c->cpu->ops->op_destroy(c->cpu, co);
    c->gpu->ops->op_destroy(c->gpu, go);
    free(x), free(z), free(dy), free(g), free(b), free(y), free(dx), free(dg), free(db), free(m), free(v), free(yi),
        free(dz), free(rm), free(rv);
    float *all[] = {gx, gz, gdy, gg, gb, gy, gdx, gdg, gdb, gm, gv, gyi, gdz, grm, grv};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        _free(c, all[i]);
}

static void _pooling_eltwise(ctx *c)
{
    /* Max pooling on distinct values k/32 (exact in every type: no ties after rounding). */
    dlt_act_shape s = {1, 2, 8, 8};
    size_t n = 128, on = 2 * 4 * 4, an = 4 * 7 * 7 * 32, bn = 4 * 32;
    dlt_op *co = NULL, *go = NULL;
    float *x = _zeros(n), *y = _zeros(on), *dy = _rand(c, on, 1), *dx = _zeros(n);
    for (size_t i = 0; i < n; i++)
        x[i] = (float)((i * 53) % n) / 32.f;
    float *gx = _gact(c, x, n), *gy = _gact(c, NULL, on), *gdy = _gact(c, dy, on), *gdx = _gact(c, NULL, n);
    CPU_OK(c, c->cpu->ops->maxpool_plan(c->cpu, &s, 3, 2, 1, &co));
    CPU_OK(c, c->cpu->ops->maxpool_fwd(c->cpu, co, x, y));
    CPU_OK(c, c->cpu->ops->maxpool_bwd(c->cpu, co, dy, dx));
    GPU_OK(c, c->gpu->ops->maxpool_plan(c->gpu, &s, 3, 2, 1, &go));
    GPU_OK(c, c->gpu->ops->maxpool_fwd(c->gpu, go, gx, gy));
    GPU_OK(c, c->gpu->ops->maxpool_bwd(c->gpu, go, gdy, gdx));
    _cmp(c, "maxpool 3x3/2 fwd", gy, y, on, 1, c->tol);
    _cmp(c, "maxpool 3x3/2 bwd", gdx, dx, n, 1, c->tol);
    c->cpu->ops->op_destroy(c->cpu, co);
    c->gpu->ops->op_destroy(c->gpu, go);
    free(x), free(y), free(dy), free(dx);
    _free(c, gx), _free(c, gy), _free(c, gdy), _free(c, gdx);

    /* Global average pooling 7x7, add+ReLU, ReLU backward, accumulate. */
    dlt_act_shape as = {4, 32, 7, 7};
    float *a = _rand(c, an, 1), *p = _zeros(bn), *dp = _rand(c, bn, 1), *da = _zeros(an), *r = _rand(c, an, 1);
    float *ga = _gact(c, a, an), *gp = _gact(c, NULL, bn), *gdp = _gact(c, dp, bn), *gda = _gact(c, NULL, an);
    float *gr = _gact(c, r, an);
    CPU_OK(c, c->cpu->ops->avgpool_fwd(c->cpu, &as, a, p));
    CPU_OK(c, c->cpu->ops->avgpool_bwd(c->cpu, &as, dp, da));
    GPU_OK(c, c->gpu->ops->avgpool_fwd(c->gpu, &as, ga, gp));
    GPU_OK(c, c->gpu->ops->avgpool_bwd(c->gpu, &as, gdp, gda));
    _cmp(c, "global avgpool fwd", gp, p, bn, 1, c->tol);
    _cmp(c, "global avgpool bwd", gda, da, an, 1, c->tol);
    CPU_OK(c, c->cpu->ops->add_relu(c->cpu, a, r, an));
    GPU_OK(c, c->gpu->ops->add_relu(c->gpu, ga, gr, an));
    _cmp(c, "add + relu", ga, a, an, 1, c->tol);
    CPU_OK(c, c->cpu->ops->relu_bwd(c->cpu, a, r, da, an));
    GPU_OK(c, c->gpu->ops->relu_bwd(c->gpu, ga, gr, gda, an));
    _cmp(c, "relu bwd", gda, da, an, 1, c->tol);
    CPU_OK(c, c->cpu->ops->accumulate(c->cpu, r, a, an));
    GPU_OK(c, c->gpu->ops->accumulate(c->gpu, gr, ga, an));
    _cmp(c, "accumulate", gr, r, an, 1, c->tol);
    free(a), free(p), free(dp), free(da), free(r);
    _free(c, ga), _free(c, gp), _free(c, gdp), _free(c, gda), _free(c, gr);
}

static void _fc_loss_sgd(ctx *c)
{
    enum { N = 32, C = 256, K = 100 };
    float *x = _rand(c, N * C, 1), *w = _rand(c, K * C, 0.1f), *b = _rand(c, K, 1), *y = _zeros(N * K);
    float *dy = _rand(c, N * K, 1), *dx = _zeros(N * C), *dw = _zeros(K * C), *db = _zeros(K);
    float *gx = _gact(c, x, N * C), *gw = _gf32(c, w, K * C), *gb = _gf32(c, b, K), *gy = _gact(c, NULL, N * K);
    float *gdy = _gact(c, dy, N * K), *gdx = _gact(c, NULL, N * C), *gdw = _gf32(c, NULL, K * C), *gdb = _gf32(c, NULL, K);
    int32_t labels[N];
    double lc = 0, lg = 0;
    int c1 = 0, c5 = 0, g1 = 0, g5 = 0, fin = -1;
    CPU_OK(c, c->cpu->ops->fc_fwd(c->cpu, x, w, b, y, N, C, K));
    CPU_OK(c, c->cpu->ops->fc_bwd(c->cpu, x, w, dy, dx, dw, db, N, C, K));
    GPU_OK(c, c->gpu->ops->fc_fwd(c->gpu, gx, gw, gb, gy, N, C, K));
    GPU_OK(c, c->gpu->ops->fc_bwd(c->gpu, gx, gw, gdy, gdx, gdw, gdb, N, C, K));
    _cmp(c, "fc fwd", gy, y, N * K, 1, c->tol);
    _cmp(c, "fc bwd dx", gdx, dx, N * C, 1, c->tol);
    _cmp(c, "fc bwd dw", gdw, dw, K * C, 0, c->tol);
    _cmp(c, "fc bwd db", gdb, db, K, 0, c->tol);

    /* Softmax cross-entropy on the GPU's own logits (so both see the same rounded inputs). */
    for (int i = 0; i < N; i++)
        labels[i] = (i * 37) % K;
    GPU_OK(c, c->gpu->ops->act_to_float(c->gpu, y, gy, N * K));
    CPU_OK(c, c->cpu->ops->softmax_xent(c->cpu, y, labels, N, K, 0.1f, 256.f, dy, &lc, &c1, &c5));
    GPU_OK(c, c->gpu->ops->softmax_xent(c->gpu, gy, labels, N, K, 0.1f, 256.f, gdy, &lg, &g1, &g5));
    _report(c, "softmax xent loss", fabs(lg - lc) / fabs(lc), 1e-5);
    _report(c, "softmax xent top-1/top-5 counts", (double)(abs(g1 - c1) + abs(g5 - c5)), 0);
    _cmp(c, "softmax xent dlogits (x loss scale)", gdy, dy, N * K, 1, c->tol);
    labels[3] = K; /* refused */
    _report(c, "softmax xent refuses a bad label",
            c->gpu->ops->softmax_xent(c->gpu, gy, labels, N, K, 0.1f, 1.f, gdy, &lg, &g1, &g5) != 0 ? 0 : 1, 0);

    /* SGD (float): identical arithmetic on both sides. */
    float *v = _rand(c, K * C, 0.1f), *gv = _gf32(c, v, K * C);
    CPU_OK(c, c->cpu->ops->sgd_update(c->cpu, w, v, dw, K * C, 0.1f, 0.9f, 1e-4f, 0.25f));
    GPU_OK(c, c->gpu->ops->upload(c->gpu, gdw, dw, K * C * 4));
    GPU_OK(c, c->gpu->ops->sgd_update(c->gpu, gw, gv, gdw, K * C, 0.1f, 0.9f, 1e-4f, 0.25f));
    _cmp(c, "sgd weights", gw, w, K * C, 0, 1e-6);
    _cmp(c, "sgd momentum", gv, v, K * C, 0, 1e-6);
    {
        /* The replica checksum on the device against the CPU's loop over the same floats. */
        double cs_gpu = 0, cs_cpu = 0;
        GPU_OK(c, c->gpu->ops->upload(c->gpu, gw, w, K * C * 4));
        GPU_OK(c, c->gpu->ops->checksum(c->gpu, gw, K * C, &cs_gpu));
        CPU_OK(c, c->cpu->ops->checksum(c->cpu, w, K * C, &cs_cpu));
        _report(c, "weight checksum (device, double)", fabs(cs_gpu - cs_cpu) / fmax(1.0, fabs(cs_cpu)), 1e-12);
    }
    GPU_OK(c, c->gpu->ops->all_finite(c->gpu, gw, K * C, &fin));
    _report(c, "all_finite on finite weights", fin == 1 ? 0 : 1, 0);
    w[K * C / 2] = INFINITY;
    GPU_OK(c, c->gpu->ops->upload(c->gpu, gw, w, K * C * 4));
    GPU_OK(c, c->gpu->ops->all_finite(c->gpu, gw, K * C, &fin));
    _report(c, "all_finite finds an inf", fin == 0 ? 0 : 1, 0);

    /* Input normalization from uint8. */
    {
        enum { P = 1000 };
        uint8_t px[P * 3];
        const float mean[3] = {123.675f, 116.28f, 103.53f}, inv[3] = {1 / 58.395f, 1 / 57.12f, 1 / 57.375f};
        float *o = _zeros(P * 3), *go = _gact(c, NULL, P * 3);
        for (int i = 0; i < P * 3; i++)
            px[i] = (uint8_t)(i * 29 + 3);
        CPU_OK(c, c->cpu->ops->normalize_input(c->cpu, px, o, P, mean, inv));
        GPU_OK(c, c->gpu->ops->normalize_input(c->gpu, px, go, P, mean, inv));
        _cmp(c, "normalize uint8 input", go, o, P * 3, 1, c->tol);
        free(o);
        _free(c, go);
    }
    free(x), free(w), free(b), free(y), free(dy), free(dx), free(dw), free(db), free(v);
    float *all[] = {gx, gw, gb, gy, gdy, gdx, gdw, gdb, gv};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        _free(c, all[i]);
}

int main(int argc, char **argv)
{
    static const char *const all[] = {"fp32", "tf32", "fp16", "bf16"};
    const char *const *precs = argc > 1 ? (const char *const *)argv + 1 : all;
    int nprec = argc > 1 ? argc - 1 : 4, passed = 0, failed = 0;
    char err[512];
    if (dlt_cuda_device_count() == 0) {
        printf("cuda_ops_check: SKIP: the CUDA runtime sees no GPU\n");
        return 0;
    }
    for (int p = 0; p < nprec; p++) {
        ctx c;
        dlt_backend_config cfg;
        memset(&c, 0, sizeof(c));
        dlt_backend_config_defaults(&cfg);
        if (dlt_precision_parse(precs[p]) < 0) {
            fprintf(stderr, "cuda_ops_check: unknown precision %s\n", precs[p]);
            return 2;
        }
        cfg.precision = (dlt_precision)dlt_precision_parse(precs[p]);
        c.prec = precs[p];
        c.tol = cfg.precision == DLT_PREC_FP32 ? 1e-5 : cfg.precision == DLT_PREC_TF32 ? 3e-4
                : cfg.precision == DLT_PREC_FP16 ? 1e-2 : 2e-2;
        dlt_rng_seed(&c.rng, 2024, (uint64_t)p);
        if (dlt_backend_cpu_create(&c.cpu, DLT_PREC_FP32, err, sizeof(err)) != 0) {
            fprintf(stderr, "cuda_ops_check: CPU backend: %s\n", err);
            return 1;
        }
        if (dlt_backend_cuda_create(&c.gpu, &cfg, err, sizeof(err)) != 0) {
            printf("FAIL %-6s backend: %s\n", c.prec, err);
            failed++;
            c.cpu->ops->destroy(c.cpu);
            continue;
        }
        _conv(&c, 4, 14, 14, 64, 64, 3, 1, 1);
        _conv(&c, 4, 14, 14, 128, 256, 1, 1, 0);
        _conv(&c, 4, 14, 14, 64, 128, 1, 2, 0);
        _conv(&c, 2, 32, 32, 3, 64, 7, 2, 3);
        _batchnorm(&c);
        _pooling_eltwise(&c);
        _fc_loss_sgd(&c);
        passed += c.passed;
        failed += c.failed;
        c.gpu->ops->destroy(c.gpu);
        c.cpu->ops->destroy(c.cpu);
    }
    printf("cuda_ops_check: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
