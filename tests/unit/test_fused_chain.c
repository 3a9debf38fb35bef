/* SPDX-License-Identifier: Apache-2.0 */
/* The network's routing of the convolution + batch-norm chain (backend.h's conv_fuse_plan and the
 * five ops after it), which only the CUDA backend offers: here a CPU backend is given the six ops,
 * each written below from their contract in naive double loops around the CPU's own convolutions
 * (the prologue applied into a temporary, the statistics summed from the output). A network that
 * routes the chain right trains like the plain one: the same loss, gradients and running
 * statistics to float rounding, on a bottleneck ResNet-50 and a basic-block ResNet-18, with every
 * batch norm the chain makes virtual poisoned (NaN) so that a read of a tensor never stored fails.
 * Then the refusals: a backend that refuses the prologue, or every convolution, gets the plain
 * path's bits; a failure other than a refusal fails the network's planning, naming the layer. */
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
#include "trainer/model/network.h"

#define MAX_OPS 128

/* What the emulated backend refuses: nothing, the prologue, every convolution, or fails. */
enum { REFUSE_NONE, REFUSE_PROLOGUE, REFUSE_ALL, FAIL_PLAN };

static struct {
    const dlt_backend_ops *real;
    dlt_backend_ops ops;
    struct {
        dlt_op *op;
        int conv;
        dlt_conv_shape cs;
        dlt_act_shape as;
        float eps;
    } map[MAX_OPS];
    int nmap, refuse;
    int calls_stats, calls_pro, calls_finalize, calls_apply, calls_bwd, calls_plan;
    float *tmp;
} emu;

static int _find(const dlt_op *op)
{
    for (int i = 0; i < emu.nmap; i++)
        if (emu.map[i].op == op)
            return i;
    fail_msg("an op the emulation never planned");
    return -1;
}

static int _conv_plan(dlt_backend *be, const dlt_conv_shape *s, dlt_op **op)
{
    int rc = emu.real->conv_plan(be, s, op);
    if (rc == 0) {
        assert_true(emu.nmap < MAX_OPS);
        emu.map[emu.nmap].op = *op, emu.map[emu.nmap].conv = 1;
        emu.map[emu.nmap++].cs = *s;
    }
    return rc;
}

static int _bn_plan(dlt_backend *be, const dlt_act_shape *s, float eps, dlt_op **op)
{
    int rc = emu.real->bn_plan(be, s, eps, op);
    if (rc == 0) {
        assert_true(emu.nmap < MAX_OPS);
        emu.map[emu.nmap].op = *op, emu.map[emu.nmap].as = *s;
        emu.map[emu.nmap++].eps = eps;
    }
    return rc;
}

static int _fuse_plan(dlt_backend *be, dlt_op *op, int prologue)
{
    const dlt_conv_shape *s = &emu.map[_find(op)].cs;
    emu.calls_plan++;
    if (emu.refuse == FAIL_PLAN && s->c > 3)
        return dlt_fail(be->err, -EIO, "a device that failed");
    if (emu.refuse == REFUSE_ALL || (emu.refuse == REFUSE_PROLOGUE && prologue))
        return dlt_fail(be->err, -ENOTSUP, "refused by the test");
    return 0;
}

/* x' = relu(x * scale + bias) into emu.tmp, each product and sum rounded to float as cuDNN's
 * prologue rounds its fp32 intermediates. */
static const float *_prologue(const dlt_conv_shape *s, const float *x, const float *sb)
{
    size_t n = (size_t)s->n * s->h * s->w * s->c;
    for (size_t i = 0; i < n; i++) {
        int c = (int)(i % (size_t)s->c);
        float v = x[i] * sb[c];
        v = v + sb[s->c + c];
        emu.tmp[i] = v > 0 ? v : 0;
    }
    return emu.tmp;
}

static int _fwd_stats(dlt_backend *be, dlt_op *op, const float *x, const float *sb, float *y, float *stats)
{
    const dlt_conv_shape *s = &emu.map[_find(op)].cs;
    size_t pix = (size_t)s->n * s->oh * s->ow;
    int rc;
    emu.calls_stats++;
    if ((rc = emu.real->conv_fwd(be, op, sb ? _prologue(s, x, sb) : x, y)) != 0)
        return rc;
    for (int k = 0; k < s->k; k++) {
        double sum = 0, sq = 0;
        for (size_t p = 0; p < pix; p++) {
            double v = y[p * s->k + k];
            sum += v, sq += v * v;
        }
        stats[k] = (float)sum, stats[s->k + k] = (float)sq;
    }
    return 0;
}

