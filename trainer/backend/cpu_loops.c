/* SPDX-License-Identifier: Apache-2.0 */
/* cpu_loops: the CPU backend's work that is plain loops rather than oneDNN primitives: the
 * elementwise ops and average pooling (OpenMP `parallel for simd`: at -O2 GCC would not vectorise
 * them, and they are a quarter of a training step), input staging and normalization, softmax
 * cross-entropy, the step's results, the flat SGD update, the FC layer (one GEMM each way) and
 * the running batch-norm statistics. */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/backend/backend.h"
#include "trainer/backend/cpu_internal.h"

/* Activations are float, or bf16 under --precision bf16 (cpu_internal.h): each element-wise op
 * computes in float either way and rounds once where it stores bf16. */
int dlt_cpu_add_relu(dlt_backend *be, float *y, const float *add, size_t n)
{
    if (_cpu(be)->bf16) {
        dlt_bf16 *h = (dlt_bf16 *)y;
        const dlt_bf16 *a = (const dlt_bf16 *)add;
        if (a) {
#pragma omp parallel for simd schedule(static)
            for (size_t i = 0; i < n; i++) {
                float v = _bf16_to_f32(h[i]) + _bf16_to_f32(a[i]);
                h[i] = v > 0.f ? _f32_to_bf16(v) : 0;
            }
        } else {
#pragma omp parallel for simd schedule(static)
            for (size_t i = 0; i < n; i++) /* exact: a value kept or zero */
                h[i] = _bf16_to_f32(h[i]) > 0.f ? h[i] : 0;
        }
        return 0;
    }
    if (add) {
#pragma omp parallel for simd schedule(static)
        for (size_t i = 0; i < n; i++) {
            float v = y[i] + add[i];
            y[i] = v > 0.f ? v : 0.f;
        }
    } else {
#pragma omp parallel for simd schedule(static)
        for (size_t i = 0; i < n; i++)
            y[i] = y[i] > 0.f ? y[i] : 0.f;
    }
    return 0;
}

int dlt_cpu_relu_bwd(dlt_backend *be, const float *y, const float *dy, float *dz, size_t n)
{
    if (_cpu(be)->bf16) {
        const dlt_bf16 *hy = (const dlt_bf16 *)y, *hg = (const dlt_bf16 *)dy;
        dlt_bf16 *hz = (dlt_bf16 *)dz;
#pragma omp parallel for simd schedule(static)
        for (size_t i = 0; i < n; i++) {
            dlt_bf16 g = hg[i];
            hz[i] = _bf16_to_f32(hy[i]) > 0.f ? g : 0;
        }
        return 0;
    }
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) {
        float g = dy[i]; /* loaded unconditionally: a select, which vectorises */
        dz[i] = y[i] > 0.f ? g : 0.f;
    }
    return 0;
}

static int _accumulate(dlt_backend *be, float *dst, const float *src, size_t n)
{
    if (_cpu(be)->bf16) {
        dlt_bf16 *d = (dlt_bf16 *)dst;
        const dlt_bf16 *a = (const dlt_bf16 *)src;
#pragma omp parallel for simd schedule(static)
        for (size_t i = 0; i < n; i++)
            d[i] = _f32_to_bf16(_bf16_to_f32(d[i]) + _bf16_to_f32(a[i]));
        return 0;
    }
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++)
        dst[i] += src[i];
    return 0;
}

/* Element i of an activation buffer as a float, and a float stored into one. */
static inline float _act_ld(int bf16, const float *p, size_t i)
{
    return bf16 ? _bf16_to_f32(((const dlt_bf16 *)p)[i]) : p[i];
}

static inline void _act_st(int bf16, float *p, size_t i, float v)
{
    if (bf16)
        ((dlt_bf16 *)p)[i] = _f32_to_bf16(v);
    else
        p[i] = v;
}

/* n floats of the backend's scratch for the few activations widened to float (bf16: the pooled
 * features, the FC layer's, the logits); kept across calls. */
static float *_scratch(dlt_backend *be, size_t n)
{
    cpu_backend *c = _cpu(be);
    void *p = NULL;
    if (n <= c->fc_scratch_n)
        return c->fc_scratch;
    if (posix_memalign(&p, 64, n * sizeof(float)) != 0) {
        dlt_fail(be->err, -ENOMEM, "out of memory (%zu floats of scratch; a smaller --batch needs less)", n);
        return NULL;
    }
    free(c->fc_scratch);
    c->fc_scratch = p;
    c->fc_scratch_n = n;
    return p;
}

