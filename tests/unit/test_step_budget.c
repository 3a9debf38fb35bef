/* SPDX-License-Identifier: Apache-2.0 */
/* The per-step budget of a training step, counted on the CPU through the same network and loop
 * code the CUDA backend runs: a recording hook on the ops table counts what one steady-state step
 * of ResNet-50 asks of its backend (the difference between a run of 4 steps and one of 3), prints
 * the table, and holds it to the budget: one optimizer launch, no weight re-layout or cast, one
 * blocking read, no copy of the model between host and backend, and host<->backend copies of the
 * batch, its labels and the step's results only. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "trainer/comm/comm.h"
#include "trainer/train/trainer.h"

enum { C_SGD, C_RELAYOUT, C_WAIT, C_H2D, C_D2H, C_H2D_BYTES, C_D2H_BYTES, C_MODEL_COPIES, C_OPS, C_N };

static const char *const g_names[C_N] = {
    "optimizer launches (sgd_step)",
    "weight re-layouts/casts (conv_bind_weights, params_loaded)",
    "host-blocking waits (results_read, download, sync, checksum)",
    "host->backend copies (upload, input, labels, results_put)",
    "backend->host copies (download, results_read, checksum)",
    "host->backend bytes",
    "backend->host bytes",
    "whole-model copies (upload/download of >= the parameters)",
    "ops-table calls in all",
};

/* The recording table: every call counted, then passed to the real backend. */
static struct {
    const dlt_backend_ops *real;
    dlt_backend_ops ops;
    long long c[C_N];
    size_t model_bytes;
    int batch_pixels;
} g;

static void _copy(int dir, size_t bytes)
{
    g.c[dir == 0 ? C_H2D : C_D2H]++;
    g.c[dir == 0 ? C_H2D_BYTES : C_D2H_BYTES] += (long long)bytes;
    if (g.model_bytes && bytes >= g.model_bytes)
        g.c[C_MODEL_COPIES]++;
}

static int _upload(dlt_backend *be, void *dst, const void *src, size_t bytes)
{
    g.c[C_OPS]++;
    _copy(0, bytes);
    return g.real->upload(be, dst, src, bytes);
}

static int _download(dlt_backend *be, void *dst, const void *src, size_t bytes)
{
    g.c[C_OPS]++;
    g.c[C_WAIT]++;
    _copy(1, bytes);
    return g.real->download(be, dst, src, bytes);
}

static int _sync(dlt_backend *be)
{
    g.c[C_OPS]++;
    g.c[C_WAIT]++;
    return g.real->sync(be);
}

static int _bind(dlt_backend *be, dlt_op *op, const float *w)
{
    g.c[C_OPS]++;
    g.c[C_RELAYOUT]++;
    return g.real->conv_bind_weights(be, op, w);
}

static int _params_loaded(dlt_backend *be)
{
    g.c[C_OPS]++;
    g.c[C_RELAYOUT]++;
    return g.real->params_loaded(be);
}

static int _sgd_step(dlt_backend *be, float *w, float *v, const float *gr, float lr, float mu, float wd, float wd_nd,
                     float scale)
{
    g.c[C_OPS]++;
    g.c[C_SGD]++;
    return g.real->sgd_step(be, w, v, gr, lr, mu, wd, wd_nd, scale);
}

static int _results_read(dlt_backend *be, double *host)
{
    g.c[C_OPS]++;
    g.c[C_WAIT]++;
    _copy(1, DLT_RES_COUNT * sizeof(double));
    return g.real->results_read(be, host);
}

static int _results_put(dlt_backend *be, int slot, double v)
{
    g.c[C_OPS]++;
    _copy(0, sizeof(double));
    return g.real->results_put(be, slot, v);
}

static int _checksum(dlt_backend *be, const float *x, size_t n, double *sum)
{
    g.c[C_OPS]++;
    g.c[C_WAIT]++;
    _copy(1, sizeof(double));
    return g.real->checksum(be, x, n, sum);
}

static int _stage(dlt_backend *be, const uint8_t *src, size_t pixels)
{
    g.c[C_OPS]++;
    _copy(0, pixels * 3);
    return g.real->input_stage(be, src, pixels);
}

static int _softmax(dlt_backend *be, const float *z, const int32_t *labels, int n, int k, float sm, float sc, float *dz)
{
    g.c[C_OPS]++;
    _copy(0, (size_t)n * sizeof(int32_t)); /* the labels cross from host memory */
    return g.real->softmax_xent(be, z, labels, n, k, sm, sc, dz);
}

/* Everything else is counted as a call only. */
#define COUNTED(name, params, args)                                                                                    \
    static int _c_##name params                                                                                        \
    {                                                                                                                  \
        g.c[C_OPS]++;                                                                                                  \
        return g.real->name args;                                                                                      \
    }
COUNTED(conv_fwd, (dlt_backend * be, dlt_op *op, const float *x, float *y), (be, op, x, y))
COUNTED(conv_bwd_data, (dlt_backend * be, dlt_op *op, const float *dy, float *dx), (be, op, dy, dx))
COUNTED(conv_bwd_weights, (dlt_backend * be, dlt_op *op, const float *x, const float *dy, float *dw),
        (be, op, x, dy, dw))