static int _bwd_weights_pro(dlt_backend *be, dlt_op *op, const float *x, const float *sb, const float *dy, float *dw)
{
    const dlt_conv_shape *s = &emu.map[_find(op)].cs;
    emu.calls_pro++;
    return emu.real->conv_bwd_weights(be, op, _prologue(s, x, sb), dy, dw);
}

static int _finalize(dlt_backend *be, dlt_op *op, const float *stats, const float *g, const float *b, float *mean,
                     float *var, float *sb)
{
    const int e = _find(op);
    const dlt_act_shape *s = &emu.map[e].as;
    double m = (double)s->n * s->h * s->w;
    (void)be;
    emu.calls_finalize++;
    for (int c = 0; c < s->c; c++) {
        double mu = stats[c] / m, v = stats[s->c + c] / m - mu * mu, scale;
        v = v > 0 ? v : 0;
        scale = g[c] / sqrt(v + emu.map[e].eps);
        mean[c] = (float)mu, var[c] = (float)v;
        sb[c] = (float)scale, sb[s->c + c] = (float)(b[c] - mu * scale);
    }
    return 0;
}

static int _apply(dlt_backend *be, dlt_op *op, const float *x, const float *sb, const float *z, const float *zsb,
                  int relu, float *y)
{
    const dlt_act_shape *s = &emu.map[_find(op)].as;
    size_t n = (size_t)s->n * s->h * s->w * s->c;
    (void)be;
    emu.calls_apply++;
    for (size_t i = 0; i < n; i++) {
        int c = (int)(i % (size_t)s->c);
        double v = (double)x[i] * sb[c] + sb[s->c + c];
        if (z)
            v += zsb ? (double)z[i] * zsb[c] + zsb[s->c + c] : z[i];
        y[i] = (float)(relu && v < 0 ? 0 : v);
    }
    return 0;
}

static int _bwd_fused(dlt_backend *be, dlt_op *op, const float *x, const float *y, const float *sb, int relu,
                      const float *dy, const float *g, const float *mean, const float *var, float *dx, float *dz,
                      float *dg, float *db)
{
    const int e = _find(op);
    const dlt_act_shape *s = &emu.map[e].as;
    size_t pix = (size_t)s->n * s->h * s->w;
    (void)be;
    emu.calls_bwd++;
    /* An output handed to the backward must have been stored, even where no ReLU reads it (the
     * never-stored ones hold NaN here). */
    for (size_t i = 0; y && i < pix * (size_t)s->c; i++)
        if (!isfinite(y[i]))
            return dlt_fail(be->err, -EPROTO, "a batch norm's backward handed an output that was never stored");
    for (int c = 0; c < s->c; c++) {
        double s1 = 0, s2 = 0, inv = 1 / sqrt((double)var[c] + emu.map[e].eps);
        for (int pass = 0; pass < 2; pass++)
            for (size_t p = 0; p < pix; p++) {
                size_t i = p * s->c + c;
                float pre = x[i] * sb[c];
                pre = pre + sb[s->c + c];
                double d = dy[i], xc = (double)x[i] - mean[c];
                if (relu && !(y ? y[i] > 0 : pre > 0))
                    d = 0;
                if (pass == 0) {
                    s1 += d, s2 += d * xc;
                    if (dz)
                        dz[i] = (float)d;
                } else {
                    dx[i] = (float)(g[c] * inv * (d - s1 / pix - xc * inv * inv * s2 / pix));
                }
            }
        dg[c] = (float)(s2 * inv), db[c] = (float)s1;
    }
    return 0;
}

typedef struct {
    double loss;
    float *grads, *stats;
    int fused, virt, folded;
} outcome;

static double _rel_l2(const float *a, const float *b, size_t n)
{
    double d = 0, r = 0;
    for (size_t i = 0; i < n; i++) {
        d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        r += (double)b[i] * b[i];
    }
    return sqrt(d / (r > 0 ? r : 1));
}

/* One training forward and backward of a small net from seed 7 on one batch, the chain offered
 * (offer) with refusals `refuse`. Returns dlt_net_create's status (the outcome only on 0). */
