/* SPDX-License-Identifier: Apache-2.0 */
/* op_profile: where a training step's time goes, by class of backend op (op_profile.h). */
#include "config.h"

#include "trainer/backend/op_profile.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "common/clock.h"

static const char *const g_names[DLT_OPC_COUNT] = {
    "conv forward", "conv backward data", "conv backward filter", "batch norm", "element-wise",
    "pooling",      "fully connected",    "loss and checks",      "input",      "SGD",
    "copies",
};
static const char *const g_keys[DLT_OPC_COUNT] = {
    "conv_fwd", "conv_bwd_data", "conv_bwd_filter", "batch_norm", "elementwise", "pooling",
    "fc",       "loss",          "input",           "sgd",        "copy",
};

/* The profile whose table be->ops is (while attached, be->ops == &p->ops). */
static dlt_op_profile *_of(dlt_backend *be)
{
    return (dlt_op_profile *)(void *)((char *)(uintptr_t)be->ops - offsetof(dlt_op_profile, ops));
}

static int _capacity(const dlt_op_profile *p)
{
    return p->be->timer && p->be->timer->slots < DLT_OP_PROFILE_MARKS ? p->be->timer->slots : DLT_OP_PROFILE_MARKS;
}

static int _mark(dlt_op_profile *p, int slot)
{
    if (p->be->timer)
        return p->be->timer->mark(p->be, slot);
    p->host_mark[slot] = dlt_now();
    return 0;
}

/* The mark before a timed call of class k: its slot, -1 when the step has no marks left (the call
 * runs untimed), or a negative status below -1 when the mark failed. */
static int _open(dlt_op_profile *p, dlt_op_class k)
{
    int s = p->marks, rc;
    if (s < 1 || s + 3 > _capacity(p)) { /* room for this pair and the step's last mark */
        p->overflow |= s >= 1;
        return -1;
    }
    if ((rc = _mark(p, s)) != 0)
        return rc < -1 ? rc : -EIO;
    p->klass[(s - 1) / 2] = (unsigned char)k;
    p->marks = s + 2;
    return s;
}

static int _close(dlt_op_profile *p, int s, int rc)
{
    if (s >= 0 && rc == 0)
        rc = _mark(p, s + 1);
    return rc;
}

#define TIMED(name, klass, params, args)                                                                               \
    static int _t_##name params                                                                                        \
    {                                                                                                                  \
        dlt_op_profile *prof_ = _of(be);                                                                               \
        int mark_ = _open(prof_, klass);                                                                               \
        if (mark_ < -1)                                                                                                \
            return mark_;                                                                                              \
        return _close(prof_, mark_, prof_->real->name args);                                                           \
    }

TIMED(conv_fwd, DLT_OPC_CONV_FWD, (dlt_backend * be, dlt_op *op, const float *x, float *y), (be, op, x, y))
TIMED(conv_bwd_data, DLT_OPC_CONV_BWD_DATA, (dlt_backend * be, dlt_op *op, const float *dy, float *dx),
      (be, op, dy, dx))
TIMED(conv_bwd_data_add, DLT_OPC_CONV_BWD_DATA, (dlt_backend * be, dlt_op *op, const float *dy, float *dx),
      (be, op, dy, dx))
TIMED(conv_bwd_weights, DLT_OPC_CONV_BWD_FILTER,
      (dlt_backend * be, dlt_op *op, const float *x, const float *dy, float *dw), (be, op, x, dy, dw))
TIMED(bn_fwd_train, DLT_OPC_BN,
      (dlt_backend * be, dlt_op *op, const float *x, const float *g, const float *b, float *y, float *m, float *v),
      (be, op, x, g, b, y, m, v))
TIMED(bn_fwd_infer, DLT_OPC_BN,
      (dlt_backend * be, dlt_op *op, const float *x, const float *g, const float *b, const float *m, const float *v,
       float *y),
      (be, op, x, g, b, m, v, y))
