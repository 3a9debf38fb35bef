/* SPDX-License-Identifier: Apache-2.0 */
/* train_loop: dlt_train_run, the training loop as named steps: load the batch, forward + loss +
 * backward (the gradient reducer sums gradients as they are produced), agree and update (the
 * reduction's end, fp16 overflow, this rank's stop request and input failure joining the step's
 * results on the device, one sum of those over the ranks, the update queued, then the step's one
 * wait: the results' read), settle the host's side (skipped steps, the loss scale), log,
 * checkpoint. A rank whose batch cannot be read (a bad image under --strict, a vanished data
 * directory) still takes part in the step's collectives, so every rank stops at that step and the
 * failing one names the cause; any other failure of one rank aborts the communicator (run.c), so
 * no rank waits for it. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "trainer/common/clock.h"
#include "trainer/common/io.h"
#include "trainer/common/status.h"
#include "trainer/train/checkpointing.h"
#include "trainer/train/run.h"
#include "trainer/train/schedule.h"
#include "trainer/train/straggler.h"
#include "trainer/train/trainer.h"
#include "trainer/train/watchdog.h"

/* Set by the signal handler only; read at step boundaries. */
static volatile sig_atomic_t g_stop_signal;

static void _on_signal(int sig)
{
    g_stop_signal = sig;
}

/* What the loop carries from step to step. */
typedef struct {
    dlt_schedule sched;
    dlt_watchdog wd;
    int64_t spe, step, total; /* step: optimizer steps done. Every message numbers the step in progress
                                * step + 1 and its epoch (step / spe) + 1, as the step line "step k/N"
                                * (after the k-th) does: steps and epochs count from 1. */
    int bad_steps;      /* consecutive non-finite losses */
    double last_ckpt;
    float *stats_backup; /* BN statistics before the step (backend memory), to undo a skipped step */
    int64_t *batches_backup;
    int input_failed;    /* this rank could not load the step's batch; its reason is in input_err */
    char input_err[1024];
    dlt_source val;      /* validation images, when eval_every > 0 */
    int eval_every;
    int reached;         /* a validation reached --target-top1 */
    double val_top1;     /* the last validation's top-1 (-1: none yet) */
    int dumped;          /* --dump-batch written */
    dlt_straggler straggler; /* straggler.h */
} loop_state;

/* What one step found, all ranks agreeing. */
typedef struct {
    double t0, t_data, t_wait, t_agreed; /* step start, batch in, the host starts its one wait, results read */
    double res[DLT_RES_COUNT]; /* summed over ranks: loss, hits, overflow, stop requests, input failures */
    double lr;
} step_result;

static void _abort_comm(void *arg)
{
    dlt_comm *comm = arg;
    comm->ops->abort(comm, DLT_EXIT_STALLED);
}

/* Schedule, initial or resumed weights, the data stream positioned, signals, the banner, the
 * watchdog. */