static int _run(const char *arch, int offer, int refuse, outcome *out, char *words, size_t wlen)
{
    dlt_backend *be;
    dlt_net net;
    dlt_model_config cfg = {.width = 0.125f, .image = 32, .classes = 5, .batch = 4};
    int32_t labels[4] = {0, 3, 1, 4};
    double res[DLT_RES_COUNT];
    dlt_err e = DLT_ERR_INIT;
    dlt_rng r;
    int rc;
    assert_int_equal(dlt_model_parse_arch(arch, &cfg, dlt_err_fresh(&e)), 0);
    assert_int_equal(dlt_backend_cpu_create(&be, DLT_PREC_FP32, dlt_err_fresh(&e)), 0);
    memset(&emu, 0, sizeof(emu));
    emu.real = be->ops;
    emu.ops = *be->ops;
    emu.refuse = refuse;
    assert_null(be->ops->conv_fuse_plan); /* the CPU has none: what this test stands in for */
    if (offer) {
        emu.ops.conv_plan = _conv_plan;
        emu.ops.bn_plan = _bn_plan;
        emu.ops.conv_fuse_plan = _fuse_plan;
        emu.ops.conv_fwd_stats = _fwd_stats;
        emu.ops.conv_bwd_weights_pro = _bwd_weights_pro;
        emu.ops.bn_finalize = _finalize;
        emu.ops.bn_apply = _apply;
        emu.ops.bn_bwd_fused = _bwd_fused;
    }
    be->ops = &emu.ops;
    rc = dlt_net_create(&net, &cfg, be, dlt_err_fresh(&e));
    if (rc == 0) /* a refusal handled leaves no error behind: the run's first failure must be its own */
        assert_int_equal(e.code, 0);
    if (rc != 0) {
        snprintf(words, wlen, "%s", e.msg);
        be->ops = emu.real;
        be->ops->destroy(be);
        return rc;
    }
    {
        size_t most = 0;
        for (int t = 0; t < net.model.ntensors; t++)
            most = net.model.tensors[t].size > most ? net.model.tensors[t].size : most;
        assert_non_null(emu.tmp = malloc(most * sizeof(float)));
    }
    dlt_net_init_params(&net, 7, 0);
    /* Non-trivial batch norms (gamma and beta away from 1 and 0): a scale or bias misrouted shows. */
    dlt_rng_seed(&r, 99, 1);
    for (int i = 0; i < net.model.nlayers; i++) {
        const dlt_layer *l = &net.model.layers[i];
        if (l->kind == DLT_LAYER_BN)
            for (int c = 0; c < l->cs.c; c++) {
                net.params[l->w_off + c] = 0.5f + dlt_rng_uniform(&r);
                net.params[l->b_off + c] = dlt_rng_uniform(&r) - 0.5f;
            }
    }
    assert_int_equal(dlt_net_upload(&net), 0);
    {
        float *in = dlt_net_input(&net);
        size_t n = net.model.tensors[net.model.input_tensor].size;
        for (size_t i = 0; i < n; i++)
            in[i] = 2 * dlt_rng_uniform(&r) - 1;
    }
    /* A tensor the chain never stores holds NaN: whatever reads it poisons the loss. */
    for (int i = 0; net.fuse && i < net.model.nlayers; i++)
        if (net.fuse[i] >= 2) {
            const dlt_layer *l = &net.model.layers[i];
            for (size_t k = 0; k < net.model.tensors[l->out].size; k++)
                net.act[l->out][k] = NAN;
        }
    assert_int_equal(dlt_net_forward(&net, 1), 0);
    assert_int_equal(be->ops->results_reset(be), 0);
    assert_int_equal(be->ops->softmax_xent(be, dlt_net_logits(&net), labels, 4, 5, 0.1f, 1.f, dlt_net_dlogits(&net)),
                     0);
    assert_int_equal(be->ops->results_read(be, res), 0);
    assert_int_equal(dlt_net_backward(&net, NULL), 0);
    out->loss = res[DLT_RES_LOSS] / 4;
    out->grads = calloc(net.model.nparams, sizeof(float));
    out->stats = calloc(net.model.nstats, sizeof(float));
    assert_true(out->grads && out->stats);
    assert_int_equal(dlt_net_grads_to_host(&net, out->grads), 0);
    memcpy(out->stats, net.d_stats, net.model.nstats * sizeof(float)); /* host memory on the CPU */
    out->fused = net.fused_convs, out->virt = net.virtual_bns, out->folded = net.folded_bns;
    free(emu.tmp);
    dlt_net_destroy(&net);
    be->ops = emu.real;
    be->ops->destroy(be);
    return 0;
}