TIMED(bn_bwd, DLT_OPC_BN,
      (dlt_backend * be, dlt_op *op, const float *x, const float *dy, const float *g, const float *b, const float *m,
       const float *v, float *dx, float *dg, float *db),
      (be, op, x, dy, g, b, m, v, dx, dg, db))
TIMED(bn_stats_update, DLT_OPC_BN,
      (dlt_backend * be, float *rm, float *rv, const float *m, const float *v, int c, float mom, float unbias),
      (be, rm, rv, m, v, c, mom, unbias))
TIMED(bn_fwd_train_relu, DLT_OPC_BN,
      (dlt_backend * be, dlt_op *op, const float *x, const float *z, const float *g, const float *b, float *y, float *m,
       float *v),
      (be, op, x, z, g, b, y, m, v))
TIMED(bn_bwd_relu, DLT_OPC_BN,
      (dlt_backend * be, dlt_op *op, const float *x, const float *y, const float *dy, const float *g, const float *b,
       float *dx, float *dz, float *dg, float *db),
      (be, op, x, y, dy, g, b, dx, dz, dg, db))
TIMED(conv_fwd_stats, DLT_OPC_CONV_FWD,
      (dlt_backend * be, dlt_op *op, const float *x, const float *sb, float *y, float *st), (be, op, x, sb, y, st))
TIMED(conv_bwd_weights_pro, DLT_OPC_CONV_BWD_FILTER,
      (dlt_backend * be, dlt_op *op, const float *x, const float *sb, const float *dy, float *dw),
      (be, op, x, sb, dy, dw))
TIMED(bn_finalize, DLT_OPC_BN,
      (dlt_backend * be, dlt_op *op, const float *st, const float *g, const float *b, float *m, float *v, float *sb),
      (be, op, st, g, b, m, v, sb))
TIMED(bn_apply, DLT_OPC_BN,
      (dlt_backend * be, dlt_op *op, const float *x, const float *sb, const float *z, const float *zsb, int relu,
       float *y),
      (be, op, x, sb, z, zsb, relu, y))
TIMED(bn_bwd_fused, DLT_OPC_BN,
      (dlt_backend * be, dlt_op *op, const float *x, const float *y, const float *sb, int relu, const float *dy,
       const float *g, const float *m, const float *v, float *dx, float *dz, float *dg, float *db),
      (be, op, x, y, sb, relu, dy, g, m, v, dx, dz, dg, db))
TIMED(maxpool_fwd, DLT_OPC_POOL, (dlt_backend * be, dlt_op *op, const float *x, float *y), (be, op, x, y))
TIMED(maxpool_bwd, DLT_OPC_POOL, (dlt_backend * be, dlt_op *op, const float *dy, float *dx), (be, op, dy, dx))
TIMED(avgpool_fwd, DLT_OPC_POOL, (dlt_backend * be, const dlt_act_shape *s, const float *x, float *y), (be, s, x, y))
TIMED(avgpool_bwd, DLT_OPC_POOL, (dlt_backend * be, const dlt_act_shape *s, const float *dy, float *dx),
      (be, s, dy, dx))
TIMED(add_relu, DLT_OPC_ELEMENTWISE, (dlt_backend * be, float *y, const float *a, size_t n), (be, y, a, n))
TIMED(relu_bwd, DLT_OPC_ELEMENTWISE, (dlt_backend * be, const float *y, const float *dy, float *dz, size_t n),
      (be, y, dy, dz, n))
TIMED(accumulate, DLT_OPC_ELEMENTWISE, (dlt_backend * be, float *d, const float *s, size_t n), (be, d, s, n))
TIMED(fc_fwd, DLT_OPC_FC,
      (dlt_backend * be, const float *x, const float *w, const float *b, float *y, int n, int c, int k),
      (be, x, w, b, y, n, c, k))
