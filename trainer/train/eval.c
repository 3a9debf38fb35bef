/* SPDX-License-Identifier: Apache-2.0 */
/* eval: top-1/top-5 of a checkpoint over the validation images (or generated ones), every rank
 * scoring its shard and one collective summing the counts. */
#include "config.h"

#include <stdio.h>

#include "trainer/checkpoint/checkpoint.h"
#include "trainer/common/progress.h"
#include "trainer/common/status.h"
#include "trainer/train/run.h"
#include "trainer/train/trainer.h"

/* prog (may be NULL): rank 0's share of the pass stands for every rank's (the shards differ by at
 * most a batch). */
static int _eval_pass(dlt_run *r, dlt_source *src, double counts[3], dlt_progress *prog)
{
    int64_t steps = dlt_source_steps_per_epoch(src), unscored = 0;
    double res[DLT_RES_COUNT];
    int rc;
    counts[0] = counts[1] = counts[2] = 0;
    /* The batches' hits add up on the backend; the host reads them once, after the last. */
    if ((rc = r->be->ops->results_reset(r->be)) != 0)
        return dlt_fail_prefix(r->err, r->errlen, rc, "evaluation");
    for (int64_t s = 0; s < steps; s++) {
        int nv, nu;
        if ((rc = dlt_run_eval_batch(r, src, s, &nv, &nu)) != 0)
            return dlt_fail_prefix(r->err, r->errlen, rc, "evaluation");
        counts[2] += nv - nu; /* an unreadable image is not scored (the loader named it) */
        unscored += nu;
        if (prog)
            dlt_progress_update(prog, dlt_source_images(src) * (s + 1) / steps);
    }
    if ((rc = dlt_run_read_eval_results(r, res, unscored)) != 0)
        return dlt_fail_prefix(r->err, r->errlen, rc, "evaluation");
    counts[0] = res[DLT_RES_TOP1];
    counts[1] = res[DLT_RES_TOP5];
    /* One collective whatever each rank's share: every image scored exactly once in all. */
    return r->comm->ops->allreduce_sum(r->comm, counts, 3, DLT_DTYPE_F64);
}

int dlt_eval_pass(dlt_run *r, dlt_source *src, double counts[3])
{
    return _eval_pass(r, src, counts, NULL);
}

static int _score(dlt_run *r, const char *checkpoint)
{
    double counts[3];
    dlt_progress prog;
    int rc;
    if ((rc = dlt_checkpoint_load(&r->net, checkpoint, NULL, r->err, r->errlen)) != 0)
        return rc;
    if ((rc = dlt_net_upload(&r->net)) != 0)
        return dlt_fail_prefix(r->err, r->errlen, rc, "loading the weights into the backend");
    if ((rc = dlt_source_start(&r->src, 0, 0, r->err, r->errlen)) != 0)
        return rc;
    dlt_progress_start(&prog, stderr, r->comm->rank != 0 || r->cfg.log_level < DLT_LOG_INFO, "evaluating", "images",
                       dlt_source_images(&r->src));
    if ((rc = _eval_pass(r, &r->src, counts, &prog)) != 0) {
        dlt_progress_clear(&prog); /* the error is said on a line of its own */
        return rc;
    }
    dlt_progress_end(&prog, (int64_t)counts[2]);
    dlt_log(&r->log, DLT_LOG_QUIET, "eval %s: %.0f images, top-1 %.4f, top-5 %.4f", checkpoint, counts[2],
            counts[0] / counts[2], counts[1] / counts[2]);
    return 0;
}

int dlt_eval_run(const dlt_train_config *c, dlt_comm *comm, const char *checkpoint, char *err, size_t errlen)
{
    dlt_run r;
    dlt_train_config ce = *c;
    int rc;
    ce.eval_checkpoint = checkpoint; /* its class names say what the outputs mean */
    rc = dlt_run_open(&r, &ce, comm, DLT_RUN_EVAL, err, errlen);
    if (rc == 0)
        rc = _score(&r, checkpoint);
    dlt_run_close(&r, rc != 0);
    return rc;
}
