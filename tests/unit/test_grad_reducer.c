/* SPDX-License-Identifier: Apache-2.0 */
/* test_grad_reducer: the gradient reduction's host-side logic (comm/grad_reducer.c and
 * grad_buckets.c, with the loss scaler they unscale by), which needs no GPU: the fp16 loss-scale
 * state machine, the gradient bucket layout, the order in which backward hands finished buckets
 * to the communicator (checked on the CPU backend with a recording hook: whenever backward says
 * "everything >= lo is final", every gradient there must already hold its final value), the
 * reducer's paths (the CPU's buckets through a stand-in non-blocking communicator) and the
 * low-precision reduction's scaling. */
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

#include "trainer/comm/grad_buckets.h"
#include "trainer/comm/grad_reducer.h"
#include "trainer/model/network.h"
#include "trainer/train/loss_scaler.h"

static void test_loss_scaler(void **state)
{
    dlt_loss_scaler s;
    (void)state;
    dlt_loss_scaler_init(&s, 1, 0, 3);
    assert_true(s.scale == 65536.0);
    /* Overflow: skip and halve. */
    assert_int_equal(dlt_loss_scaler_update(&s, 1), 0);
    assert_true(s.scale == 32768.0);
    assert_int_equal(s.skipped, 1);
    /* Three clean steps in a row: double once; an overflow in between restarts the count. */
    assert_int_equal(dlt_loss_scaler_update(&s, 0), 1);
    assert_int_equal(dlt_loss_scaler_update(&s, 0), 1);
    assert_true(s.scale == 32768.0);
    assert_int_equal(dlt_loss_scaler_update(&s, 1), 0);
    assert_true(s.scale == 16384.0);
    for (int i = 0; i < 2; i++)
        assert_int_equal(dlt_loss_scaler_update(&s, 0), 1);
    assert_true(s.scale == 16384.0);
    assert_int_equal(dlt_loss_scaler_update(&s, 0), 1);
    assert_true(s.scale == 32768.0);
    assert_int_equal(s.grown, 1);
    assert_int_equal(s.skipped, 2);
    /* Never below 1, never above 2^24. */
    for (int i = 0; i < 40; i++)
        dlt_loss_scaler_update(&s, 1);
    assert_true(s.scale == 1.0);
    dlt_loss_scaler_init(&s, 1, 16777216.0, 1);
    dlt_loss_scaler_update(&s, 0);
    assert_true(s.scale == 16777216.0);
    /* The unscale factor undoes the scale and averages over ranks. */
    assert_true(fabs(dlt_loss_scaler_unscale(&s, 8) * 16777216.0 * 8 - 1.0) < 1e-15);
    /* Disabled (fp32, bf16): scale 1, a non-finite step is reported as not applicable but the
     * scale never moves and nothing is counted as an overflow skip. */
    dlt_loss_scaler_init(&s, 0, 0, 0);
    assert_true(s.scale == 1.0);
    assert_int_equal(dlt_loss_scaler_update(&s, 0), 1);
    assert_int_equal(dlt_loss_scaler_update(&s, 1), 0);
    assert_true(s.scale == 1.0);
    assert_int_equal(s.skipped, 0);
}

/* The plan against its rule, restated independently: from the bottom, the first bucket
 * min(align_up(bottom), cap, n), each next one DLT_BUCKET_GROWTH times the previous up to the
 * aligned cap, the top one what is left; stored top first, contiguous, covering [0, n). */
static void _check_plan(size_t n, size_t cap, size_t bottom, size_t align)
{
    dlt_grad_buckets bk;
    size_t acap = cap < align ? align : cap / align * align;
    size_t want = bottom > acap ? acap : (bottom + align - 1) / align * align, lo = 0;
    char msg[128];
    snprintf(msg, sizeof(msg), "n=%zu cap=%zu bottom=%zu align=%zu", n, cap, bottom, align);
    assert_int_equal(dlt_grad_buckets_plan(&bk, n, cap, bottom, align), 0);
    assert_true(bk.n >= 1);
    if (bk.b[0].hi != n)
        fail_msg("%s: the top bucket ends at %zu", msg, bk.b[0].hi);
    for (int i = bk.n - 1; i >= 0; i--) { /* bottom up */
        const dlt_grad_bucket *b = &bk.b[i];
        size_t expect_hi = n - lo <= want ? n : lo + want;
        if (b->lo != lo || b->hi != expect_hi)
            fail_msg("%s: bucket %d is [%zu, %zu), expected [%zu, %zu)", msg, i, b->lo, b->hi, lo, expect_hi);
        if (b->lo % align)
            fail_msg("%s: bucket %d starts at %zu, not aligned", msg, i, b->lo);
        lo = b->hi;
        want = want * DLT_BUCKET_GROWTH > acap ? acap : want * DLT_BUCKET_GROWTH;
    }
    assert_int_equal(lo, n);
    dlt_grad_buckets_free(&bk);
}

