/* SPDX-License-Identifier: Apache-2.0 */
/* checkpointing: writing, resuming, replica checks. */
#include "config.h"

#include "trainer/train/checkpointing.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "trainer/checkpoint/checkpoint.h"
#include "trainer/common/status.h"

static void _config_text(const dlt_train_config *c, int world, char *buf, size_t len)
{
    snprintf(buf, len,
             "arch=%s width=%g image=%d classes=%d batch=%d world=%d precision=%s base_lr=%g momentum=%g wd=%g "
             "smoothing=%g warmup=%g schedule=%s epochs=%" PRId64 " seed=%" PRIu64 " synthetic_size=%" PRId64,
             c->model.arch, (double)c->model.width, c->model.image, c->model.classes, c->model.batch, world,
             dlt_precision_name(c->backend.precision), c->base_lr, c->momentum, c->weight_decay,
             c->label_smoothing, c->warmup_epochs, c->cosine ? "cosine" : "step", c->epochs, c->seed,
             c->synthetic_size);
}

int dlt_run_save(dlt_run *r, int64_t step, int64_t epoch, dlt_watchdog *wd)
{
    const dlt_train_config *c = &r->cfg;
    dlt_train_state st;
    char path[4096];
    int rc;
    if (r->comm->rank != 0 || !c->checkpoint_dir)
        return 0;
    dlt_watchdog_phase(wd, DLT_PHASE_CHECKPOINT, step);
    if ((rc = dlt_net_download(&r->net)) != 0)
        return dlt_fail_prefix(r->err, r->errlen, rc,
                               "checkpoint at step %" PRId64 " FAILED (the previous checkpoint is untouched): "
                               "reading the weights back", step);
    /* Never replace a good checkpoint with diverged weights: the next loss will stop the run. */
    for (size_t i = 0; i < r->net.model.nparams; i++)
        if (!isfinite(r->net.params[i])) {
            dlt_log_warn(&r->log, "weights not finite at step %" PRId64 ": checkpoint not written (the previous one "
                         "stays)", step);
            return 0;
        }
    memset(&st, 0, sizeof(st));
    st.step = step;
    st.epoch = epoch;
    st.seed = c->seed;
    _config_text(c, r->comm->size, st.config, sizeof(st.config));
    if ((rc = dlt_checkpoint_save(&r->net, &st, c->checkpoint_dir, path, sizeof(path), r->err, r->errlen)) != 0)
        return dlt_fail_prefix(r->err, r->errlen, rc ? rc : -EIO,
                               "checkpoint at step %" PRId64 " FAILED (the previous checkpoint is untouched)", step);
    dlt_log(&r->log, DLT_LOG_INFO, "checkpoint %s (step %" PRId64 ")", path, step);
    return 0;
}

int dlt_run_resume(dlt_run *r, int64_t *step)
{
    const dlt_train_config *c = &r->cfg;
    dlt_train_state st;
    int rc, fc = 0;
    *step = 0;
    if (c->init && c->resume)
        return dlt_fail(r->err, r->errlen, -EINVAL, "--init %s and --resume %s: --resume continues a run, --init "
                        "starts one from given weights; give one", c->init, c->resume);
    if (c->init) {
        if ((rc = dlt_checkpoint_load_init(&r->net, c->init, &fc, r->err, r->errlen)) != 0)
            return dlt_fail_prefix(r->err, r->errlen, rc, "--init");
        if (fc)
            dlt_log(&r->log, DLT_LOG_INFO, "initialised from %s; its classifier has %d classes, this run %d: fc "
                    "re-initialised", c->init, fc, c->model.classes);
        else
            dlt_log(&r->log, DLT_LOG_INFO, "initialised from %s", c->init);
        return 0;
    }
    /* A path: --resume auto was turned into the newest valid one (or none) before launch, by every
     * rank together (cli/preflight.c). */
    if (!c->resume)
        return 0;
    if ((rc = dlt_checkpoint_load(&r->net, c->resume, &st, r->err, r->errlen)) != 0)
        return dlt_fail_prefix(r->err, r->errlen, rc, "cannot resume");
    *step = st.step;
    dlt_log(&r->log, DLT_LOG_INFO, "resumed from %s at step %" PRId64 " (epoch %" PRId64 ")", c->resume, st.step,
            st.epoch);
    return 0;
}

int dlt_run_check_replicas(dlt_run *r, int64_t step)
{
    double v[2] = {0, 0}, sum = 0;
    dlt_net *n = &r->net;
    int size = r->comm->size, rc;
    if (size < 2)
        return 0;
    /* A checksum computed where the weights live: no copy of the model to the host. */
    if ((rc = r->be->ops->checksum(r->be, n->d_params, n->model.nparams, &sum)) != 0)
        return dlt_fail_prefix(r->err, r->errlen, rc, "weight checksum");
    v[0] = sum;
    v[1] = sum * sum;
    if ((rc = r->comm->ops->allreduce_sum(r->comm, v, 2, DLT_DTYPE_F64)) != 0)
        return rc;
    if (fabs(v[1] / size - (v[0] / size) * (v[0] / size)) > 1e-9 * fmax(1.0, v[1] / size))
        return dlt_fail(r->err, r->errlen, -EIO,
                        "weights differ across ranks at step %" PRId64 " (checksum %.17g): stopping", step, sum);
    return 0;
}