static int _prepare(dlt_run *r, loop_state *t)
{
    const dlt_train_config *c = &r->cfg;
    struct sigaction sa;
    char host[64] = "?";
    int rc;
    t->spe = dlt_source_steps_per_epoch(&r->src);
    if (t->spe < 1)
        return dlt_fail(r->err, r->errlen, -EINVAL, "%" PRId64 " images per epoch give no full batch of %d on each of %d ranks",
                        dlt_source_images(&r->src), c->model.batch, r->comm->size);
    t->total = c->epochs * t->spe;
    if (c->max_steps > 0 && c->max_steps < t->total)
        t->total = c->max_steps;
    t->sched.peak = c->base_lr * (double)c->model.batch * r->comm->size / 256.0;
    t->sched.steps_per_epoch = t->spe;
    t->sched.warmup_epochs = c->warmup_epochs;
    t->sched.cosine = c->cosine;
    t->sched.total_epochs = (int)c->epochs;
    t->sched.nmilestones = c->nmilestones;
    memcpy(t->sched.milestones, c->milestones, sizeof(t->sched.milestones));
    t->stats_backup = r->be->ops->alloc(r->be, (r->net.model.nstats + 1) * sizeof(float));
    t->batches_backup = malloc(((size_t)r->net.model.nbn + 1) * sizeof(int64_t));
    if (!t->stats_backup || !t->batches_backup)
        return dlt_fail(r->err, r->errlen, -ENOMEM, "out of memory");
    dlt_net_init_params(&r->net, c->seed, c->zero_init_residual);
    if ((rc = dlt_run_resume(r, &t->step)) != 0)
        return rc;
    if ((rc = dlt_net_upload(&r->net)) != 0)
        return dlt_fail_prefix(r->err, r->errlen, rc, "loading the weights into the backend");
    if ((rc = dlt_source_start(&r->src, t->step / t->spe, t->step % t->spe, r->err, r->errlen)) != 0)
        return rc;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = _on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
    dlt_log(&r->log, DLT_LOG_INFO,
            "training %s (%zu parameters, %.3g GFLOPs/image) on %d rank(s), batch %d x %d = %d, %" PRId64
            " step%s/epoch, %" PRId64 " step%s, peak lr %.4g, backend %s %s",
            c->model.arch, r->net.model.nparams, (double)r->net.model.macs * 1e-9, r->comm->size, c->model.batch,
            r->comm->size, c->model.batch * r->comm->size, t->spe, t->spe == 1 ? "" : "s", t->total,
            t->total == 1 ? "" : "s", t->sched.peak, r->be->ops->name,
            dlt_precision_name(c->backend.precision));
    dlt_log(&r->log, DLT_LOG_VERBOSE, "gradient reduction: %s over %s", r->reducer->ops->name, r->comm->ops->name);
    if (gethostname(host, sizeof(host) - 1) != 0 || getenv("SLURMD_NODENAME"))
        snprintf(host, sizeof(host), "%.63s", getenv("SLURMD_NODENAME") ? getenv("SLURMD_NODENAME") : "?");
    if (dlt_watchdog_start(&t->wd, c->stall_timeout, r->comm->rank, host, _abort_comm, r->comm) != 0)
        return dlt_fail(r->err, r->errlen, -EIO, "cannot start the stall watchdog");
    dlt_watchdog_watch_comm(&t->wd, &r->comm->in_collective);
    dlt_straggler_init(&t->straggler, host, &c->backend); /* straggler.h */
    t->eval_every = c->eval_every;
    t->val_top1 = -1;
    if (t->eval_every != 0 && (t->eval_every > 0 || c->data)) {
        if ((rc = dlt_run_open_validation(r, &t->val)) < 0)
            return rc;
        if (rc == 0 && t->eval_every > 0)
            return dlt_fail(r->err, r->errlen, -EINVAL, "--eval-every %d: no validation images (%s/val is not a "
                            "directory): give --val-data DIR or --eval-every 0", t->eval_every, c->data);
        t->eval_every = rc == 0 ? 0 : t->eval_every < 0 ? 1 : t->eval_every;
    } else {
        t->eval_every = 0;
    }
    if (c->target_top1 > 0 && t->eval_every == 0)
        return dlt_fail(r->err, r->errlen, -EINVAL, "--target-top1 %g needs validation (--eval-every N and "
                        "validation images)", c->target_top1);
    t->last_ckpt = dlt_now();
    dlt_run_log_start(&r->log, t->step);
    dlt_run_log_event(&r->log, "run_start", "INTERVAL_START", NULL,
                      "\"step_num\":%" PRId64 ",\"ranks\":%d,\"global_batch_size\":%d,\"target_top1\":%g", t->step,
                      r->comm->size, c->model.batch * r->comm->size, c->target_top1);
    return 0;
}

/* The current weights on every validation image (training state untouched: inference-mode batch
 * norm, no update, the training batch stream unaffected); logs it, and notes --target-top1. */