static void test_bucket_layout(void **state)
{
    dlt_grad_buckets bk;
    static const double resnet50_mib[] = {1.4923400878906250, 25, 25, 25, 16, 4, 1}; /* top first */
    (void)state;
    /* ResNet-50 (25,557,032 parameters) at the default 25 MiB (6,553,600 floats) and the 1 MiB
     * bottom bucket: 7 buckets, the one that waits for the stem's backward 1 MiB (it was the 22.5
     * MiB remainder when buckets were cut from the top). */
    _check_plan(25557032, 6553600, 262144, 64);
    assert_int_equal(dlt_grad_buckets_plan(&bk, 25557032, 6553600, 262144, 64), 0);
    assert_int_equal(bk.n, 7);
    for (int i = 0; i < bk.n; i++)
        if (fabs((double)(bk.b[i].hi - bk.b[i].lo) * 4 / 1048576 - resnet50_mib[i]) > 1e-9)
            fail_msg("ResNet-50 bucket %d: %zu floats, not %g MiB", i, bk.b[i].hi - bk.b[i].lo, resnet50_mib[i]);
    /* Take: nothing until the lowest offset done reaches a bucket's start, then in order. */
    assert_int_equal(dlt_grad_buckets_take(&bk, 25557032), 0);
    assert_int_equal(dlt_grad_buckets_take(&bk, bk.b[0].lo + 1), 0);
    assert_int_equal(dlt_grad_buckets_take(&bk, bk.b[0].lo), 1);
    assert_int_equal(dlt_grad_buckets_take(&bk, bk.b[0].lo), 0);
    assert_int_equal(dlt_grad_buckets_take(&bk, bk.b[2].lo), 2);
    assert_int_equal(dlt_grad_buckets_take(&bk, 1), 3);
    assert_int_equal(dlt_grad_buckets_take(&bk, 0), 1);
    assert_int_equal(bk.launched, 7);
    dlt_grad_buckets_reset(&bk);
    assert_int_equal(dlt_grad_buckets_take(&bk, 0), 7);
    dlt_grad_buckets_free(&bk);
    for (size_t n = 1; n < 700; n += 37)
        for (size_t cap = 1; cap < 300; cap += 29)
            for (size_t bottom = 1; bottom < 400; bottom += 53)
                _check_plan(n, cap, bottom, 16);
    _check_plan(1000, 1000, 1000, 64);
    _check_plan(1000, 100000, 64, 64);
    _check_plan(1000, 100000, 100001, 64);
    assert_int_not_equal(dlt_grad_buckets_plan(&bk, 10, 4, 4, 3), 0); /* align not a power of two */
    assert_int_not_equal(dlt_grad_buckets_plan(&bk, 0, 4, 4, 4), 0);
    assert_int_not_equal(dlt_grad_buckets_plan(&bk, 10, 4, 0, 4), 0);
    assert_int_not_equal(dlt_grad_buckets_plan(&bk, (size_t)1 << 40, 1, 1, 1), 0); /* 2^40 launches */
}

/* Offsets from the model description vs a brute-force reading of the same. */
static void test_ready_offsets(void **state)
{
    dlt_model m;
    dlt_model_config cfg = {"resnet50", 50, 0, 1.0f, 64, 10, 2};
    dlt_err err = DLT_ERR_INIT;
    size_t *lo;
    (void)state;
    assert_int_equal(dlt_model_build(&m, &cfg, dlt_err_fresh(&err)), 0);
    lo = calloc((size_t)m.nlayers, sizeof(size_t));
    dlt_model_grad_ready_offsets(&m, lo);
    for (int i = 0; i < m.nlayers; i++) {
        size_t want = 0;
        for (int j = 0; j < i; j++) {
            const dlt_layer *l = &m.layers[j];
            if (l->w_len && l->w_off + l->w_len > want)
                want = l->w_off + l->w_len;
            if (l->b_len && l->b_off + l->b_len > want)
                want = l->b_off + l->b_len;
        }
        assert_int_equal(lo[i], want);
        /* Nothing below layer i owns a parameter at or above lo[i]. */
        for (int j = 0; j < i; j++)
            assert_true(m.layers[j].w_len == 0 || m.layers[j].w_off + m.layers[j].w_len <= lo[i]);
    }
    assert_int_equal(lo[0], 0);
    free(lo);
    dlt_model_free(&m);
}

