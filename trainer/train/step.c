/* SPDX-License-Identifier: Apache-2.0 */
/* step: one training step, top to bottom (see step.h). Every failure is recorded in the run's
 * error (r->err, the first kept). */
#include "config.h"

#include "trainer/train/step.h"
#include "trainer/train/step_verbs.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/clock.h"
#include "common/io.h"
#include "common/status.h"

/* --dump-batch: the batch exactly as the network gets it before normalisation, for comparisons
 * with another framework: batch x image x image x 3 uint8 (NHWC), then batch int32 labels. */
static int _dump_batch(dlt_run *r)
{
    const dlt_train_config *c = &r->cfg;
    size_t px = (size_t)c->model.batch * c->model.image * c->model.image * 3;
    dlt_err why = DLT_ERR_INIT;
    FILE *f = dlt_fopen_regular("--dump-batch", c->dump_batch, "wb", &why);
    if (!f)
        return dlt_fail(r->err, -EIO, "%s", why.msg);
    if (fwrite(r->images, 1, px, f) != px ||
        fwrite(r->labels, sizeof(int32_t), (size_t)c->model.batch, f) != (size_t)c->model.batch) {
        fclose(f);
        return dlt_fail(r->err, -EIO, "--dump-batch %s: cannot write it", c->dump_batch);
    }
    if (fclose(f) != 0)
        return dlt_fail(r->err, -EIO, "--dump-batch %s: cannot write it", c->dump_batch);
    return 0;
}

/* A batch that cannot be loaded does not end the step here: the rank computes on the previous
 * input (discarded) so that the step's collectives still match, and says at the agreement that it
 * cannot go on; the reason is kept for the end. */
static int _load_batch(dlt_run *r, dlt_step_state *s, const dlt_step_plan *p, dlt_step_result *out)
{
    int rc;
    out->t0 = dlt_now();
    dlt_watchdog_phase(p->wd, DLT_PHASE_DATA, p->index + 1);
    int had = r->err->code != 0;
    if ((rc = dlt_run_load_batch(r, p->index / p->spe, p->index % p->spe)) != 0) {
        dlt_fail_prefix(r->err, rc, "input");
        snprintf(s->input_err, sizeof(s->input_err), "%.1000s", r->err->msg);
        if (!had) /* held aside: the step's agreement decides, and says it with the step */
            dlt_err_clear(r->err);
        s->input_failed = 1; /* the labels are class 0 (r->no_labels): the loss stays defined; nothing is applied */
    }
    out->t_data = dlt_now();
    if (r->cfg.dump_batch && !s->input_failed && s->dumped++ == 0 && r->comm->rank == 0)
        return _dump_batch(r);
    return 0;
}

/* The agreement: the gradient sum completes, fp16 overflow is counted on it (the same on every
 * rank), this rank's stop request and input failure join the results, and the results are summed
 * over the ranks: all queued, nothing waits. */
static int _agree(dlt_run *r, int stop, int input_failed, double *agree_s)
{
    dlt_backend *be = r->be;
    double t0 = dlt_now();
    int rc;
    DLT_TRY_GOTO(r->err, rc, dlt_grad_reducer_finish(r->reducer), fail, "gradient all-reduce");
    if (r->scaler.enabled)
        DLT_TRY_GOTO(r->err, rc, be->ops->count_nonfinite(be, r->net.grads, r->net.model.nparams), fail,
                     "gradient check");
    /* Both put every step, so a recorded step has both (a replay sets their values). */
    DLT_TRY_GOTO(r->err, rc, be->ops->results_put(be, DLT_RES_STOP, stop ? 1.0 : 0.0), fail, "step results");
    DLT_TRY_GOTO(r->err, rc, be->ops->results_put(be, DLT_RES_INPUT_FAILED, input_failed ? 1.0 : 0.0), fail,
                 "step results");
    DLT_TRY_GOTO(r->err, rc, dlt_grad_reducer_agree(r->reducer, be->results, DLT_RES_COUNT), fail, "step agreement");
    *agree_s = dlt_now() - t0;
fail:
    return rc;
}

/* SGD with momentum at lr over every parameter (one sgd_step), undoing the loss scale and the rank
 * sum (unless the reduction already averaged: lowp). */