static int _validate(dlt_run *r, loop_state *t)
{
    double counts[3], t0 = dlt_now(), top1, top5;
    int64_t epoch = (t->step - 1) / t->spe + 1; /* the epoch of the last step, 1-based (t->step >= 1 here) */
    int rc;
    size_t bytes = r->net.model.nstats * sizeof(float);
    dlt_watchdog_phase(&t->wd, DLT_PHASE_COMPUTE, t->step);
    /* Each rank's BN running statistics follow its own batches; the checkpoint holds rank 0's.
     * Validate every shard with rank 0's (what dltrain eval of the checkpoint sees), then give each
     * rank its own back, so training goes on exactly as without validation. */
    if (r->comm->size > 1) {
        if ((rc = r->be->ops->copy(r->be, t->stats_backup, r->net.d_stats, bytes)) != 0 ||
            (rc = r->be->ops->download(r->be, r->net.stats, r->net.d_stats, bytes)) != 0)
            return dlt_fail_prefix(r->err, r->errlen, rc, "validation statistics");
        if ((rc = r->comm->ops->bcast(r->comm, r->net.stats, bytes, 0)) != 0)
            return rc;
        if ((rc = r->be->ops->upload(r->be, r->net.d_stats, r->net.stats, bytes)) != 0)
            return dlt_fail_prefix(r->err, r->errlen, rc, "validation statistics");
    }
    rc = dlt_eval_pass(r, &t->val, counts);
    if (r->comm->size > 1 && rc == 0 && (rc = r->be->ops->copy(r->be, r->net.d_stats, t->stats_backup, bytes)) != 0)
        return dlt_fail_prefix(r->err, r->errlen, rc, "validation statistics");
    if (rc)
        return rc;
    dlt_run_log_pause(&r->log, dlt_now() - t0); /* images/s stays the training's own */
    top1 = counts[2] > 0 ? counts[0] / counts[2] : 0;
    top5 = counts[2] > 0 ? counts[1] / counts[2] : 0;
    t->val_top1 = top1;
    dlt_log(&r->log, DLT_LOG_QUIET, "epoch %" PRId64 " val top-1 %.4f top-5 %.4f (%.0f images, %.1f s)", epoch, top1,
            top5, counts[2], dlt_now() - t0);
    {
        char value[32];
        snprintf(value, sizeof(value), "%.6f", top1);
        dlt_run_log_event(&r->log, "eval_accuracy", "POINT_IN_TIME", value,
                          "\"epoch_num\":%" PRId64 ",\"step_num\":%" PRId64 ",\"val_top1\":%.6f,\"val_top5\":%.6f,"
                          "\"val_images\":%.0f,\"eval_seconds\":%.3f",
                          epoch, t->step, top1, top5, counts[2], dlt_now() - t0);
    }
    dlt_run_log_validation(&r->log, t->step, top1, top5);
    if (r->cfg.target_top1 > 0 && top1 >= r->cfg.target_top1) {
        t->reached = 1;
        dlt_log(&r->log, DLT_LOG_QUIET, "target top-1 %.4f reached at epoch %" PRId64 " (step %" PRId64 "): time to "
                "target %.1f s", r->cfg.target_top1, epoch, t->step, dlt_now() - r->log.t_start);
    }
    return 0;
}

/* --dump-batch: the batch exactly as the network gets it before normalisation, for comparisons
 * with another framework: batch x image x image x 3 uint8 (NHWC), then batch int32 labels. */
static int _dump_batch(dlt_run *r)
{
    const dlt_train_config *c = &r->cfg;
    size_t px = (size_t)c->model.batch * c->model.image * c->model.image * 3;
    char why[512];
    FILE *f = dlt_fopen_regular("--dump-batch", c->dump_batch, "wb", why, sizeof(why));
    if (!f)
        return dlt_fail(r->err, r->errlen, -EIO, "%s", why);
    if (fwrite(r->images, 1, px, f) != px ||
        fwrite(r->labels, sizeof(int32_t), (size_t)c->model.batch, f) != (size_t)c->model.batch) {
        fclose(f);
        return dlt_fail(r->err, r->errlen, -EIO, "--dump-batch %s: cannot write it", c->dump_batch);
    }
    if (fclose(f) != 0)
        return dlt_fail(r->err, r->errlen, -EIO, "--dump-batch %s: cannot write it", c->dump_batch);
    return 0;
}

/* A batch that cannot be loaded does not end the step here: the rank computes on the previous
 * input (discarded) so that the step's collectives still match, and says at the agreement that it
 * cannot go on; the reason is kept for the end. */