TIMED(fc_bwd, DLT_OPC_FC,
      (dlt_backend * be, const float *x, const float *w, const float *dy, float *dx, float *dw, float *db, int n, int c,
       int k),
      (be, x, w, dy, dx, dw, db, n, c, k))
TIMED(softmax_xent, DLT_OPC_LOSS,
      (dlt_backend * be, const float *z, const int32_t *l, int n, int k, float sm, float sc, float *dz),
      (be, z, l, n, k, sm, sc, dz))
TIMED(count_nonfinite, DLT_OPC_LOSS, (dlt_backend * be, const float *x, size_t n), (be, x, n))
TIMED(results_reset, DLT_OPC_LOSS, (dlt_backend * be), (be))
TIMED(results_put, DLT_OPC_LOSS, (dlt_backend * be, int slot, double v), (be, slot, v))
TIMED(results_read, DLT_OPC_LOSS, (dlt_backend * be, double *host), (be, host))
TIMED(checksum, DLT_OPC_LOSS, (dlt_backend * be, const float *x, size_t n, double *sum), (be, x, n, sum))
TIMED(input_stage, DLT_OPC_INPUT, (dlt_backend * be, const uint8_t *src, size_t px), (be, src, px))
TIMED(normalize_input, DLT_OPC_INPUT,
      (dlt_backend * be, float *d, size_t px, const float mean[3], const float inv_std[3]), (be, d, px, mean, inv_std))
TIMED(sgd_step, DLT_OPC_SGD,
      (dlt_backend * be, float *w, float *v, const float *g, float lr, float mu, float wd, float wdn, float sc),
      (be, w, v, g, lr, mu, wd, wdn, sc))
TIMED(copy, DLT_OPC_COPY, (dlt_backend * be, void *d, const void *s, size_t b), (be, d, s, b))
TIMED(upload, DLT_OPC_COPY, (dlt_backend * be, void *d, const void *s, size_t b), (be, d, s, b))
TIMED(download, DLT_OPC_COPY, (dlt_backend * be, void *d, const void *s, size_t b), (be, d, s, b))

void dlt_op_profile_attach(dlt_op_profile *p, dlt_backend *be)
{
    memset(p, 0, sizeof(*p));
    p->be = be;
    p->real = be->ops;
    p->ops = *be->ops;
    /* Optional ops stay absent where the backend has none. */
#define WRAP(name)                                                                                                     \
    if (p->real->name)                                                                                                 \
    p->ops.name = _t_##name
    WRAP(conv_fwd);
    WRAP(conv_bwd_data);
    WRAP(conv_bwd_data_add);
    WRAP(conv_bwd_weights);
    WRAP(bn_fwd_train);
    WRAP(bn_fwd_infer);
    WRAP(bn_bwd);
    WRAP(bn_stats_update);
    WRAP(bn_fwd_train_relu);
    WRAP(bn_bwd_relu);
    WRAP(conv_fwd_stats);
    WRAP(conv_bwd_weights_pro);
    WRAP(bn_finalize);
    WRAP(bn_apply);
    WRAP(bn_bwd_fused);
    WRAP(maxpool_fwd);
    WRAP(maxpool_bwd);
    WRAP(avgpool_fwd);
    WRAP(avgpool_bwd);
    WRAP(add_relu);
    WRAP(relu_bwd);
    WRAP(accumulate);
    WRAP(fc_fwd);
    WRAP(fc_bwd);
    WRAP(softmax_xent);
    WRAP(count_nonfinite);
    WRAP(results_reset);
    WRAP(results_put);
    WRAP(results_read);
    WRAP(checksum);
    WRAP(input_stage);
    WRAP(normalize_input);
    WRAP(sgd_step);
    WRAP(copy);
    WRAP(upload);
    WRAP(download);
#undef WRAP
    be->ops = &p->ops;
}

void dlt_op_profile_detach(dlt_op_profile *p)
{
    if (p->be && p->be->ops == &p->ops)
        p->be->ops = p->real;
}