static int _avgpool_fwd(dlt_backend *be, const dlt_act_shape *s, const float *x, float *y)
{
    const size_t hw = (size_t)s->h * s->w;
    const float inv = 1.0f / (float)hw;
    const int bf16 = _cpu(be)->bf16;
    /* bf16: sums in float (scratch), one rounding each */
    float *sum = bf16 ? _scratch(be, (size_t)s->n * s->c) : y;
    if (!sum)
        return -ENOMEM;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < s->n; n++) {
        float *out = sum + (size_t)n * s->c;
        const size_t in = (size_t)n * hw * s->c;
        for (int c = 0; c < s->c; c++)
            out[c] = 0.f;
        for (size_t p = 0; p < hw; p++)
            for (int c = 0; c < s->c; c++)
                out[c] += _act_ld(bf16, x, in + p * s->c + c);
        for (int c = 0; c < s->c; c++)
            _act_st(bf16, y, (size_t)n * s->c + c, out[c] * inv);
    }
    return 0;
}

static int _avgpool_bwd(dlt_backend *be, const dlt_act_shape *s, const float *dy, float *dx)
{
    const size_t hw = (size_t)s->h * s->w;
    const float inv = 1.0f / (float)hw;
    const int bf16 = _cpu(be)->bf16;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < s->n; n++)
        for (size_t p = 0; p < hw; p++) {
            const size_t o = ((size_t)n * hw + p) * s->c, g = (size_t)n * s->c;
            if (bf16) {
                for (int c = 0; c < s->c; c++)
                    _act_st(1, dx, o + c, _act_ld(1, dy, g + c) * inv);
                continue;
            }
#pragma omp simd
            for (int c = 0; c < s->c; c++)
                dx[o + c] = dy[g + c] * inv;
        }
    return 0;
}

/* Staging on the CPU is bookkeeping: normalize_input reads the host batch where it lies. */
static int _input_stage(dlt_backend *be, const uint8_t *src, size_t pixels)
{
    cpu_backend *c = _cpu(be);
    if (c->nstaged == DLT_INPUT_STAGED) {
        return dlt_fail(be->err, -EBUSY, "%d batches staged already (normalize_input consumes them)", DLT_INPUT_STAGED);
    }
    c->staged[c->nstaged].src = src;
    c->staged[c->nstaged].pixels = pixels;
    c->nstaged++;
    return 0;
}

static int _normalize_input(dlt_backend *be, float *dst, size_t pixels, const float mean[3], const float inv_std[3])
{
    cpu_backend *c = _cpu(be);
    const uint8_t *src;
    if (c->nstaged == 0 || c->staged[0].pixels != pixels) {
        return dlt_fail(be->err, -EINVAL, "normalize_input of %zu pixels: %s", pixels,
                        c->nstaged ? "the staged batch differs in size" : "no batch staged");
    }
    src = c->staged[0].src;
    memmove(&c->staged[0], &c->staged[1], sizeof(c->staged[0]) * (size_t)(--c->nstaged));
    if (c->bf16) {
        dlt_bf16 *h = (dlt_bf16 *)dst;
#pragma omp parallel for schedule(static)
        for (size_t p = 0; p < pixels; p++)
            for (int ch = 0; ch < 3; ch++)
                h[p * 3 + ch] = _f32_to_bf16(((float)src[p * 3 + ch] - mean[ch]) * inv_std[ch]);
        return 0;
    }
#pragma omp parallel for schedule(static)
    for (size_t p = 0; p < pixels; p++)
        for (int ch = 0; ch < 3; ch++)
            dst[p * 3 + ch] = ((float)src[p * 3 + ch] - mean[ch]) * inv_std[ch];
    return 0;
}

static void _softmax_xent_f32(dlt_backend *be, const float *logits, const int32_t *labels, int n, int k,
                              float smoothing, float loss_scale, float *dlogits)
{
    double total = 0, *res = _cpu(be)->results;
    int hit1 = 0, hit5 = 0, bad = 0, nonfinite = 0;
    for (int i = 0; i < n; i++) {
        const float *z = logits + (size_t)i * k;
        float *dz = dlogits ? dlogits + (size_t)i * k : NULL;
        int y = labels[i], rank = 0, finite = 1;
        double mx = z[0], sum = 0, logsum, loss, mean_logp = 0;
        if (y < 0 || y >= k) { /* counted: the step is void, and the host names it */
            bad++;
            if (dz)
                memset(dz, 0, (size_t)k * sizeof(float));
            continue;
        }
        for (int j = 1; j < k; j++)
            mx = z[j] > mx ? z[j] : mx;
        for (int j = 0; j < k; j++)
            sum += exp((double)z[j] - mx);
        logsum = mx + log(sum);
        for (int j = 0; j < k; j++) {
            mean_logp += (double)z[j] - logsum;
            finite &= isfinite(z[j]) != 0;
            if (z[j] > z[y] || (z[j] == z[y] && j < y))
                rank++;
        }
        mean_logp /= k;
        loss = -(1.0 - smoothing) * ((double)z[y] - logsum) - smoothing * mean_logp;
        total += loss;
        /* A NaN compares false with everything, so its rank would be 0: such a row is a miss. */
        nonfinite += !finite;
        hit1 += finite && rank < 1;
        hit5 += finite && rank < 5;
        if (dz)
            for (int j = 0; j < k; j++) {
                double p = exp((double)z[j] - logsum);
                double t = (j == y ? 1.0 - smoothing : 0.0) + smoothing / k;
                dz[j] = (float)((p - t) / n * loss_scale);
            }
    }
    res[DLT_RES_LOSS] += total;
    res[DLT_RES_TOP1] += hit1;
    res[DLT_RES_TOP5] += hit5;
    res[DLT_RES_BAD_LABELS] += bad;
    res[DLT_RES_NONFINITE_ROWS] += nonfinite;
}