static int _load_batch(dlt_run *r, loop_state *t, step_result *s)
{
    int rc;
    s->t0 = dlt_now();
    dlt_watchdog_phase(&t->wd, DLT_PHASE_DATA, t->step + 1);
    if ((rc = dlt_run_load_batch(r, t->step / t->spe, t->step % t->spe)) != 0) {
        dlt_fail_prefix(r->err, r->errlen, rc, "input");
        snprintf(t->input_err, sizeof(t->input_err), "%s", r->err);
        t->input_failed = 1; /* the labels are class 0 (r->no_labels): the loss stays defined; nothing is applied */
    }
    s->t_data = dlt_now();
    if (r->cfg.dump_batch && !t->input_failed && t->dumped++ == 0 && r->comm->rank == 0)
        return _dump_batch(r);
    return 0;
}

/* While the device runs this step, the next batch is read and its copy queued (input off the
 * critical path). Not across an epoch's end, where validation may use the input path first. */
static void _prefetch(dlt_run *r, loop_state *t)
{
    int64_t next = t->step + 1;
    if (!t->input_failed && next < t->total && next % t->spe != 0)
        dlt_run_prefetch(r, next / t->spe, next % t->spe);
}

/* A step whose loss turns out non-finite must leave no trace, BN running statistics included. */
static int _backup_statistics(dlt_run *r, loop_state *t)
{
    int rc = r->be->ops->copy(r->be, t->stats_backup, r->net.d_stats, r->net.model.nstats * sizeof(float));
    if (rc)
        return dlt_fail_prefix(r->err, r->errlen, rc, "statistics backup");
    memcpy(t->batches_backup, r->net.bn_batches, (size_t)r->net.model.nbn * sizeof(int64_t));
    return 0;
}

/* Everything the step decides is queued before the host waits once: forward, loss, backward
 * (the gradient sum runs while it does), fp16 overflow counted on the summed gradients (the same on
 * every rank), this rank's stop request and input failure joining the loss and hits in the
 * results, which are summed over the ranks, and the update; the backend drops the update when the
 * agreed results void the step (dlt_results_skip), so no host decision sits between backward and
 * the update, and with --cuda-graphs the whole of it is one replay. */
static int _queue_step(dlt_run *r, loop_state *t, step_result *s)
{
    int rc;
    dlt_watchdog_phase(&t->wd, DLT_PHASE_COMPUTE, t->step + 1);
    s->lr = dlt_schedule_lr(&t->sched, t->step);
    r->agree_s = 0;
    if ((rc = dlt_run_step(r, s->lr, g_stop_signal != 0, t->input_failed)) != 0)
        return rc;
    return 0;
}

/* The one read: every rank sees the same results, so every rank takes the same decisions. */
static int _agree(dlt_run *r, loop_state *t, step_result *s)
{
    int rc;
    dlt_watchdog_phase(&t->wd, DLT_PHASE_ALLREDUCE, t->step + 1);
    s->t_wait = dlt_now();
    if ((rc = dlt_run_read_results(r, s->res)) != 0)
        return rc;
    dlt_run_release_batches(r); /* the backend has read this step's batch */
    s->t_agreed = dlt_now();
    if (s->res[DLT_RES_INPUT_FAILED] > 0) { /* every rank sees it: all stop at this step, no update */
        r->agreed = 1;
        if (t->input_failed)
            return dlt_fail(r->err, r->errlen, -EIO, "%s (every rank stops at step %" PRId64 ")", t->input_err,
                            t->step + 1);
        return dlt_fail(r->err, r->errlen, -ECANCELED,
                        "stopping at step %" PRId64 ": %.0f other rank(s) could not load their batch (their messages "
                        "name the file and the cause)", t->step + 1, s->res[DLT_RES_INPUT_FAILED]);
    }
    return 0;
}

/* The host's side of an applied or skipped update. A skipped step (non-finite loss, fp16
 * overflow; the backend already left weights and momentum untouched) gets its statistics
 * restored, so it leaves no trace; the step still counts so the data moves on. */