/* ---- backward's hand-off order, on the CPU backend with a recording hook */

typedef struct {
    dlt_net *net;
    float *final; /* the gradients of a plain backward */
    size_t last_lo;
    int calls, violations, finished;
} hook_state;

static hook_state g_hook;

static int _hook_ready(void *arg, size_t lo)
{
    const dlt_net *n = g_hook.net;
    (void)arg;
    g_hook.calls++;
    if (lo >= g_hook.last_lo)
        g_hook.violations++; /* must strictly decrease */
    g_hook.last_lo = lo;
    for (size_t i = lo; i < n->model.nparams; i++)
        if (memcmp(&n->grads[i], &g_hook.final[i], sizeof(float)) != 0) {
            g_hook.violations++;
            break;
        }
    return 0;
}

static int _hook_finish(void *arg)
{
    (void)arg;
    g_hook.finished++;
    return 0;
}

static void test_backward_handoff(void **state)
{
    dlt_backend *be;
    dlt_grad_listener listen = {_hook_ready, _hook_finish, NULL};
    dlt_net net;
    dlt_model_config cfg = {"resnet18", 18, 0, 0.125f, 32, 10, 2};
    dlt_err err = DLT_ERR_INIT;
    uint8_t img[2 * 32 * 32 * 3];
    int32_t labels[2] = {1, 7};
    const float mean[3] = {120, 115, 100}, inv[3] = {0.02f, 0.02f, 0.02f};
    (void)state;
    for (size_t i = 0; i < sizeof(img); i++)
        img[i] = (uint8_t)(i * 37 + 11);
    assert_int_equal(dlt_backend_cpu_create(&be, DLT_PREC_FP32, dlt_err_fresh(&err)), 0);
    assert_int_equal(dlt_net_create(&net, &cfg, be, dlt_err_fresh(&err)), 0);
    dlt_net_init_params(&net, 3, 0);
    assert_int_equal(dlt_net_upload(&net), 0);
    assert_int_equal(be->ops->input_stage(be, img, 2 * 32 * 32), 0);
    assert_int_equal(be->ops->normalize_input(be, dlt_net_input(&net), 2 * 32 * 32, mean, inv), 0);
    /* Reference gradients of a backward without the hook. */
    assert_int_equal(dlt_net_forward(&net, 1), 0);
    assert_int_equal(be->ops->softmax_xent(be, dlt_net_logits(&net), labels, 2, 10, 0.1f, 1.f, dlt_net_dlogits(&net)),
                     0);
    assert_int_equal(dlt_net_backward(&net, NULL), 0);
    g_hook.final = malloc(net.model.nparams * sizeof(float));
    memcpy(g_hook.final, net.grads, net.model.nparams * sizeof(float));
    /* The same step again with the hook, gradients poisoned first. */
    for (size_t i = 0; i < net.model.nparams; i++)
        net.grads[i] = NAN;
    g_hook.net = &net;
    g_hook.last_lo = net.model.nparams + 1;
    assert_int_equal(dlt_net_forward(&net, 1), 0);
    assert_int_equal(be->ops->softmax_xent(be, dlt_net_logits(&net), labels, 2, 10, 0.1f, 1.f, dlt_net_dlogits(&net)),
                     0);
    assert_int_equal(dlt_net_backward(&net, &listen), 0);
    if (g_hook.violations)
        fail_msg("%d hand-offs announced gradients that were not final yet (or lo did not decrease)",
                 g_hook.violations);
    assert_true(g_hook.calls > 10);      /* many hand-offs: the reduction can overlap backward */
    assert_int_equal(g_hook.last_lo, 0); /* the last covers everything */
    assert_int_equal(g_hook.finished, 1);
    assert_memory_equal(net.grads, g_hook.final, net.model.nparams * sizeof(float));
    free(g_hook.final);
    dlt_net_destroy(&net);
    be->ops->destroy(be);
}

