/* SPDX-License-Identifier: Apache-2.0 */
/* eval: top-1/top-5 of a checkpoint over the validation images (or generated ones), every rank
 * scoring its shard and one collective summing the counts. */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/progress.h"
#include "common/status.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/comm/agree.h"
#include "trainer/data/loader.h"
#include "trainer/train/run.h"
#include "trainer/train/step_verbs.h"
#include "trainer/train/trainer.h"

/* prog (may be NULL): rank 0's share of the pass stands for every rank's (the shards differ by at
 * most a batch). stop (may be NULL): a training run's stop request; then after every batch the
 * ranks agree on it (one small all-reduce; a rank whose shard has ended still takes part), and a
 * request abandons the pass on every rank at the same batch: 1, counts not filled, at[0] the
 * batches done of at[1]. */
static int _eval_pass(dlt_run *r, dlt_source *src, double counts[DLT_EVAL_COUNTS], dlt_progress *prog,
                      const volatile sig_atomic_t *stop, int64_t at[2])
{
    int64_t steps = dlt_source_steps_per_epoch(src), rounds = steps, unscored = 0;
    double res[DLT_RES_COUNT];
    int rc;
    for (int i = 0; i < DLT_EVAL_COUNTS; i++)
        counts[i] = 0;
    if (stop && r->comm->size > 1) {
        /* Every rank takes part in every agreement: as many rounds as the longest shard. */
        dlt_agreement a = dlt_agreement_of_comm(r->comm);
        int64_t *all;
        if ((rc = dlt_agree_gather(&a, &steps, sizeof(steps), (void **)&all, r->err)) != 0)
            return dlt_fail_prefix(r->err, rc, "evaluation");
        for (int i = 0; i < r->comm->size; i++)
            rounds = all[i] > rounds ? all[i] : rounds;
        free(all);
    }
    /* The batches' hits add up on the backend; the host reads them once, after the last. */
    if ((rc = r->be->ops->results_reset(r->be)) != 0)
        return dlt_fail_prefix(r->err, rc, "evaluation");
    for (int64_t s = 0; s < rounds; s++) {
        int nv, nu;
        if (s < steps) {
            if ((rc = dlt_run_eval_batch(r, src, s, &nv, &nu)) != 0)
                return dlt_fail_prefix(r->err, rc, "evaluation");
            counts[DLT_EVAL_SCORED] += nv - nu; /* an unreadable image is not scored (the loader named it) */
            unscored += nu;
            if (prog)
                dlt_progress_update(prog, dlt_source_images(src) * (s + 1) / steps);
        }
        if (stop) {
            dlt_agreement a = dlt_agreement_of_comm(r->comm);
            int asked;
            if ((rc = dlt_agree_count(&a, *stop != 0, &asked, r->err)) != 0)
                return dlt_fail_prefix(r->err, rc, "evaluation");
            if (asked > 0) {
                at[0] = s + 1;
                at[1] = rounds;
                return 1;
            }
        }
    }
    if ((rc = dlt_run_read_eval_results(r, res, unscored)) != 0)
        return dlt_fail_prefix(r->err, rc, "evaluation");
    counts[DLT_EVAL_TOP1] = res[DLT_RES_TOP1];
    counts[DLT_EVAL_TOP5] = res[DLT_RES_TOP5];
    counts[DLT_EVAL_NONFINITE] = res[DLT_RES_NONFINITE_ROWS];
    /* One collective whatever each rank's share: every image scored exactly once in all. */
    return r->comm->ops->allreduce_sum(r->comm, counts, DLT_EVAL_COUNTS, DLT_DTYPE_F64);
}

int dlt_eval_pass(dlt_run *r, dlt_source *src, double counts[DLT_EVAL_COUNTS])
{
    return _eval_pass(r, src, counts, NULL, NULL, NULL);
}