/* bf16: the logits widened to float, the loss and its gradient computed as in fp32, the gradient
 * rounded once into dlogits (as PyTorch's autocast runs cross-entropy in float). */
static int _softmax_xent(dlt_backend *be, const float *logits, const int32_t *labels, int n, int k, float smoothing,
                         float loss_scale, float *dlogits)
{
    size_t nk = (size_t)n * k;
    float *z;
    if (!_cpu(be)->bf16) {
        _softmax_xent_f32(be, logits, labels, n, k, smoothing, loss_scale, dlogits);
        return 0;
    }
    if (!(z = _scratch(be, 2 * nk)))
        return -ENOMEM;
    _bf16_widen(logits, z, nk);
    _softmax_xent_f32(be, z, labels, n, k, smoothing, loss_scale, dlogits ? z + nk : NULL);
    if (dlogits)
        _bf16_narrow(z + nk, dlogits, nk);
    return 0;
}

static int _results_reset(dlt_backend *be)
{
    memset(_cpu(be)->results, 0, sizeof(_cpu(be)->results));
    return 0;
}

static int _results_put(dlt_backend *be, int slot, double value)
{
    int rc;
    if ((rc = dlt_results_slot_check(slot, be->err)) != 0)
        return rc;
    _cpu(be)->results[slot] = value;
    return 0;
}

static int _results_read(dlt_backend *be, double *host)
{
    memcpy(host, _cpu(be)->results, sizeof(_cpu(be)->results));
    return 0;
}

static int _checksum(dlt_backend *be, const float *x, size_t n, double *sum)
{
    double v = 0;
    (void)be;
    for (size_t i = 0; i < n; i++)
        v += (double)x[i] * (double)((i % 7) + 1);
    *sum = v;
    return 0;
}

static int _sgd_plan(dlt_backend *be, float *params, size_t n, const dlt_param_segment *segs, int nsegs)
{
    cpu_backend *c = _cpu(be);
    int rc = dlt_param_segments_check(segs, nsegs, n, be->err);
    if (rc)
        return rc;
    free(c->segs);
    if (!(c->segs = malloc((size_t)(nsegs ? nsegs : 1) * sizeof(*segs)))) {
        return dlt_fail(be->err, -ENOMEM, "out of memory");
    }
    memcpy(c->segs, segs, (size_t)nsegs * sizeof(*segs));
    c->nsegs = nsegs;
    c->params = params;
    c->nparams = n;
    return 0;
}

static int _sgd_step(dlt_backend *be, float *w, float *v, const float *g, float lr, float mu, float wd,
                     float wd_no_decay, float grad_scale)
{
    cpu_backend *c = _cpu(be);
    if (w != c->params) {
        return dlt_fail(be->err, -EINVAL, "sgd_step on a buffer sgd_plan did not name");
    }
    if (dlt_results_skip(c->results))
        return 0;
    for (int s = 0; s < c->nsegs; s++) {
        size_t lo = c->segs[s].off, hi = lo + c->segs[s].len;
        float dk = c->segs[s].no_decay ? wd_no_decay : wd;
#pragma omp parallel for simd schedule(static)
        for (size_t i = lo; i < hi; i++) {
            float d = g[i] * grad_scale + dk * w[i];
            v[i] = mu * v[i] + d;
            w[i] -= lr * v[i];
        }
    }
    return c->refresh_bound(be); /* the blocked copies of the convolutions' weights */
}

/* The FC layer's GEMM (backend.h), oneDNN's sgemm: here, with its one user inside the backend, so
 * that cpu_loops.c calls nothing of cpu_onednn.c's. */
int dlt_backend_cpu_gemm(dlt_backend *be, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                         const float *b, int ldb, float beta, float *c, int ldc)
{
    DLT_TRY(be->err, DLT_DNNL_CHECK(be->err, dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb,
                                                        beta, c, ldc)));
    return 0;
}