int dlt_op_profile_step_begin(dlt_op_profile *p)
{
    int rc;
    p->marks = 0;
    if ((rc = _mark(p, 0)) != 0)
        return rc;
    p->marks = 1;
    return 0;
}

static int _elapsed(dlt_op_profile *p, int a, int b, double *ms)
{
    float f = 0;
    int rc;
    if (!p->be->timer) {
        *ms = (p->host_mark[b] - p->host_mark[a]) * 1e3;
        return 0;
    }
    if ((rc = p->be->timer->elapsed_ms(p->be, a, b, &f)) != 0)
        return rc;
    *ms = f;
    return 0;
}

int dlt_op_profile_step_end(dlt_op_profile *p)
{
    int last = p->marks, rc;
    double step, ms;
    if (last < 1)
        return dlt_fail(p->be->err, -EINVAL, "op profile: the step's end without its beginning");
    if ((rc = _mark(p, last)) != 0)
        return rc;
    /* The whole step first: on a GPU that waits for its last mark, and with it every earlier one. */
    if ((rc = _elapsed(p, 0, last, &step)) != 0)
        return rc;
    for (int s = 1; s + 1 < last; s += 2) { /* the calls' pairs: marks s and s + 1 */
        const dlt_op_class k = (dlt_op_class)p->klass[(s - 1) / 2];
        if ((rc = _elapsed(p, s, s + 1, &ms)) != 0)
            return rc;
        p->ms[k] += ms;
        p->calls[k]++;
    }
    p->step_ms += step;
    p->steps++;
    p->marks = 0;
    return 0;
}

void dlt_op_profile_print(const dlt_op_profile *p, FILE *f, const char *timeline)
{
    double step = p->steps ? p->step_ms / p->steps : 0, timed = 0;
    if (!p->steps)
        return;
    fprintf(f, "dltrain: where a step's time goes (%d steps, each call timed %s):\n", p->steps, timeline);
    fprintf(f, "dltrain:   %-22s %10s %7s %10s\n", "class", "ms/step", "share", "calls/step");
    for (int k = 0; k < DLT_OPC_COUNT; k++) {
        double ms = p->ms[k] / p->steps;
        timed += ms;
        if (p->calls[k])
            fprintf(f, "dltrain:   %-22s %10.3f %6.1f%% %10.1f\n", g_names[k], ms, step > 0 ? 100 * ms / step : 0,
                    (double)p->calls[k] / p->steps);
    }
    fprintf(f, "dltrain:   %-22s %10.3f %6.1f%% %10s  (between the timed calls: waits for the all-reduce, host gaps)\n",
            "other", step - timed, step > 0 ? 100 * (step - timed) / step : 0, "-");
    fprintf(f, "dltrain:   %-22s %10.3f %6.1f%%\n", "step", step, 100.0);
    if (p->overflow)
        fprintf(f,
                "dltrain: some steps had more calls than the profile holds (%d marks): their last calls are in "
                "\"other\"\n",
                DLT_OP_PROFILE_MARKS);
}

void dlt_op_profile_json(const dlt_op_profile *p, FILE *f)
{
    double step = p->steps ? p->step_ms / p->steps : 0, timed = 0;
    fprintf(f, "\"profile\":{\"steps\":%d,\"step_ms\":%.4f,\"classes\":{", p->steps, step);
    for (int k = 0; k < DLT_OPC_COUNT; k++) {
        double ms = p->steps ? p->ms[k] / p->steps : 0;
        timed += ms;
        fprintf(f, "\"%s\":{\"ms\":%.4f,\"share\":%.5f,\"calls\":%.2f},", g_keys[k], ms, step > 0 ? ms / step : 0,
                p->steps ? (double)p->calls[k] / p->steps : 0);
    }
    fprintf(f, "\"other\":{\"ms\":%.4f,\"share\":%.5f}},\"overflow\":%s}", step - timed,
            step > 0 ? (step - timed) / step : 0, p->overflow ? "true" : "false");
}