static int _sgd(dlt_run *r, double lr)
{
    const dlt_train_config *c = &r->cfg;
    dlt_net *n = &r->net;
    float scale = (float)dlt_loss_scaler_unscale(&r->scaler, r->reducer->divisor);
    float wd = (float)c->weight_decay, wd_nd = c->decay_bn_bias ? wd : 0.f;
    int rc;
    DLT_TRY_GOTO(r->err, rc,
                 r->be->ops->sgd_step(r->be, n->d_params, n->d_momentum, n->grads, (float)lr, (float)c->momentum, wd,
                                      wd_nd, scale),
                 fail, "SGD update");
fail:
    return rc;
}

/* Everything the step queues after its batch is in. */
static int _queue_plain(dlt_run *r, double lr, int stop, int input_failed, double *agree_s)
{
    dlt_grad_listener listen = dlt_grad_reducer_listener(r->reducer);
    int rc;
    DLT_TRY_GOTO(r->err, rc, r->be->ops->results_reset(r->be), fail, "step results");
    DLT_TRY_GOTO(r->err, rc, dlt_run_forward_loss(r, 1, r->cfg.model.batch), fail, NULL);
    DLT_TRY_GOTO(r->err, rc, dlt_net_backward(&r->net, &listen), fail, "backward");
    if ((rc = _agree(r, stop, input_failed, agree_s)) != 0 || (rc = _sgd(r, lr)) != 0)
        goto fail;
fail:
    return rc;
}

/* With --cuda-graphs the second step is recorded as a CUDA graph, the whole step (the first ran
 * plainly, so every lazily made buffer exists), and later steps replay it with their labels, lr
 * and flags; a new loss scale (a kernel argument of the recording) records again. */
static int _queue(dlt_run *r, dlt_step_state *s, double lr, int stop, double *agree_s)
{
    dlt_backend *be = r->be;
    const dlt_graph_ops *g = be->graphs;
    dlt_step_inputs in = {r->labels, r->cfg.model.batch, (float)lr, stop ? 1.0 : 0.0, s->input_failed ? 1.0 : 0.0};
    int rc, recording = 0;
    if (!r->cfg.cuda_graphs || !s->graph_warm) {
        s->graph_warm = 1;
        return _queue_plain(r, lr, stop, s->input_failed, agree_s);
    }
    if (s->graph_ready && s->graph_scale == r->scaler.scale) {
        DLT_TRY_GOTO(r->err, rc, g->replay(be, &in), fail, "CUDA graph replay");
        dlt_net_bn_replayed(&r->net);
        return 0;
    }
    s->graph_ready = 0;
    DLT_TRY_GOTO(r->err, rc, g->capture_begin(be), fail, "CUDA graph capture");
    recording = 1;
    if ((rc = _queue_plain(r, lr, stop, s->input_failed, agree_s)) != 0)
        goto fail;
    recording = 0; /* capture_end ends the recording whatever it returns */
    DLT_TRY_GOTO(r->err, rc, g->capture_end(be), fail, "CUDA graph");
    DLT_TRY_GOTO(r->err, rc, g->replay(be, &in), fail, "CUDA graph");
    s->graph_ready = 1;
    s->graph_scale = r->scaler.scale;
    return 0;
fail:
    if (recording)
        g->release(be); /* the partial recording is dropped, never instantiated; the stream is usable */
    return rc;
}

int dlt_step_queue(dlt_run *r, dlt_step_state *s, double lr, int stop, double *agree_s)
{
    *agree_s = 0;
    return _queue(r, s, lr, stop, agree_s);
}

