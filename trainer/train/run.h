/* SPDX-License-Identifier: Apache-2.0 */
/* run: what training, evaluation and the benchmark share: the run's parts (backend, network,
 * batch source, gradient reducer, loss scaler, log) opened and closed together. What their steps
 * do to them (load a batch, forward + loss, read the results) is step_verbs.h; the training step
 * itself is step.h. Errors: the parts report into the one dlt_err given at open (r->err, lent to
 * the backend and the communicator), which keeps the first failure; dlt_run_close leaves it there
 * for the command. */
#ifndef DLT_RUN_H
#define DLT_RUN_H

#include <signal.h>
#include <stdint.h>

#include "common/status.h"
#include "trainer/backend/backend.h"
#include "trainer/comm/comm.h"
#include "trainer/comm/grad_reducer.h"
#include "trainer/data/source.h"
#include "trainer/model/network.h"
#include "trainer/train/loss_scaler.h"
#include "trainer/train/run_log.h"
#include "trainer/train/trainer.h"

/* DLT_RUN_INPUT: the input path alone (bench --input-only): no network, no gradient reducer. */
typedef enum { DLT_RUN_TRAIN, DLT_RUN_EVAL, DLT_RUN_BENCH, DLT_RUN_INPUT } dlt_run_purpose;

typedef struct {
    dlt_train_config cfg; /* the run's settings; the class count may come from the data */
    dlt_comm *comm;
    dlt_backend *be;
    dlt_net net;
    dlt_source src;
    dlt_grad_reducer *reducer;
    dlt_loss_scaler scaler;
    dlt_run_log log;
    dlt_run_claims claims; /* rank 0's claims on its checkpoint folder, TensorBoard folder, metrics file */
    const uint8_t *images; /* the step's batch on the host: in the source's ring (pinned on a GPU) */
    const int32_t *labels;
    int32_t *no_labels; /* class 0 everywhere: the labels of a batch that could not be loaded */
    int held;           /* batches acquired from src and not yet released */
    struct {            /* the next batch, acquired and its copy queued ahead (dlt_run_prefetch) */
        int ready, rc;
        int64_t epoch, step;
        const uint8_t *images;
        const int32_t *labels;
        dlt_err err;
    } next;
    dlt_err *err;              /* the run's one error, given at open and lent to the backend: the first
                                * failure of any part, and whether every rank took it together */
    char *classes;             /* the class names the model's outputs mean, one a line (the training data's,
                                * or the checkpoint's for eval); NULL: the data has no names */
    char *ck_classes;          /* the names the eval or resume checkpoint records (NULL: none) */
    char resume_history[2048]; /* settings changed on resume, carried into every checkpoint it writes */
    int64_t line, parent_line, parent_step; /* the line its checkpoints belong to (dlt_train_state) */
    int64_t saved_step;                     /* the step of the newest checkpoint written or resumed from; -1: none */
    double prior_train_s; /* training time of the incarnations before this one (from the checkpoint) */
    double first_start;   /* UNIX time of the run's first start (this one's, or the checkpoint's) */
} dlt_run;

/* Opens the batch source (the training or validation images, or generated ones), the backend,
 * the network and the reducer. err (the communicator's too) must outlive the run. */
int dlt_run_open(dlt_run *r, const dlt_train_config *c, dlt_comm *comm, dlt_run_purpose purpose, dlt_err *err);
/* After a stretch without collectives that every rank runs through whatever fails (opening the
 * run, preparing training): one agreement (agree.h) tells every rank who failed (rc: this rank's
 * status, its message in r->err), and all stop together, with no abort (err->agreed). What every rank found alike
 * (the same message) is said once: the other ranks' err is emptied; else each rank that failed
 * keeps its own and rank 0's says how many failed. Returns rc, or -ECANCELED on a rank that did
 * not fail itself, or 0 when no rank failed. */
int dlt_run_agree_on_failure(dlt_run *r, int rc);

/* The outcome of work each rank did alone (a rank's own file, rank 0's checkpoint), agreed on: when
 * some rank failed, every rank returns the lowest failing rank's status with its words ("rank R on
 * node N: ...", marked agreed, dlt_agree_first_failure); 0 when none did. One rank: rc itself. */
int dlt_run_agree_first_failure(dlt_run *r, int rc);

/* Training time over every incarnation so far (the checkpoint's and this run's since it started,
 * each on its node's monotonic clock), and wall time since the first incarnation started, in
 * seconds: by this node's clock against the first start's stamp (queue waits between incarnations
 * included), and never less than the training time (nodes' clocks may disagree). */
double dlt_run_train_seconds(const dlt_run *r);
double dlt_run_wall_seconds(const dlt_run *r);

/* failed: the run ends on an error (the first one r->err kept). Unless every rank took that decision together
 * (err->agreed), a run of several ranks prints the error and aborts the communicator, so the other ranks, which may be
 * waiting in a collective for this one, end now instead of at the stall watchdog. */
void dlt_run_close(dlt_run *r, int failed);
/* A status from the parts below (their words already in r->err) recorded as the run's, when it is
 * the first; returns rc. */
int dlt_run_fail(dlt_run *r, int rc);
/* Every rank learns the bad files the others found (each is reported once per run); returns the
 * run's total of distinct bad files, the same on every rank. A collective: all ranks call it at the
 * same points. */
int64_t dlt_run_share_bad_images(dlt_run *r);

/* The validation images of a training run (ROOT/val, --val-data, or generated ones), started:
 * 1 when there are some, 0 when there are none, negative on an error. */
int dlt_run_open_validation(dlt_run *r, dlt_source *val);
/* An evaluation's counts, summed over the ranks. A sample whose logits are not all finite is a
 * miss (never a hit), and counted. */
enum { DLT_EVAL_TOP1 = 0, DLT_EVAL_TOP5, DLT_EVAL_SCORED, DLT_EVAL_NONFINITE, DLT_EVAL_COUNTS };
/* One evaluation of the current weights over every image of src (each exactly once over the
 * ranks; the network's training state untouched): counts (DLT_EVAL_*), summed over the ranks.
 * A collective. */
int dlt_eval_pass(dlt_run *r, dlt_source *src, double counts[DLT_EVAL_COUNTS]);
/* The same inside training: after each batch the ranks agree on *stop (a signal's stop request),
 * and a request abandons the pass on every rank at the same batch: 1 (at[0] of at[1] batches done),
 * counts not filled; 0 done; <0 an error. */
int dlt_eval_pass_stoppable(dlt_run *r, dlt_source *src, double counts[DLT_EVAL_COUNTS],
                            const volatile sig_atomic_t *stop, int64_t at[2]);

#endif