static int _fc_fwd_f32(dlt_backend *be, const float *x, const float *w, const float *b, float *y, int n, int c, int k)
{
    /* y[n,k] = x[n,c] W[k,c]^T + b */
    for (int i = 0; i < n; i++)
        memcpy(y + (size_t)i * k, b, (size_t)k * sizeof(float));
    return dlt_backend_cpu_gemm(be, 0, 1, n, k, c, 1.f, x, c, w, c, 1.f, y, k);
}

static int _fc_bwd_f32(dlt_backend *be, const float *x, const float *w, const float *dy, float *dx, float *dw,
                       float *db, int n, int c, int k)
{
    /* dW[k,c] = dy^T x; db = sum_n dy; dx[n,c] = dy W */
    int rc = dlt_backend_cpu_gemm(be, 1, 0, k, c, n, 1.f, dy, k, x, c, 0.f, dw, c);
    for (int j = 0; j < k; j++) {
        float s = 0.f;
        for (int i = 0; i < n; i++)
            s += dy[(size_t)i * k + j];
        db[j] = s;
    }
    return rc ? rc : dlt_backend_cpu_gemm(be, 0, 0, n, c, k, 1.f, dy, k, w, c, 0.f, dx, c);
}

/* bf16: the layer's activations (n x c in, n x k out, a few MB) widened to float in scratch, the
 * float GEMMs on them, the outputs rounded once. */
static int _fc_fwd(dlt_backend *be, const float *x, const float *w, const float *b, float *y, int n, int c, int k)
{
    size_t nc = (size_t)n * c, nk = (size_t)n * k;
    float *xf;
    int rc;
    if (!_cpu(be)->bf16)
        return _fc_fwd_f32(be, x, w, b, y, n, c, k);
    if (!(xf = _scratch(be, nc + nk)))
        return -ENOMEM;
    _bf16_widen(x, xf, nc);
    if ((rc = _fc_fwd_f32(be, xf, w, b, xf + nc, n, c, k)) == 0)
        _bf16_narrow(xf + nc, y, nk);
    return rc;
}

static int _fc_bwd(dlt_backend *be, const float *x, const float *w, const float *dy, float *dx, float *dw, float *db,
                   int n, int c, int k)
{
    size_t nc = (size_t)n * c, nk = (size_t)n * k;
    float *xf;
    int rc;
    if (!_cpu(be)->bf16)
        return _fc_bwd_f32(be, x, w, dy, dx, dw, db, n, c, k);
    if (!(xf = _scratch(be, 2 * nc + nk)))
        return -ENOMEM;
    _bf16_widen(x, xf, nc);
    _bf16_widen(dy, xf + nc, nk);
    if ((rc = _fc_bwd_f32(be, xf, w, xf + nc, xf + nc + nk, dw, db, n, c, k)) == 0)
        _bf16_narrow(xf + nc + nk, dx, nc);
    return rc;
}

static int _bn_stats_update(dlt_backend *be, float *rm, float *rv, const float *bm, const float *bv, int c,
                            float momentum, float unbias)
{
    (void)be;
    for (int i = 0; i < c; i++) {
        rm[i] = (1.f - momentum) * rm[i] + momentum * bm[i];
        rv[i] = (1.f - momentum) * rv[i] + momentum * bv[i] * unbias;
    }
    return 0;
}

static int _count_nonfinite(dlt_backend *be, const float *x, size_t n)
{
    size_t bad = 0;
#pragma omp parallel for schedule(static) reduction(+ : bad)
    for (size_t i = 0; i < n; i++)
        bad += !isfinite(x[i]);
    _cpu(be)->results[DLT_RES_NONFINITE] += (double)bad;
    return 0;
}

void dlt_cpu_loop_ops(dlt_backend_ops *ops)
{
    ops->add_relu = dlt_cpu_add_relu;
    ops->relu_bwd = dlt_cpu_relu_bwd;
    ops->accumulate = _accumulate;
    ops->avgpool_fwd = _avgpool_fwd;
    ops->avgpool_bwd = _avgpool_bwd;
    ops->input_stage = _input_stage;
    ops->normalize_input = _normalize_input;
    ops->softmax_xent = _softmax_xent;
    ops->results_reset = _results_reset;
    ops->results_put = _results_put;
    ops->results_read = _results_read;
    ops->checksum = _checksum;
    ops->count_nonfinite = _count_nonfinite;
    ops->sgd_plan = _sgd_plan;
    ops->sgd_step = _sgd_step;
    ops->fc_fwd = _fc_fwd;
    ops->fc_bwd = _fc_bwd;
    ops->bn_stats_update = _bn_stats_update;
}