static int _settle(dlt_run *r, loop_state *t, step_result *s)
{
    const dlt_train_config *c = &r->cfg;
    int apply, rc;
    dlt_watchdog_phase(&t->wd, DLT_PHASE_COMPUTE, t->step + 1);
    if (!isfinite(s->res[DLT_RES_LOSS])) {
        r->agreed = 1; /* the summed loss is the same on every rank: all decide alike */
        if (++t->bad_steps > c->max_bad_steps)
            return dlt_fail(r->err, r->errlen, -ERANGE,
                            "loss not finite for %d consecutive steps (last at step %" PRId64 "): stopping; the last "
                            "checkpoint is intact (lower --lr?)", t->bad_steps, t->step + 1);
        if (r->comm->rank == 0)
            dlt_log_warn(&r->log, "loss is %g at step %" PRId64 ": update skipped (%d of %d allowed in a row)",
                         s->res[DLT_RES_LOSS], t->step + 1, t->bad_steps, c->max_bad_steps);
        apply = 0;
        r->agreed = 0;
    } else {
        /* An fp16 overflow is a normal event while the scale settles, not a divergence. */
        t->bad_steps = 0;
        apply = dlt_loss_scaler_update(&r->scaler, s->res[DLT_RES_NONFINITE] != 0);
    }
    if (apply != !dlt_results_skip(s->res)) /* the host and the backend read the same results */
        return dlt_fail(r->err, r->errlen, -EPROTO, "step %" PRId64 ": the host and the backend disagree on whether "
                        "the update applies", t->step + 1);
    if (apply)
        return 0;
    if ((rc = r->be->ops->copy(r->be, r->net.d_stats, t->stats_backup, r->net.model.nstats * sizeof(float))) != 0)
        return dlt_fail_prefix(r->err, r->errlen, rc, "statistics restore");
    memcpy(r->net.bn_batches, t->batches_backup, (size_t)r->net.model.nbn * sizeof(int64_t));
    return 0;
}

static void _log(dlt_run *r, loop_state *t, const step_result *s)
{
    const dlt_train_config *c = &r->cfg;
    dlt_step_status st = {t->step, t->total, t->spe, s->lr, r->scaler.enabled, r->scaler.scale, r->scaler.skipped};
    dlt_run_log_step(&r->log, t->step, s->res[DLT_RES_LOSS], s->res[DLT_RES_TOP1], s->t_data - s->t0,
                     r->agree_s + (s->t_agreed - s->t_wait), dlt_now() - s->t0);
    if ((c->log_every > 0 && t->step % c->log_every == 0) || t->step == t->total || s->res[DLT_RES_STOP] > 0)
        dlt_run_log_line(&r->log, &st);
}

/* Preemption (a stop flag from any rank) checkpoints and ends the run with DLT_EXIT_PREEMPTED;
 * else a checkpoint when --checkpoint-every or --checkpoint-minutes says so. */
static int _checkpoint(dlt_run *r, loop_state *t, const step_result *s)
{
    const dlt_train_config *c = &r->cfg;
    int rc;
    if (s->res[DLT_RES_STOP] > 0 && !c->checkpoint_dir) {
        dlt_log(&r->log, DLT_LOG_QUIET, "stop requested (signal) at step %" PRId64 ": nothing saved (no "
                "--checkpoint-dir); exit status %d", t->step, DLT_EXIT_STOPPED_UNSAVED);
        return DLT_EXIT_STOPPED_UNSAVED;
    }
    if (s->res[DLT_RES_STOP] > 0) {
        dlt_log(&r->log, DLT_LOG_QUIET, "stop requested (signal) at step %" PRId64 ": checkpointing", t->step);
        return (rc = dlt_run_save(r, t->step, t->step / t->spe, &t->wd)) != 0 ? rc : DLT_EXIT_PREEMPTED;
    }
    if (t->step < t->total && t->bad_steps == 0 &&
        ((c->checkpoint_every > 0 && t->step % c->checkpoint_every == 0) ||
         (c->checkpoint_minutes > 0 && dlt_now() - t->last_ckpt >= 60 * c->checkpoint_minutes))) {
        if ((rc = dlt_run_save(r, t->step, t->step / t->spe, &t->wd)) != 0)
            return rc;
        t->last_ckpt = dlt_now();
    }
    return 0;
}