COUNTED(copy, (dlt_backend * be, void *d, const void *s, size_t b), (be, d, s, b))
COUNTED(count_nonfinite, (dlt_backend * be, const float *x, size_t n), (be, x, n))
COUNTED(results_reset, (dlt_backend * be), (be))
COUNTED(add_relu, (dlt_backend * be, float *y, const float *a, size_t n), (be, y, a, n))
COUNTED(relu_bwd, (dlt_backend * be, const float *y, const float *dy, float *dz, size_t n), (be, y, dy, dz, n))
COUNTED(accumulate, (dlt_backend * be, float *d, const float *s, size_t n), (be, d, s, n))
COUNTED(normalize_input, (dlt_backend * be, float *d, size_t n, const float m[3], const float i[3]), (be, d, n, m, i))

static void _hook(dlt_backend *be, void *arg)
{
    (void)arg;
    g.real = be->ops;
    g.ops = *be->ops;
    g.ops.upload = _upload;
    g.ops.download = _download;
    g.ops.sync = _sync;
    g.ops.conv_bind_weights = _bind;
    g.ops.params_loaded = _params_loaded;
    g.ops.sgd_step = _sgd_step;
    g.ops.results_read = _results_read;
    g.ops.results_put = _results_put;
    g.ops.checksum = _checksum;
    g.ops.input_stage = _stage;
    g.ops.softmax_xent = _softmax;
    g.ops.conv_fwd = _c_conv_fwd;
    g.ops.conv_bwd_data = _c_conv_bwd_data;
    g.ops.conv_bwd_weights = _c_conv_bwd_weights;
    g.ops.copy = _c_copy;
    g.ops.count_nonfinite = _c_count_nonfinite;
    g.ops.results_reset = _c_results_reset;
    g.ops.add_relu = _c_add_relu;
    g.ops.relu_bwd = _c_relu_bwd;
    g.ops.accumulate = _c_accumulate;
    g.ops.normalize_input = _c_normalize_input;
    be->ops = &g.ops;
    /* Treated as a GPU's memory (the CPU backend's upload/download are copies): every crossing
     * between host and backend memory goes through the counted ops, as it would on a GPU. */
    be->host_memory = 0;
}

/* A ResNet-50 training run of `steps` steps on small synthetic images; the counts of the whole run. */
static void _run(int64_t steps, long long *out)
{
    dlt_train_config c;
    dlt_comm *comm;
    dlt_err err = DLT_ERR_INIT;
    char dir[] = "/tmp/dlt-budget-XXXXXX", cmd[64];
    assert_non_null(mkdtemp(dir));
    dlt_train_config_defaults(&c);
    assert_int_equal(dlt_model_parse_arch("resnet50", &c.model, dlt_err_fresh(&err)), 0);
    c.model.image = 32;
    c.model.batch = 2;
    c.model.classes = 10;
    c.backend.kind = "cpu";
    c.synthetic_size = 64; /* 32 steps per epoch: no epoch boundary in the run */
    c.epochs = 1;
    c.max_steps = steps;
    c.eval_every = 0;
    c.log_level = DLT_LOG_QUIET;
    c.log_every = 0;
    c.stall_timeout = 0;
    c.checkpoint_dir = dir;
    c.backend_hook = _hook;
    memset(&g, 0, sizeof(g));
    /* ResNet-50's 25,557,032 parameters (torchvision) at 10 classes: 23,528,522. */
    g.model_bytes = 23528522 * sizeof(float);
    assert_int_equal(dlt_comm_single_create(&comm, dlt_err_fresh(&err)), 0);
    if (dlt_train_run(&c, comm, dlt_err_fresh(&err)) != 0)
        fail_msg("training run of %lld steps: %s", (long long)steps, err.msg);
    comm->ops->destroy(comm);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    memcpy(out, g.c, sizeof(g.c));
}

static void test_step_budget(void **state)
{
    long long a[C_N], b[C_N], d[C_N];
    (void)state;
    _run(3, a);
    _run(4, b);
    printf("# one steady-state training step of ResNet-50 (batch 2, 32x32, 10 classes; 4 steps - 3 steps)\n");
    for (int i = 0; i < C_N; i++) {
        d[i] = b[i] - a[i];
        printf("#   %-62s %10lld\n", g_names[i], d[i]);
    }
    fflush(stdout);
    /* The budget. */
    if (d[C_SGD] != 1)
        fail_msg("%lld optimizer launches per step: the budget is one (a flat sgd_step over all parameters)", d[C_SGD]);
    if (d[C_RELAYOUT] != 0)
        fail_msg("%lld weight re-layouts per step: the budget is none (sgd_step keeps derived weights current)",
                 d[C_RELAYOUT]);
    if (d[C_WAIT] > 1)
        fail_msg("%lld host-blocking waits per step: the budget is one (the results' read)", d[C_WAIT]);
    if (d[C_MODEL_COPIES] != 0)
        fail_msg("%lld whole-model copies per step: only checkpoints and replica checks may copy the model",
                 d[C_MODEL_COPIES]);
    /* What crosses: the batch's pixels and labels in, this rank's stop and input flags (one double
     * each, put every step so a recorded step has them), the results out. */
    assert_int_equal(d[C_H2D_BYTES], 2 * 32 * 32 * 3 + 2 * (long long)sizeof(int32_t) + 2 * (long long)sizeof(double));
    assert_int_equal(d[C_D2H_BYTES], DLT_RES_COUNT * (long long)sizeof(double));
    /* The whole run's copies of the model: the initial upload and the final checkpoint's download
     * (parameters and momentum each way), no more. */
    if (b[C_MODEL_COPIES] > 4)
        fail_msg("%lld whole-model copies in a 4-step run (initial upload + final checkpoint: 4)", b[C_MODEL_COPIES]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_step_budget),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