/* Copies between host and backend memory and collectives the reducer makes, counted through
 * recording hooks on the ops table and a stand-in host communicator. */
static struct {
    int downloads, uploads, allreduces;
    size_t allreduce_count;
    const dlt_backend_ops *real;
} g_rec;

static int _rec_download(dlt_backend *be, void *dst, const void *src, size_t bytes)
{
    g_rec.downloads++;
    return g_rec.real->download(be, dst, src, bytes);
}

static int _rec_upload(dlt_backend *be, void *dst, const void *src, size_t bytes)
{
    g_rec.uploads++;
    return g_rec.real->upload(be, dst, src, bytes);
}

static int _rec_allreduce(dlt_comm *c, void *buf, size_t count, dlt_dtype type)
{
    (void)c;
    (void)buf;
    (void)type;
    g_rec.allreduces++;
    g_rec.allreduce_count += count;
    return 0;
}

static void _noop_destroy(dlt_comm *c)
{
    (void)c;
}

static void _noop_abort(dlt_comm *c, int code)
{
    (void)c;
    (void)code;
}

/* The reduction path for each kind of run, and what one step's reduction costs: nothing for one
 * rank (a single-GPU run copies no gradients to the host), one in-place collective on the CPU, and
 * one staged round trip for a GPU behind a host communicator. */
static void test_reducer_paths(void **state)
{
    static const dlt_comm_ops host_ops = {"stand-in", _rec_allreduce, NULL, NULL, _noop_destroy, _noop_abort, NULL,
                                          NULL,       NULL,           NULL, NULL, NULL,          NULL};
    const struct {
        int ranks, host_memory;
        const char *path;
        int downloads, uploads, allreduces;
    } cases[] = {
        {1, 0, "none", 0, 0, 0},
        {1, 1, "none", 0, 0, 0},
        {2, 1, "host", 0, 0, 1},
        {4, 0, "host", 1, 1, 1},
    };
    dlt_err err = DLT_ERR_INIT;
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        dlt_backend *be;
        dlt_backend_ops ops;
        dlt_comm comm = {.ops = &host_ops, .rank = 0, .size = cases[i].ranks, .err = &err};
        dlt_grad_reducer *red;
        dlt_grad_listener l;
        const size_t n = 1000;
        float *grads;
        assert_int_equal(dlt_backend_cpu_create(&be, DLT_PREC_FP32, dlt_err_fresh(&err)), 0);
        g_rec.real = be->ops;
        ops = *be->ops;
        ops.download = _rec_download;
        ops.upload = _rec_upload;
        be->ops = &ops;
        be->host_memory = cases[i].host_memory; /* 0: as a GPU's memory would be */
        grads = be->ops->alloc(be, n * sizeof(float));
        assert_non_null(grads);
        assert_int_equal(dlt_grad_reducer_create(&red, NULL, &comm, be, grads, n, dlt_err_fresh(&err)), 0);
        assert_string_equal(red->ops->name, cases[i].path);
        /* --cuda-graphs asks the reducer: the host path waits on the host (a download), so a
         * recorded step cannot hold it; nothing to reduce records trivially. */
        assert_int_equal(dlt_grad_reducer_capturable(red), strcmp(cases[i].path, "host") != 0);
        assert_int_equal(red->divisor, cases[i].ranks); /* a sum: the optimizer divides by the world */
        {
            const dlt_backend_ops *real = g_rec.real;
            memset(&g_rec, 0, sizeof(g_rec));
            g_rec.real = real;
        }
        l = dlt_grad_reducer_listener(red);
        assert_int_equal(l.ready(l.arg, n / 2), 0);
        assert_int_equal(l.ready(l.arg, 0), 0);
        assert_int_equal(l.done(l.arg), 0);
        assert_int_equal(dlt_grad_reducer_finish(red), 0);
        assert_int_equal(g_rec.downloads, cases[i].downloads);
        assert_int_equal(g_rec.uploads, cases[i].uploads);
        assert_int_equal(g_rec.allreduces, cases[i].allreduces);
        if (cases[i].allreduces)
            assert_int_equal(g_rec.allreduce_count, n);
        /* The step's agreement over the results: in place on the CPU, one round trip from a GPU's
         * memory behind a host communicator, nothing for one rank. */
        {
            double *res = be->ops->alloc(be, DLT_RES_COUNT * sizeof(double));
            int d0 = g_rec.downloads, u0 = g_rec.uploads, a0 = g_rec.allreduces;
            assert_int_equal(dlt_grad_reducer_agree(red, res, DLT_RES_COUNT), 0);
            assert_int_equal(g_rec.allreduces - a0, cases[i].ranks > 1);
            assert_int_equal(g_rec.downloads - d0, cases[i].downloads);
            assert_int_equal(g_rec.uploads - u0, cases[i].uploads);
            be->ops->release(be, res);
        }
        dlt_grad_reducer_destroy(red);
        be->ops->release(be, grads);
        be->ops->destroy(be);
    }
}

