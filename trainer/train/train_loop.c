/* SPDX-License-Identifier: Apache-2.0 */
/* train_loop: dlt_train_run, the training loop: epochs of steps (each one dlt_step_run, step.c),
 * then the step's log line, validation, replica checks and checkpoints at their cadence. Any
 * failure of one rank that the ranks did not decide together aborts the communicator (run.c), so
 * no rank waits for it. */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/node_name.h"
#include "common/status.h"
#include "common/stop_signal.h"
#include "trainer/comm/agree.h"
#include "trainer/train/checkpointing.h"
#include "trainer/train/run.h"
#include "trainer/train/schedule.h"
#include "trainer/train/step.h"
#include "trainer/train/straggler.h"
#include "trainer/train/trainer.h"
#include "trainer/train/watchdog.h"

/* What the loop carries from step to step. */
typedef struct {
    dlt_schedule sched;
    dlt_watchdog wd;
    int64_t spe, step, total; /* step: optimizer steps done. Every message numbers the step in progress
                               * step + 1 and its epoch (step / spe) + 1, as the step line "step k/N"
                               * (after the k-th) does: steps and epochs count from 1. */
    dlt_step_state st;        /* what each step hands the next */
    double last_ckpt;
    dlt_source val; /* validation images, when eval_every > 0 */
    int eval_every;
    int reached;             /* a validation reached --target-top1 */
    int stop_now;            /* a stop request abandoned validation: checkpoint and stop at once */
    double val_top1;         /* the last validation's top-1 (-1: none yet) */
    dlt_straggler straggler; /* straggler.h */
    /* Rank 0: a periodic checkpoint that failed. Only rank 0 writes, so only it knows: it asks the
     * next step to stop (the stop flag is summed in that step, so every rank stops at the same
     * step), and the stop agrees on this failure instead of saving (_save_for_stop): every rank
     * ends with its words, none waits in a collective for a rank that left. */
    dlt_err save_err;
} loop_state;

/* The stall watchdog's abort, on its own thread: the recorded step goes first (NCCL's abort waits
 * for every graph that holds the communicator: dlt_graph_ops.release_async), then the
 * communicator, whose abort ends the process. */
static void _abort_stalled(void *arg)
{
    dlt_run *r = arg;
    if (r->be && r->be->graphs && r->be->graphs->release_async)
        r->be->graphs->release_async(r->be);
    r->comm->ops->abort(r->comm, DLT_EXIT_STALLED);
}

/* Schedule, initial or resumed weights, the data stream positioned, signals, the banner, the
 * watchdog: what each rank does alone (no collective), agreed on after. */