/* The one read: every rank sees the same results, so every rank takes the same decisions. */
static int _read_results(dlt_run *r, dlt_step_state *s, const dlt_step_plan *p, dlt_step_result *out)
{
    int rc;
    dlt_watchdog_phase(p->wd, DLT_PHASE_ALLREDUCE, p->index + 1);
    out->t_wait = dlt_now();
    DLT_TRY_GOTO(r->err, rc, dlt_run_read_results(r, out->res), fail, NULL);
    dlt_run_release_batches(r); /* the backend has read this step's batch */
    out->t_agreed = dlt_now();
    if (out->res[DLT_RES_INPUT_FAILED] > 0) { /* every rank sees it: all stop at this step, no update */
        if (s->input_failed)
            return dlt_fail_agreed(r->err, -EIO, "%s (every rank stops at step %" PRId64 ")", s->input_err,
                                   p->index + 1);
        return dlt_fail_agreed(r->err, -ECANCELED,
                               "stopping at step %" PRId64 ": %.0f other rank(s) could not load their batch (their "
                               "messages name the file and the cause)",
                               p->index + 1, out->res[DLT_RES_INPUT_FAILED]);
    }
fail:
    return rc;
}

/* The host's side of an applied or skipped update. A skipped step (non-finite loss, fp16
 * overflow; the backend already left weights and momentum untouched) gets its batch-norm
 * statistics restored, so it leaves no trace; the step still counts so the data moves on. */
static int _settle(dlt_run *r, dlt_step_state *s, const dlt_step_plan *p, const dlt_step_result *out)
{
    const dlt_train_config *c = &r->cfg;
    int apply, rc;
    dlt_watchdog_phase(p->wd, DLT_PHASE_COMPUTE, p->index + 1);
    if (!isfinite(out->res[DLT_RES_LOSS])) {
        /* the summed loss is the same on every rank: all decide alike */
        if (++s->bad_steps > c->max_bad_steps) {
            char kept[160];
            if (r->saved_step >= 0)
                snprintf(kept, sizeof(kept), "the newest checkpoint (step %" PRId64 ") is intact", r->saved_step);
            else
                snprintf(kept, sizeof(kept), "no checkpoint was written%s",
                         c->checkpoint_dir ? " (none before the loss went bad)" : " (no --checkpoint-dir)");
            return dlt_fail_agreed(r->err, -ERANGE,
                                   "loss not finite for %d consecutive steps (last at step %" PRId64 "): stopping; %s "
                                   "(lower --lr?)",
                                   s->bad_steps, p->index + 1, kept);
        }
        if (r->comm->rank == 0)
            dlt_log_warn(&r->log, "loss is %g at step %" PRId64 ": update skipped (%d of %d allowed in a row)",
                         out->res[DLT_RES_LOSS], p->index + 1, s->bad_steps, c->max_bad_steps);
        apply = 0;
    } else {
        /* An fp16 overflow is a normal event while the scale settles, not a divergence. */
        s->bad_steps = 0;
        apply = dlt_loss_scaler_update(&r->scaler, out->res[DLT_RES_NONFINITE] != 0);
    }
    if (apply != !dlt_results_skip(out->res)) /* the host and the backend read the same results */
        return dlt_fail(r->err, -EPROTO,
                        "step %" PRId64 ": the host and the backend disagree on whether "
                        "the update applies",
                        p->index + 1);
    if (apply)
        return 0;
    DLT_TRY_GOTO(r->err, rc, dlt_net_bn_restore(&r->net), fail, "statistics restore");
fail:
    return rc;
}

int dlt_step_run(dlt_run *r, dlt_step_state *s, const dlt_step_plan *p, dlt_step_result *out)
{
    int rc;
    memset(out, 0, sizeof(*out));
    if ((rc = _load_batch(r, s, p, out)) != 0)
        goto fail;
    /* A step whose loss turns out non-finite must leave no trace, BN running statistics included. */
    DLT_TRY_GOTO(r->err, rc, dlt_net_bn_save(&r->net), fail, "statistics backup");
    dlt_watchdog_phase(p->wd, DLT_PHASE_COMPUTE, p->index + 1);
    if ((rc = dlt_step_queue(r, s, p->lr, p->stop && *p->stop != 0, &out->agree_s)) != 0)
        goto fail;
    /* While the device runs the step, the next batch is read and its copy queued (input off the
     * critical path). */
    if (!s->input_failed && p->next >= 0)
        dlt_run_prefetch(r, p->next / p->spe, p->next % p->spe);
    if ((rc = _read_results(r, s, p, out)) != 0)
        goto fail;
    rc = _settle(r, s, p, out);
fail:
    return rc;
}