static int _train_step(dlt_run *r, loop_state *t)
{
    step_result s;
    int rc;
    memset(&s, 0, sizeof(s));
    if (t->step % t->spe == 0)
        dlt_run_log_event(&r->log, "epoch_start", "INTERVAL_START", NULL, "\"epoch_num\":%" PRId64 ",\"step_num\":%" PRId64,
                          t->step / t->spe + 1, t->step);
    if ((rc = _load_batch(r, t, &s)) != 0 || (rc = _backup_statistics(r, t)) != 0 ||
        (rc = _queue_step(r, t, &s)) != 0)
        return rc;
    _prefetch(r, t); /* while the device runs the step */
    if ((rc = _agree(r, t, &s)) != 0 || (rc = _settle(r, t, &s)) != 0)
        return rc;
    t->step++;
    _log(r, t, &s);
    /* straggler.h: compute = the step less its batch wait and its time in the host collectives */
    if ((rc = dlt_straggler_step(&t->straggler, r->comm, &r->log, t->step, s.t_agreed - s.t_data - r->agree_s,
                                 s.t_data - s.t0, (r->cfg.log_every > 0 && t->step % r->cfg.log_every == 0) ||
                                 t->step == t->total)) != 0)
        return rc;
    if (t->step % t->spe == 0 && t->step < t->total)
        dlt_run_share_bad_images(r); /* each bad file reported once per run, whichever rank meets it */
    if (t->eval_every > 0 && t->step % t->spe == 0 &&
        ((t->step / t->spe) % t->eval_every == 0 || t->step == t->total) && (rc = _validate(r, t)) != 0)
        return rc;
    if (r->cfg.check_every > 0 && t->step % r->cfg.check_every == 0 &&
        (rc = dlt_run_check_replicas(r, t->step)) != 0)
        return rc;
    return _checkpoint(r, t, &s);
}

/* The final checkpoint and summary; a run that ended on non-finite losses writes none. */
static int _finish(dlt_run *r, loop_state *t)
{
    int64_t bad;
    int rc;
    if (t->bad_steps > 0) {
        r->agreed = 1;
        return dlt_fail(r->err, r->errlen, -ERANGE, "the run ended on non-finite losses: no final checkpoint written");
    }
    bad = dlt_run_share_bad_images(r);
    if (bad > 0 && r->comm->rank == 0)
        dlt_log_warn(&r->log, "%lld bad image(s) were skipped and replaced (distinct files, over all %d rank(s))",
                     (long long)bad, r->comm->size);
    if ((rc = dlt_run_save(r, t->step, t->step / t->spe, &t->wd)) != 0)
        return rc;
    dlt_run_log_summary(&r->log, t->step, r->cfg.baseline);
    if ((rc = dlt_straggler_summary(&t->straggler, r->comm, &r->log, dlt_now() - r->log.t_start)) != 0) /* straggler.h */
        return rc;
    return 0;
}

int dlt_train_run(const dlt_train_config *c, dlt_comm *comm, char *err, size_t errlen)
{
    dlt_run r;
    loop_state t;
    int rc;
    memset(&t, 0, sizeof(t));
    if ((rc = dlt_run_open(&r, c, comm, DLT_RUN_TRAIN, err, errlen)) == 0 &&
        (rc = dlt_run_agree_on_failure(&r, _prepare(&r, &t))) == 0) {
        while (rc == 0 && t.step < t.total && !t.reached)
            rc = _train_step(&r, &t);
        if (rc == 0)
            rc = _finish(&r, &t);
    }
    dlt_run_log_event(&r.log, "run_stop", "INTERVAL_END", NULL, "\"status\":\"%s\",\"step_num\":%" PRId64 ",\"val_top1\":%.6f",
                      rc == 0 && (c->target_top1 <= 0 || t.reached) ? "success" : "aborted", t.step, t.val_top1);
    dlt_source_close(&t.val);
    dlt_watchdog_stop(&t.wd);
    dlt_straggler_close(&t.straggler); /* straggler.h */
    if (t.stats_backup)
        r.be->ops->release(r.be, t.stats_backup);
    free(t.batches_backup);
    dlt_run_close(&r, rc != 0 && rc != DLT_EXIT_PREEMPTED && rc != DLT_EXIT_STOPPED_UNSAVED);
    return rc;
}