/* The CPU's bucketed path through a stand-in communicator with a non-blocking sum: every bucket's
 * sum starts once backward has said its gradients are final, top first, each exactly once; later
 * ready calls test the oldest in flight (the progress MPI needs); finish waits for the rest; a
 * request that fails to start ends the call with its error, and the reducer's teardown frees what
 * is still held (ASan and valgrind check). */
static struct {
    float *base;
    size_t started_lo[16], started_n[16], ready_lo;
    int starts, tests, waits, live, fail_start_at;
} g_nb;

static int _nb_start(dlt_comm *c, void *buf, size_t count, dlt_dtype type, void **req)
{
    size_t lo = (size_t)((float *)buf - g_nb.base);
    (void)type;
    if (g_nb.starts == g_nb.fail_start_at)
        return dlt_fail(c->err, -EIO, "stand-in start failure");
    if (lo < g_nb.ready_lo) /* started before backward said these gradients were final */
        fail_msg("bucket at %zu started while backward had finished only >= %zu", lo, g_nb.ready_lo);
    g_nb.started_lo[g_nb.starts] = lo;
    g_nb.started_n[g_nb.starts++] = count;
    *req = calloc(1, sizeof(int)); /* counts its tests: done at the second */
    assert_non_null(*req);
    g_nb.live++;
    return 0;
}

static int _nb_test(dlt_comm *c, void **req, int *done)
{
    (void)c;
    g_nb.tests++;
    *done = ++*(int *)*req >= 2;
    if (*done) {
        free(*req);
        *req = NULL;
        g_nb.live--;
    }
    return 0;
}

static int _nb_wait(dlt_comm *c, void **req)
{
    (void)c;
    if (*req) {
        g_nb.waits++;
        free(*req);
        *req = NULL;
        g_nb.live--;
    }
    return 0;
}