static void _compare(const char *arch, int refuse, int convs, int fused, int virt, int folded)
{
    dlt_model_config cfg = {.width = 0.125f, .image = 32, .classes = 5, .batch = 4};
    dlt_model m;
    dlt_err e = DLT_ERR_INIT;
    outcome plain, chain;
    char words[2048];
    assert_int_equal(dlt_model_parse_arch(arch, &cfg, dlt_err_fresh(&e)), 0);
    assert_int_equal(dlt_model_build(&m, &cfg, dlt_err_fresh(&e)), 0);
    assert_int_equal(_run(arch, 0, REFUSE_NONE, &plain, words, sizeof(words)), 0);
    assert_int_equal(_run(arch, 1, refuse, &chain, words, sizeof(words)), 0);
    printf("%s, refusals %d: %d of %d convolutions write their batch norm's statistics, %d batch norms never "
           "stored, %d applied by their residual join; loss %.9f vs %.9f; gradients %.2e, running statistics %.2e "
           "apart (relative L2)\n",
           arch, refuse, chain.fused, convs, chain.virt, chain.folded, chain.loss, plain.loss,
           _rel_l2(chain.grads, plain.grads, m.nparams), _rel_l2(chain.stats, plain.stats, m.nstats));
    for (int i = 0; i < m.nentries && getenv("DLT_TEST_VERBOSE"); i++)
        if (m.entries[i].is_param)
            printf("  %-40s %.2e\n", m.entries[i].name,
                   _rel_l2(chain.grads + m.entries[i].off, plain.grads + m.entries[i].off, m.entries[i].len));
    assert_int_equal(chain.fused, fused);
    assert_int_equal(chain.virt, virt);
    assert_int_equal(chain.folded, folded);
    assert_int_equal(plain.fused, 0);
    assert_true(emu.calls_plan > 0);
    if (fused == 0) { /* every convolution refused: the plain path, bit for bit */
        assert_memory_equal(chain.grads, plain.grads, m.nparams * sizeof(float));
        assert_memory_equal(chain.stats, plain.stats, m.nstats * sizeof(float));
        assert_true(chain.loss == plain.loss);
        assert_int_equal(emu.calls_stats + emu.calls_finalize + emu.calls_apply + emu.calls_bwd + emu.calls_pro, 0);
    } else {
        assert_true(isfinite(chain.loss));
        /* The chain's variance comes from float sums of squares (its contract), the plain path's from
         * two passes; at batch 4 and 32x32 the last stage normalises over 4 values per channel, which
         * amplifies that rounding to about 7e-4 of the ResNet-50 gradients (6e-5 of ResNet-18's).
         * (the loss to 2e-5). A routing error is of another order: a ReLU mask lost in the backward
         * of a batch norm never stored gave gradients 5 to 1e4 apart, the ReLU lost in a stored one
         * 1.0 and the loss 7% (both tried). */
        assert_true(fabs(chain.loss - plain.loss) <= 1e-4 * fabs(plain.loss));
        assert_true(_rel_l2(chain.grads, plain.grads, m.nparams) < 2e-3);
        assert_true(_rel_l2(chain.stats, plain.stats, m.nstats) < 1e-4);
        assert_int_equal(emu.calls_stats, fused);
        assert_int_equal(emu.calls_finalize, fused);
        assert_int_equal(emu.calls_bwd, fused);
        assert_int_equal(emu.calls_apply, fused - virt - folded);
        assert_int_equal(emu.calls_pro, virt);
    }
    free(plain.grads), free(plain.stats), free(chain.grads), free(chain.stats);
    dlt_model_free(&m);
}

/* ResNet-50: 53 convolutions, each read by its batch norm alone; the first two batch norms of each
 * of the 16 bottlenecks feed one convolution through a ReLU: 32 never stored; the 4 downsamples'
 * batch norms applied by their blocks' last batch norm (the dual apply). */
static void test_resnet50_chain(void **state)
{
    (void)state;
    _compare("resnet50", REFUSE_NONE, 53, 53, 32, 4);
}

/* ResNet-18: 20 convolutions (3 downsamples), 8 basic blocks: their first batch norms, 8, never
 * stored, and the 3 downsamples' applied by their joins. */
static void test_resnet18_chain(void **state)
{
    (void)state;
    _compare("resnet18", REFUSE_NONE, 20, 20, 8, 3);
}

/* The prologue refused: the inner batch norms stored again, the statistics still fused. */
static void test_prologue_refused(void **state)
{
    (void)state;
    _compare("resnet50", REFUSE_PROLOGUE, 53, 53, 0, 4);
}

/* Every convolution refused: the plain path's bits, no fused op called. */
static void test_all_refused(void **state)
{
    (void)state;
    _compare("resnet50", REFUSE_ALL, 53, 0, 0, 0);
}

/* A failure that is not a refusal fails the network's planning, with the layer and the cause. */
static void test_plan_failure(void **state)
{
    outcome o;
    char words[2048] = "";
    (void)state;
    assert_int_equal(_run("resnet50", 1, FAIL_PLAN, &o, words, sizeof(words)), -EIO);
    printf("refused: %s\n", words);
    assert_non_null(strstr(words, "a device that failed"));
    assert_non_null(strstr(words, "layer layer1.0.conv1"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resnet50_chain),   cmocka_unit_test(test_resnet18_chain),
        cmocka_unit_test(test_prologue_refused), cmocka_unit_test(test_all_refused),
        cmocka_unit_test(test_plan_failure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
