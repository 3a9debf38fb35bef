/* SPDX-License-Identifier: Apache-2.0 */
/* step_verbs: what the steps of training, evaluation and the benchmark do to a run's parts: load a
 * batch (or read the next one ahead), forward and loss, read the step's results, give the batches
 * back. The training step itself, which uses them, is step.c. */
#include "config.h"

#include "trainer/train/step_verbs.h"

#include <errno.h>
#include <stddef.h>

#include "common/status.h"

/* ImageNet channel statistics (0..255 scale), as torchvision's Normalize. */
static const float g_mean[3] = {123.675f, 116.28f, 103.53f};
static const float g_inv_std[3] = {1.f / 58.395f, 1.f / 57.12f, 1.f / 57.375f};

/* Acquires (epoch, step) from src and queues its copy to the backend. */
static int _stage(dlt_run *r, dlt_source *src, int64_t epoch, int64_t step, const uint8_t **images,
                  const int32_t **labels, dlt_err *err)
{
    const dlt_train_config *c = &r->cfg;
    size_t pixels = (size_t)c->model.batch * c->model.image * c->model.image;
    int rc;
    if ((rc = dlt_source_acquire(src, epoch, step, images, labels, err)) != 0)
        return rc;
    if (src == &r->src)
        r->held++;
    if ((rc = r->be->ops->input_stage(r->be, *images, pixels)) != 0)
        return dlt_fail_prefix(err, rc, "input copy");
    return 0;
}

static int _normalize(dlt_run *r)
{
    const dlt_train_config *c = &r->cfg;
    size_t pixels = (size_t)c->model.batch * c->model.image * c->model.image;
    int rc = r->be->ops->normalize_input(r->be, dlt_net_input(&r->net), pixels, g_mean, g_inv_std);
    return rc ? dlt_fail_prefix(r->err, rc, "input") : 0;
}

void dlt_run_prefetch(dlt_run *r, int64_t epoch, int64_t step)
{
    if (r->next.ready)
        return;
    r->next.ready = 1;
    r->next.epoch = epoch;
    r->next.step = step;
    dlt_err_clear(&r->next.err);
    {
        /* the staging's backend words belong to that batch too, said when its step loads it */
        dlt_err *run_err = r->be->err;
        r->be->err = &r->next.err;
        r->next.rc = _stage(r, &r->src, epoch, step, &r->next.images, &r->next.labels, &r->next.err);
        r->be->err = run_err;
    }
}

int dlt_run_load_batch(dlt_run *r, int64_t epoch, int64_t step)
{
    int rc;
    r->labels = r->no_labels; /* until this step's batch is there */
    if (r->next.ready) {
        r->next.ready = 0;
        if (r->next.epoch != epoch || r->next.step != step)
            return dlt_fail(r->err, -EPROTO, "the batch read ahead is epoch %lld step %lld, not %lld/%lld",
                            (long long)r->next.epoch, (long long)r->next.step, (long long)epoch, (long long)step);
        if (r->next.rc != 0) {
            dlt_fail_take(r->err, &r->next.err);
            return r->next.rc;
        }
        r->images = r->next.images;
        r->labels = r->next.labels;
    } else if ((rc = _stage(r, &r->src, epoch, step, &r->images, &r->labels, r->err)) != 0) {
        return rc;
    }
    return _normalize(r);
}

void dlt_run_release_batches(dlt_run *r)
{
    int keep = r->next.ready && r->next.rc == 0; /* the batch read ahead is still being copied */
    while (r->held > keep) {
        dlt_source_release(&r->src);
        r->held--;
    }
}

int dlt_run_eval_batch(dlt_run *r, dlt_source *src, int64_t step, int *valid, int *unscored)
{
    int rc;
    if ((rc = _stage(r, src, 0, step, &r->images, &r->labels, r->err)) != 0 || (rc = _normalize(r)) != 0)
        return rc;
    *valid = dlt_source_last_valid(src); /* a rank's last batch may be short: score its real images only */
    *unscored = 0;
    for (int i = 0; i < *valid; i++) /* the labels stay in host memory until the batch is released */
        *unscored += r->labels[i] == DLT_LABEL_UNSCORED;
    if ((rc = dlt_run_forward_loss(r, 0, *valid)) != 0)
        return rc;
    /* The batch's memory goes back to the source once the backend has read it. */
    if ((rc = r->be->ops->sync(r->be)) != 0)
        return dlt_fail_prefix(r->err, rc, "device");
    if (src == &r->src)
        r->held--;
    dlt_source_release(src);
    return 0;
}

int dlt_run_forward_loss(dlt_run *r, int training, int n)
{
    const dlt_train_config *c = &r->cfg;
    dlt_net *net = &r->net;
    int rc;
    if ((rc = dlt_net_forward(net, training)) != 0)
        return dlt_fail_prefix(r->err, rc, "forward");
    if ((rc = r->be->ops->softmax_xent(
             r->be, dlt_net_logits(net), r->labels, n, c->model.classes, training ? (float)c->label_smoothing : 0.f,
             training ? (float)r->scaler.scale : 1.f, training ? dlt_net_dlogits(net) : NULL)) != 0)
        return dlt_fail_prefix(r->err, rc, "loss");
    return 0;
}

static int _read_results(dlt_run *r, double *res, int64_t unscored)
{
    int rc = r->be->ops->results_read(r->be, res);
    if (rc)
        return dlt_fail_prefix(r->err, rc, "step results");
    if (res[DLT_RES_BAD_LABELS] > (double)unscored)
        return dlt_fail(r->err, -EINVAL,
                        "%.0f label(s) outside 0..%d (the data's classes do not match "
                        "--classes %d?)",
                        res[DLT_RES_BAD_LABELS] - (double)unscored, r->cfg.model.classes - 1, r->cfg.model.classes);
    return 0;
}

int dlt_run_read_results(dlt_run *r, double *res)
{
    return _read_results(r, res, 0);
}

int dlt_run_read_eval_results(dlt_run *r, double *res, int64_t unscored)
{
    return _read_results(r, res, unscored);
}