static int _prepare(dlt_run *r, loop_state *t)
{
    const dlt_train_config *c = &r->cfg;
    char host[64] = "?";
    int rc;
    t->spe = dlt_source_steps_per_epoch(&r->src);
    if (t->spe < 1)
        return dlt_fail(r->err, -EINVAL, "%" PRId64 " images per epoch give no full batch of %d on each of %d ranks",
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
    dlt_net_init_params(&r->net, c->seed, c->zero_init_residual);
    dlt_stop_signal_stage(c->resume ? "loading the checkpoint to resume from" : "preparing the weights");
    if ((rc = dlt_run_resume(r, &t->step)) != 0)
        return rc;
    if ((rc = dlt_net_upload(&r->net)) != 0)
        return dlt_fail_prefix(r->err, rc, "loading the weights into the backend");
    if ((rc = dlt_source_start(&r->src, t->step / t->spe, t->step % t->spe, r->err)) != 0)
        return rc;
    dlt_stop_signal_install(); /* dltrain train installed it at its start; a library caller gets it here */
    dlt_log(&r->log, DLT_LOG_INFO,
            "training %s (%zu parameters, %.3g GFLOPs/image) on %d rank(s), batch %d x %d = %d, %" PRId64
            " step%s/epoch, %" PRId64 " step%s, peak lr %.4g, backend %s %s",
            c->model.arch, r->net.model.nparams, (double)r->net.model.macs * 1e-9, r->comm->size, c->model.batch,
            r->comm->size, c->model.batch * r->comm->size, t->spe, t->spe == 1 ? "" : "s", t->total,
            t->total == 1 ? "" : "s", t->sched.peak, r->be->ops->name, dlt_precision_name(c->backend.precision));
    dlt_log(&r->log, DLT_LOG_VERBOSE, "gradient reduction: %s over %s", r->reducer->ops->name, r->comm->ops->name);
    dlt_node_name(host, sizeof(host));
    if ((rc = dlt_watchdog_start(&t->wd, c->stall_timeout, r->comm->rank, host, _abort_stalled, r)) != 0)
        return dlt_fail(r->err, rc,
                        "cannot start the stall watchdog thread: %s (the process or user thread "
                        "limit, ulimit -u)",
                        strerror(-rc));
    dlt_watchdog_watch_comm(&t->wd, &r->comm->in_collective);
    dlt_straggler_init(&t->straggler, host, &c->backend); /* straggler.h */
    return 0;
}

/* The validation images and the run's start. Apart from _prepare, after the agreement on its
 * failures: opening them is a collective (whether ROOT/val exists everywhere, the one listing), which
 * a rank that failed in _prepare (a damaged --init on one node) would not reach, leaving the others
 * waiting in it. */
static int _prepare_validation(dlt_run *r, loop_state *t)
{
    const dlt_train_config *c = &r->cfg;
    int rc;
    t->eval_every = c->eval_every;
    t->val_top1 = -1;
    dlt_stop_signal_stage("opening the validation images");
    if (t->eval_every != 0 && (t->eval_every > 0 || c->data)) {
        if ((rc = dlt_run_open_validation(r, &t->val)) < 0)
            return rc;
        if (rc == 0 && t->eval_every > 0)
            return dlt_fail(r->err, -EINVAL,
                            "--eval-every %d: no validation images (%s/val is not a "
                            "directory): give --val-data DIR or --eval-every 0",
                            t->eval_every, c->data);
        t->eval_every = rc == 0 ? 0 : t->eval_every < 0 ? 1 : t->eval_every;
    } else {
        t->eval_every = 0;
    }
    if (c->target_top1 > 0 && t->eval_every == 0)
        return dlt_fail(r->err, -EINVAL,
                        "--target-top1 %g needs validation (--eval-every N and "
                        "validation images)",
                        c->target_top1);
    t->last_ckpt = dlt_now();
    dlt_run_log_start(&r->log, t->step);
    dlt_run_log_event(&r->log, "run_start", "INTERVAL_START", NULL,
                      "\"step_num\":%" PRId64 ",\"ranks\":%d,\"global_batch_size\":%d,\"target_top1\":%g", t->step,
                      r->comm->size, c->model.batch * r->comm->size, c->target_top1);
    return 0;
}

/* The batch-norm statistics of validation: rank 0's, broadcast. */
static int _share_from_rank0(void *arg, void *buf, size_t bytes)
{
    dlt_comm *comm = arg;
    return comm->ops->bcast(comm, buf, bytes, 0);
}

/* The current weights on every validation image (training state untouched: inference-mode batch
 * norm, no update, the training batch stream unaffected); logs it, and notes --target-top1. */
static int _validate(dlt_run *r, loop_state *t)
{
    double counts[DLT_EVAL_COUNTS], t0 = dlt_now(), top1, top5, n, bad;
    int64_t epoch = (t->step - 1) / t->spe + 1; /* the epoch of the last step, 1-based (t->step >= 1 here) */
    int64_t at[2] = {0, 0};                     /* an abandoned pass: batches done, of */
    int rc, abandoned;
    dlt_watchdog_phase(&t->wd, DLT_PHASE_COMPUTE, t->step);
    /* Each rank's BN running statistics follow its own batches; the checkpoint holds rank 0's.
     * Validate every shard with rank 0's (what dltrain eval of the checkpoint sees), then give each
     * rank its own back, so training goes on exactly as without validation. */
    if (r->comm->size > 1)
        DLT_TRY_GOTO(r->err, rc, dlt_net_bn_adopt(&r->net, _share_from_rank0, r->comm), fail, "validation statistics");
    /* A stop request (a signal) abandons validation at the next batch on every rank together: it
     * changes no weights, and a preemption warning may be shorter than a whole pass. */
    if ((abandoned = dlt_eval_pass_stoppable(r, &t->val, counts, dlt_stop_signal_flag(), at)) < 0)
        DLT_TRY_GOTO(r->err, rc, abandoned, fail, NULL);
    if (r->comm->size > 1)
        DLT_TRY_GOTO(r->err, rc, dlt_net_bn_restore(&r->net), fail, "validation statistics");
    if (abandoned) {
        dlt_run_log_pause(&r->log, dlt_now() - t0);
        dlt_log(&r->log, DLT_LOG_QUIET,
                "stop requested (signal) during validation: abandoned after batch %" PRId64 " of %" PRId64 " (%.1f s)",
                at[0], at[1], dlt_now() - t0);
        t->stop_now = 1;
        return 0;
    }
    dlt_run_log_pause(&r->log, dlt_now() - t0); /* images/s stays the training's own */
    n = counts[DLT_EVAL_SCORED];
    bad = counts[DLT_EVAL_NONFINITE];
    top1 = n > 0 ? counts[DLT_EVAL_TOP1] / n : 0;
    top5 = n > 0 ? counts[DLT_EVAL_TOP5] / n : 0;
    t->val_top1 = top1;
    dlt_log(&r->log, DLT_LOG_QUIET, "epoch %" PRId64 " val top-1 %.4f top-5 %.4f (%.0f images, %.1f s)", epoch, top1,
            top5, n, dlt_now() - t0);
    if (bad > 0)
        dlt_log(&r->log, DLT_LOG_QUIET,
                "epoch %" PRId64 " validation: %.0f of the %.0f images gave logits that are not finite (NaN or "
                "infinite), counted as misses",
                epoch, bad, n);
    {
        char value[32];
        snprintf(value, sizeof(value), "%.6f", top1);
        dlt_run_log_event(
            &r->log, "eval_accuracy", "POINT_IN_TIME", value,
            "\"epoch_num\":%" PRId64 ",\"step_num\":%" PRId64 ",\"val_top1\":%.6f,\"val_top5\":%.6f,"
            "\"val_images\":%.0f,\"val_nonfinite\":%.0f,\"eval_seconds\":%.3f,\"train_time\":%.3f,\"wall_time\":%.3f",
            epoch, t->step, top1, top5, n, bad, dlt_now() - t0, dlt_run_train_seconds(r), dlt_run_wall_seconds(r));
    }
    dlt_run_log_validation(&r->log, t->step, top1, top5, bad);
    /* Non-finite samples are misses already; a pass with any is not a model that reached a target. */
    if (r->cfg.target_top1 > 0 && top1 >= r->cfg.target_top1 && bad == 0) {
        t->reached = 1;
        /* Over every incarnation: a resumed run's own time alone would understate it. */
        dlt_log(&r->log, DLT_LOG_QUIET,
                "target top-1 %.4f reached at epoch %" PRId64 " (step %" PRId64 "): time to "
                "target %.1f s of training (%.1f s in this run), %.1f s since the first start",
                r->cfg.target_top1, epoch, t->step, dlt_run_train_seconds(r), dlt_now() - r->log.t_start,
                dlt_run_wall_seconds(r));
    }
    return 0;
fail:
    return rc;
}

static void _log(dlt_run *r, loop_state *t, const dlt_step_plan *p, const dlt_step_result *s)
{
    const dlt_train_config *c = &r->cfg;
    dlt_step_status st = {t->step, t->total, t->spe, p->lr, r->scaler.enabled, r->scaler.scale, r->scaler.skipped};
    dlt_run_log_step(&r->log, t->step, s->res[DLT_RES_LOSS], s->res[DLT_RES_TOP1], s->t_data - s->t0,
                     s->agree_s + (s->t_agreed - s->t_wait), dlt_now() - s->t0);
    if ((c->log_every > 0 && t->step % c->log_every == 0) || t->step == t->total || s->res[DLT_RES_STOP] > 0)
        dlt_run_log_line(&r->log, &st);
}

/* The checkpoint of a stop, then an agreement on it before any rank leaves: a rank that exited
 * first (status 75) while rank 0 was still writing would let srun --kill-on-bad-exit (or a site's
 * KillOnBadExit=1) kill rank 0 in the middle of its save, leaving only the .tmp file and a step
 * that ends 137, which the templates do not requeue. After the agreement the file is complete and
 * renamed, so whatever kills the step next loses nothing; a failed save ends every rank with
 * rank 0's words (status 1, not 75: no new checkpoint was written). */
static int _save_for_stop(dlt_run *r, loop_state *t)
{
    int rc = t->save_err.code ? dlt_fail_take(r->err, &t->save_err)
                              : dlt_run_save_required(r, t->step, t->step / t->spe, &t->wd);
    if ((rc = dlt_run_agree_first_failure(r, rc)) != 0)
        return rc;
    dlt_log(&r->log, DLT_LOG_INFO,
            "stop at step %" PRId64 ": checkpoint complete, every rank agreed; exit "
            "status %d",
            t->step, DLT_EXIT_PREEMPTED);
    return DLT_RUN_PREEMPTED;
}

/* Preemption (a stop flag from any rank) checkpoints and ends the run with DLT_RUN_PREEMPTED;
 * else a checkpoint when --checkpoint-every or --checkpoint-minutes says so. */
static int _checkpoint(dlt_run *r, loop_state *t, const dlt_step_result *s)
{
    const dlt_train_config *c = &r->cfg;
    int rc, stop = s->res[DLT_RES_STOP] > 0 || t->stop_now;
    if (stop && !c->checkpoint_dir) {
        dlt_log(&r->log, DLT_LOG_QUIET,
                "stop requested (signal) at step %" PRId64 ": nothing saved (no "
                "--checkpoint-dir); exit status %d",
                t->step, DLT_EXIT_STOPPED_UNSAVED);
        return DLT_RUN_STOPPED_UNSAVED;
    }
    if (stop) {
        if (t->save_err.code)
            dlt_log(&r->log, DLT_LOG_QUIET, "step %" PRId64 ": every rank stops, the last checkpoint having failed",
                    t->step);
        else
            dlt_log(&r->log, DLT_LOG_QUIET, "stop requested (signal) at step %" PRId64 ": checkpointing", t->step);
        return _save_for_stop(r, t);
    }
    if (t->step < t->total && t->st.bad_steps == 0 &&
        ((c->checkpoint_every > 0 && t->step % c->checkpoint_every == 0) ||
         (c->checkpoint_minutes > 0 && dlt_now() - t->last_ckpt >= 60 * c->checkpoint_minutes))) {
        if ((rc = dlt_run_save(r, t->step, t->step / t->spe, &t->wd)) == DLT_SAVE_SKIPPED)
            rc = 0; /* said; the next loss stops the run (--max-bad-steps) */
        if (rc != 0 && r->comm->size > 1) {
            dlt_fail_take(&t->save_err, r->err);
            dlt_err_clear(r->err);
            *dlt_stop_signal_flag() = 1; /* the next step stops every rank: see loop_state.save_err */
            dlt_rank_say(r->comm->rank, "%s; every rank stops after the next step", t->save_err.msg);
            return 0;
        }
        if (rc != 0)
            return rc;
        t->last_ckpt = dlt_now();
    }
    return 0;
}

/* A stop requested during start-up (bootstrap, data scan, preflight, resume: the handlers are
 * installed before any of it) ends the run before its first step, on every rank together (one sum
 * of the requests: a signal may have reached some ranks only). Nothing was trained, so nothing is
 * saved: a resumed run's checkpoint stays the one to continue from. */
static int _stop_before_first_step(dlt_run *r, loop_state *t)
{
    dlt_agreement a = dlt_agreement_of_comm(r->comm);
    int asked, rc;
    dlt_stop_signal_stage("agreeing on a stop before the first step");
    if ((rc = dlt_agree_count(&a, *dlt_stop_signal_flag() != 0, &asked, r->err)) != 0)
        return rc;
    if (asked == 0) {
        /* From here the loop answers a stop at each step and the watchdog bounds each phase. */
        dlt_stop_signal_startup_end();
        return 0;
    }
    if (!r->cfg.checkpoint_dir) {
        dlt_log(&r->log, DLT_LOG_QUIET,
                "stop requested (signal) during start-up, before step %" PRId64 ": nothing "
                "trained in this run, nothing saved (no --checkpoint-dir); exit status %d",
                t->step + 1, DLT_EXIT_STOPPED_UNSAVED);
        return DLT_RUN_STOPPED_UNSAVED;
    }
    if (t->step > 0)
        dlt_log(&r->log, DLT_LOG_QUIET,
                "stop requested (signal) during start-up, before step %" PRId64 ": nothing "
                "trained in this run; the checkpoint of step %" PRId64 " stays the one to resume from; exit status %d",
                t->step + 1, t->step, DLT_EXIT_PREEMPTED);
    else
        dlt_log(&r->log, DLT_LOG_QUIET,
                "stop requested (signal) during start-up, before the first step: nothing "
                "trained yet (a requeued run starts from the beginning); exit status %d",
                DLT_EXIT_PREEMPTED);
    return DLT_RUN_PREEMPTED;
}

/* One step (step.c), then what follows it at its cadence: the log line, the exchange of bad
 * files at an epoch's end, validation, the replica check, checkpoints. */
static int _train_step(dlt_run *r, loop_state *t)
{
    dlt_step_result s;
    int64_t next = t->step + 1;
    /* The next batch is read ahead, but not across an epoch's end, where validation may use the
     * input path first. */
    dlt_step_plan p = {t->step,
                       t->spe,
                       next < t->total && next % t->spe != 0 ? next : -1,
                       dlt_schedule_lr(&t->sched, t->step),
                       dlt_stop_signal_flag(),
                       &t->wd};
    int rc;
    if (t->step % t->spe == 0)
        dlt_run_log_event(&r->log, "epoch_start", "INTERVAL_START", NULL,
                          "\"epoch_num\":%" PRId64 ",\"step_num\":%" PRId64, t->step / t->spe + 1, t->step);
    if ((rc = dlt_step_run(r, &t->st, &p, &s)) != 0)
        return rc;
    t->step++;
    _log(r, t, &p, &s);
    /* straggler.h: compute = the step less its batch wait and its time in the host collectives */
    if ((rc = dlt_straggler_step(
             &t->straggler, r->comm, &r->log, t->step, s.t_agreed - s.t_data - s.agree_s, s.t_data - s.t0,
             (r->cfg.log_every > 0 && t->step % r->cfg.log_every == 0) || t->step == t->total)) != 0)
        return rc;
    if (t->step % t->spe == 0 && t->step < t->total)
        dlt_run_share_bad_images(r); /* each bad file reported once per run, whichever rank meets it */
    if (t->eval_every > 0 && t->step % t->spe == 0 &&
        ((t->step / t->spe) % t->eval_every == 0 || t->step == t->total) && (rc = _validate(r, t)) != 0)
        return rc;
    if (r->cfg.check_every > 0 && t->step % r->cfg.check_every == 0)
        DLT_TRY_GOTO(r->err, rc, dlt_run_check_replicas(r, t->step), fail, NULL);
    return _checkpoint(r, t, &s);
fail:
    return rc;
}

/* Images whose content is not what their name says (a PNG named .JPEG), read by their content: said
 * once, with the run's distinct count (dlt_run_share_bad_images exchanged them), and in the
 * metrics as an "images_by_content" event. */
static void _renamed_summary(dlt_run *r)
{
    int64_t png = 0, jpeg = 0;
    char value[32];
    if (!r->src.loader)
        return;
    dlt_loader_renamed(r->src.loader, &png, &jpeg);
    if (png + jpeg == 0)
        return;
    dlt_log(&r->log, DLT_LOG_QUIET,
            "%lld image(s) were decoded by their content, not their name: %lld PNG named .jpg/.jpeg, %lld JPEG named "
            ".png (distinct files, over all %d rank(s); --verbose names each)",
            (long long)(png + jpeg), (long long)png, (long long)jpeg, r->comm->size);
    snprintf(value, sizeof(value), "%lld", (long long)(png + jpeg));
    dlt_run_log_event(&r->log, "images_by_content", "POINT_IN_TIME", value,
                      "\"png_named_jpeg\":%lld,\"jpeg_named_png\":%lld", (long long)png, (long long)jpeg);
}

/* The final checkpoint and summary; a run that ended on non-finite losses writes none. */
static int _finish(dlt_run *r, loop_state *t)
{
    int64_t bad;
    int rc;
    if (t->st.bad_steps > 0) {
        return dlt_fail_agreed(r->err, -ERANGE, "the run ended on non-finite losses: no final checkpoint written");
    }
    bad = dlt_run_share_bad_images(r);
    if (bad > 0 && r->comm->rank == 0)
        dlt_log_warn(&r->log, "%lld bad image(s) were skipped and replaced (distinct files, over all %d rank(s))",
                     (long long)bad, r->comm->size);
    _renamed_summary(r);
    /* Agreed: only rank 0 writes, and the others must not go on into the summary's gather alone. */
    DLT_TRY_GOTO(r->err, rc,
                 dlt_run_agree_first_failure(r, dlt_run_save_required(r, t->step, t->step / t->spe, &t->wd)), fail,
                 NULL);
    dlt_run_log_summary(&r->log, t->step, r->cfg.baseline);
    if ((rc = dlt_straggler_summary(&t->straggler, r->comm, &r->log, dlt_now() - r->log.t_start)) !=
        0) /* straggler.h */
        return rc;
    return 0;
fail:
    return rc;
}

int dlt_train_run(const dlt_train_config *c, dlt_comm *comm, dlt_err *err)
{
    dlt_run r;
    loop_state t;
    int rc;
    memset(&t, 0, sizeof(t));
    if ((rc = dlt_run_open(&r, c, comm, DLT_RUN_TRAIN, err)) == 0 &&
        (rc = dlt_run_agree_on_failure(&r, _prepare(&r, &t))) == 0 &&
        (rc = dlt_run_agree_on_failure(&r, _prepare_validation(&r, &t))) == 0 &&
        (rc = _stop_before_first_step(&r, &t)) == 0) {
        if (t.step >= t.total) /* resumed at or past the end: the checkpoint is already the result */
            dlt_log(&r.log, DLT_LOG_QUIET,
                    "resumed at step %" PRId64 ", at or past the end of this run (%" PRId64
                    " step%s): nothing to train, nothing written",
                    t.step, t.total, t.total == 1 ? "" : "s");
        else {
            while (rc == 0 && t.step < t.total && !t.reached)
                rc = _train_step(&r, &t);
            if (rc == 0)
                rc = _finish(&r, &t);
        }
    }
    dlt_run_log_event(&r.log, "run_stop", "INTERVAL_END", NULL,
                      "\"status\":\"%s\",\"step_num\":%" PRId64 ",\"val_top1\":%.6f,"
                      "\"train_time\":%.3f,\"wall_time\":%.3f",
                      rc == 0 && (c->target_top1 <= 0 || t.reached) ? "success" : "aborted", t.step, t.val_top1,
                      dlt_run_train_seconds(&r), dlt_run_wall_seconds(&r));
    dlt_source_close(&t.val);
    dlt_watchdog_stop(&t.wd);
    dlt_straggler_close(&t.straggler); /* straggler.h */
    dlt_run_close(&r, rc < 0);
    return rc;
}