static void test_host_buckets(void **state)
{
    static const dlt_comm_ops nb_ops = {"stand-in-nb", _rec_allreduce, NULL,    NULL, _noop_destroy,
                                        _noop_abort,   NULL,           NULL,    NULL, NULL,
                                        _nb_start,     _nb_test,       _nb_wait};
    const dlt_grad_reducer_config cfg = {.bucket_mib = 4.0}; /* 1,048,576 floats at most; the bottom 262,144 */
    const size_t n = 3000000, steps[] = {2500000, 2000000, 1000000, 262144, 100, 0};
    dlt_err err = DLT_ERR_INIT;
    dlt_backend *be;
    dlt_comm comm = {.ops = &nb_ops, .rank = 0, .size = 2, .err = &err};
    dlt_grad_reducer *red;
    dlt_grad_listener l;
    float *grads;
    (void)state;
    assert_int_equal(dlt_backend_cpu_create(&be, DLT_PREC_FP32, dlt_err_fresh(&err)), 0);
    grads = be->ops->alloc(be, n * sizeof(float));
    assert_non_null(grads);
    {
        assert_int_equal(dlt_grad_reducer_create(&red, &cfg, &comm, be, grads, n, dlt_err_fresh(&err)), 0);
        assert_string_equal(red->ops->name, "host-buckets");
        assert_int_equal(dlt_grad_reducer_capturable(red), 0);
        l = dlt_grad_reducer_listener(red);
        for (int round = 0; round < 2; round++) { /* the second step reuses the plan */
            memset(&g_nb, 0, sizeof(g_nb));
            g_nb.base = grads;
            g_nb.ready_lo = n;
            g_nb.fail_start_at = -1;
            for (size_t k = 0; k < sizeof(steps) / sizeof(steps[0]); k++) {
                g_nb.ready_lo = steps[k];
                assert_int_equal(l.ready(l.arg, steps[k]), 0);
            }
            assert_int_equal(l.done(l.arg), 0);
            assert_int_equal(dlt_grad_reducer_finish(red), 0);
            /* From the bottom: 262,144, then 1,048,576 twice, the top 640,704; started top first. */
            assert_int_equal(g_nb.starts, 4);
            assert_int_equal(g_nb.started_lo[0], 2359296);
            assert_int_equal(g_nb.started_n[0], 640704);
            assert_int_equal(g_nb.started_lo[1], 1310720);
            assert_int_equal(g_nb.started_lo[2], 262144);
            assert_int_equal(g_nb.started_lo[3], 0);
            assert_int_equal(g_nb.started_n[3], 262144);
            assert_true(g_nb.tests >= 2);          /* progress was driven while backward went on */
            assert_true(g_nb.waits < g_nb.starts); /* and some sums were done before finish */
            assert_int_equal(g_nb.live, 0);
        }
        dlt_grad_reducer_destroy(red);
    }
    /* The second bucket cannot start: ready says so; teardown frees the first one's request. */
    assert_int_equal(dlt_grad_reducer_create(&red, &cfg, &comm, be, grads, n, dlt_err_fresh(&err)), 0);
    memset(&g_nb, 0, sizeof(g_nb));
    g_nb.base = grads;
    g_nb.fail_start_at = 1;
    l = dlt_grad_reducer_listener(red);
    assert_int_equal(l.ready(l.arg, 2500000), 0);
    assert_int_equal(l.ready(l.arg, 1000000), -EIO);
    assert_string_equal(err.msg, "stand-in start failure");
    dlt_grad_reducer_destroy(red);
    be->ops->release(be, grads);
    be->ops->destroy(be);
}

/* --allreduce-lowp: each rank's scaled gradient goes through the cast (times the plan's premul,
 * rounded to fp16 once), the ranks' values are summed in fp16 as NCCL sums them, the sum comes back
 * to float and the optimizer multiplies by grad_scale (the loss scaler's unscale over the plan's
 * divisor): the gradient itself must come out, finite, for every world size. A scaled gradient of
 * 2048 (2^-5 at the default loss scale 2^16) summed over 64 ranks without the premul is 131072:
 * beyond fp16's 65504. */
static void test_lowp_reduction_scale(void **state)
{
    static const int worlds[] = {1, 2, 3, 8, 64, 512};
    const double loss_scale = 65536.0, grad = 2048.0 / 65536.0;
    dlt_loss_scaler s;
    (void)state;
    dlt_loss_scaler_init(&s, 1, loss_scale, 0);
    for (size_t i = 0; i < sizeof(worlds) / sizeof(worlds[0]); i++) {
        int w = worlds[i], divisor = 0;
        float premul = 0;
        _Float16 sum = 0;
        double got;
        dlt_grad_lowp_plan(w, &premul, &divisor);
        for (int r = 0; r < w; r++)
            sum = (_Float16)(sum + (_Float16)((float)(grad * loss_scale) * premul));
        got = (double)(float)sum * (double)(float)dlt_loss_scaler_unscale(&s, divisor);
        if (!isfinite((double)(float)sum))
            fail_msg("world %d: the fp16 sum of the scaled gradients overflowed (premul %g, divisor %d)", w,
                     (double)premul, divisor);
        /* fp16 keeps 11 significant bits; w additions round at most w times. */
        if (fabs(got - grad) > grad * (double)w * 0x1p-11)
            fail_msg("world %d: the reduced gradient is %.9g, not %.9g (premul %g, divisor %d)", w, got, grad,
                     (double)premul, divisor);
        /* Together the two factors undo exactly one sum over w ranks. */
        assert_true(fabs((double)premul * w / divisor - 1.0) < 1e-6);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loss_scaler),          cmocka_unit_test(test_bucket_layout),
        cmocka_unit_test(test_ready_offsets),        cmocka_unit_test(test_backward_handoff),
        cmocka_unit_test(test_reducer_paths),        cmocka_unit_test(test_host_buckets),
        cmocka_unit_test(test_lowp_reduction_scale),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