int dlt_eval_pass_stoppable(dlt_run *r, dlt_source *src, double counts[DLT_EVAL_COUNTS],
                            const volatile sig_atomic_t *stop, int64_t at[2])
{
    return _eval_pass(r, src, counts, NULL, stop, at);
}

static int _score(dlt_run *r, const char *checkpoint)
{
    double counts[DLT_EVAL_COUNTS];
    dlt_progress prog;
    int rc;
    if ((rc = dlt_checkpoint_load(&r->net, checkpoint, NULL, r->err)) != 0)
        return rc;
    if ((rc = dlt_net_upload(&r->net)) != 0)
        return dlt_fail_prefix(r->err, rc, "loading the weights into the backend");
    if ((rc = dlt_source_start(&r->src, 0, 0, r->err)) != 0)
        return rc;
    dlt_progress_start(&prog, stderr, r->comm->rank != 0 || r->cfg.log_level < DLT_LOG_INFO, "evaluating", "images",
                       dlt_source_images(&r->src));
    if ((rc = _eval_pass(r, &r->src, counts, &prog, NULL, NULL)) != 0) {
        dlt_progress_clear(&prog); /* the error is said on a line of its own */
        return rc;
    }
    dlt_progress_end(&prog, (int64_t)counts[DLT_EVAL_SCORED]);
    if (counts[DLT_EVAL_SCORED] < 1) { /* the counts are summed over the ranks: every rank fails here together */
        return dlt_fail_agreed(r->err, -EIO,
                               "eval %s: no image could be scored (every one of the %lld was "
                               "unreadable: see the lines above), so there is no accuracy to report",
                               checkpoint, (long long)dlt_source_images(&r->src));
    }
    dlt_log(&r->log, DLT_LOG_QUIET, "eval %s: %.0f images, top-1 %.4f, top-5 %.4f", checkpoint, counts[DLT_EVAL_SCORED],
            counts[DLT_EVAL_TOP1] / counts[DLT_EVAL_SCORED], counts[DLT_EVAL_TOP5] / counts[DLT_EVAL_SCORED]);
    if (counts[DLT_EVAL_NONFINITE] > 0) /* fp16 overflow, or weights that are not finite */
        dlt_log(&r->log, DLT_LOG_QUIET,
                "eval %s: %.0f of the %.0f images gave logits that are not finite (NaN or infinite), "
                "counted as misses: the weights (or the precision) do not hold this model",
                checkpoint, counts[DLT_EVAL_NONFINITE], counts[DLT_EVAL_SCORED]);
    if (r->src.loader) {
        /* Files read by their content, not their name: each image is read by one rank once, so the
         * sum over the ranks counts each file once. */
        int64_t png, jpeg;
        double ren[2];
        dlt_loader_renamed(r->src.loader, &png, &jpeg);
        ren[0] = (double)png;
        ren[1] = (double)jpeg;
        if ((rc = r->comm->ops->allreduce_sum(r->comm, ren, 2, DLT_DTYPE_F64)) != 0)
            return dlt_fail_prefix(r->err, rc, "evaluation: summing the counts of renamed images");
        if (ren[0] + ren[1] > 0)
            dlt_log(&r->log, DLT_LOG_QUIET,
                    "%.0f image(s) were decoded by their content, not their name: %.0f PNG named .jpg/.jpeg, %.0f "
                    "JPEG named .png (--verbose names each)",
                    ren[0] + ren[1], ren[0], ren[1]);
    }
    return 0;
}

int dlt_eval_run(const dlt_train_config *c, dlt_comm *comm, const char *checkpoint, dlt_err *err)
{
    dlt_run r;
    dlt_train_config ce = *c;
    int rc;
    ce.eval_checkpoint = checkpoint; /* its class names say what the outputs mean */
    rc = dlt_run_open(&r, &ce, comm, DLT_RUN_EVAL, err);
    if (rc == 0)
        rc = _score(&r, checkpoint);
    dlt_run_close(&r, rc != 0);
    return rc;
}
