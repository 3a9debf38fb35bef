/* SPDX-License-Identifier: Apache-2.0 */
/* checkpointing: writing, resuming, replica checks. */
#include "config.h"

#include "trainer/train/checkpointing.h"

#include "trainer/comm/agree.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/status.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/housekeeping.h"
#include "trainer/data/dataset.h"

void dlt_run_config_text(const dlt_train_config *c, int world, char *buf, size_t len)
{
    char ms[96] = "";
    for (int i = 0; i < c->nmilestones; i++)
        snprintf(ms + strlen(ms), sizeof(ms) - strlen(ms), "%s%d", i ? "," : "", c->milestones[i]);
    snprintf(buf, len,
             "arch=%s width=%g image=%d classes=%d batch=%d world=%d precision=%s base_lr=%g momentum=%g wd=%g "
             "smoothing=%g warmup=%g schedule=%s epochs=%" PRId64 " seed=%" PRIu64 " synthetic_size=%" PRId64
             " milestones=%s",
             c->model.arch, (double)c->model.width, c->model.image, c->model.classes, c->model.batch, world,
             dlt_precision_name(c->backend.precision), c->base_lr, c->momentum, c->weight_decay, c->label_smoothing,
             c->warmup_epochs, c->cosine ? "cosine" : "step", c->epochs, c->seed, c->synthetic_size,
             ms[0] ? ms : "none");
}

void dlt_run_data_text(const dlt_run *r, char *buf, size_t len)
{
    const dlt_dataset *ds = r->src.ds;
    uint64_t files = 0, names = 0;
    if (!ds) { /* generated: the seed and size are among the settings */
        snprintf(buf, len, "source=synthetic classes=%d", r->cfg.model.classes);
        return;
    }
    dlt_dataset_digest(ds, &files, &names);
    snprintf(buf, len, "source=images images=%lld classes=%d files=%016llx names=%016llx",
             (long long)dlt_dataset_count(ds), dlt_dataset_classes(ds), (unsigned long long)files,
             (unsigned long long)names);
}

/* A data record (dlt_run_data_text) in words. */
static void _data_words(const char *rec, char *out, size_t len)
{
    char src[32] = "", n[32] = "?", k[32] = "?", f[32] = "?", c[32] = "?";
    dlt_checkpoint_config_field(rec, "source", src, sizeof(src));
    dlt_checkpoint_config_field(rec, "images", n, sizeof(n));
    dlt_checkpoint_config_field(rec, "classes", k, sizeof(k));
    dlt_checkpoint_config_field(rec, "files", f, sizeof(f));
    dlt_checkpoint_config_field(rec, "names", c, sizeof(c));
    if (!strcmp(src, "synthetic"))
        snprintf(out, len, "generated images in %s classes (--synthetic)", k);
    else
        snprintf(out, len, "%s images in %s classes (file list digest %s, class names digest %s)", n, k, f, c);
}

/* The recorded settings a resume compares: the key in the state file's config record, the name
 * --resume-override takes and messages use, and whether it may change at all (the model's shape
 * cannot: the tensors would not fit). */
static const struct {
    const char *key, *name;
    int fixed;
} g_resume_keys[] = {
    {"arch", "arch", 1},
    {"width", "width", 1},
    {"image", "image-size", 1},
    {"classes", "classes", 1},
    {"batch", "batch", 0},
    {"world", "ranks", 0},
    {"precision", "precision", 0},
    {"base_lr", "lr", 0},
    {"momentum", "momentum", 0},
    {"wd", "wd", 0},
    {"smoothing", "label-smoothing", 0},
    {"warmup", "warmup-epochs", 0},
    {"schedule", "schedule", 0},
    {"epochs", "epochs", 0},
    {"milestones", "milestones", 0},
    {"seed", "seed", 0},
    {"synthetic_size", "synthetic-size", 0},
};
#define RESUME_KEYS ((int)(sizeof(g_resume_keys) / sizeof(g_resume_keys[0])))

/* Whether name is in the comma-separated list. */
static int _listed(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; p && *p; p += strcspn(p, ","), p += *p == ',') {
        if (strcspn(p, ",") == n && !strncmp(p, name, n))
            return 1;
    }
    return 0;
}

static const char *_option(const char *name, char *buf, size_t len)
{
    if (!strcmp(name, "ranks"))
        snprintf(buf, len, "the rank count");
    else
        snprintf(buf, len, "--%s", name);
    return buf;
}

int dlt_resume_override_check(const char *keys, dlt_err *err)
{
    const char *p = keys;
    if (!keys || !*keys)
        return dlt_fail(err, -EINVAL,
                        "--resume-override '': name the settings that may change, e.g. "
                        "--resume-override batch,lr");
    while (*p) {
        size_t n = strcspn(p, ",");
        int k;
        for (k = 0; k < RESUME_KEYS; k++)
            if (strlen(g_resume_keys[k].name) == n && !strncmp(g_resume_keys[k].name, p, n))
                break;
        if (k == RESUME_KEYS) {
            char known[512] = "";
            for (int i = 0; i < RESUME_KEYS; i++)
                if (!g_resume_keys[i].fixed)
                    snprintf(known + strlen(known), sizeof(known) - strlen(known), "%s%s", known[0] ? "," : "",
                             g_resume_keys[i].name);
            return dlt_fail(err, -EINVAL,
                            "--resume-override %s: unknown setting '%.*s' (the settings a "
                            "resume may change: %s)",
                            keys, (int)n, p, known);
        }
        if (g_resume_keys[k].fixed)
            return dlt_fail(err, -EINVAL,
                            "--resume-override %s: %s cannot change on resume (the model's "
                            "tensors would not fit); start a new run, or use --init to fine-tune from the weights",
                            keys, g_resume_keys[k].name);
        p += n;
        if (*p == ',' && *++p == '\0')
            return dlt_fail(err, -EINVAL, "--resume-override %s: an empty name after the last comma", keys);
    }
    return 0;
}

int dlt_resume_compare(const char *recorded, const char *now, const char *overrides, char *refused, size_t rlen,
                       char *changed, size_t clen)
{
    char rv[128], nv[128], rs[16] = "", ns[16] = "", opt[48];
    int nrefused = 0;
    refused[0] = changed[0] = '\0';
    dlt_checkpoint_config_field(recorded, "schedule", rs, sizeof(rs));
    dlt_checkpoint_config_field(now, "schedule", ns, sizeof(ns));
    for (int k = 0; k < RESUME_KEYS; k++) {
        const char *key = g_resume_keys[k].key;
        /* Settings a checkpoint of an older dltrain did not record are not compared. */
        if (!dlt_checkpoint_config_field(recorded, key, rv, sizeof(rv)) ||
            !dlt_checkpoint_config_field(now, key, nv, sizeof(nv)) || !strcmp(rv, nv))
            continue;
        /* --epochs shapes the learning rate only under the cosine schedule (elsewhere it says where
         * to stop, like --steps); the milestones only under the step schedule. */
        if (!strcmp(key, "epochs") && strcmp(rs, "cosine") && strcmp(ns, "cosine"))
            continue;
        if (!strcmp(key, "milestones") && (strcmp(rs, "step") || strcmp(ns, "step")))
            continue;
        _option(g_resume_keys[k].name, opt, sizeof(opt));
        if (!g_resume_keys[k].fixed && _listed(overrides, g_resume_keys[k].name)) {
            snprintf(changed + strlen(changed), clen - strlen(changed), "%s%s %s -> %s", changed[0] ? ", " : "", opt,
                     rv, nv);
            continue;
        }
        snprintf(refused + strlen(refused), rlen - strlen(refused), "%s%s: checkpoint %s, now %s%s",
                 nrefused ? "\n" : "", opt, rv, nv, g_resume_keys[k].fixed ? " (cannot change)" : "");
        nrefused++;
    }
    return nrefused;
}

int dlt_run_save_required(dlt_run *r, int64_t step, int64_t epoch, dlt_watchdog *wd)
{
    int rc = dlt_run_save(r, step, epoch, wd);
    if (rc != DLT_SAVE_SKIPPED)
        return rc;
    /* A stop would exit 75 as saved and be requeued onto the same divergence; the run's end would
     * say success with no final checkpoint. */
    return dlt_fail(r->err, -ERANGE,
                    "weights not finite at step %" PRId64 ": no checkpoint written (the previous one stays): the run "
                    "diverged (a lower --lr, or --precision fp32)",
                    step);
}

int dlt_run_save(dlt_run *r, int64_t step, int64_t epoch, dlt_watchdog *wd)
{
    const dlt_train_config *c = &r->cfg;
    dlt_train_state st;
    char path[4096];
    int rc;
    if (!c->checkpoint_dir)
        return 0;
    if (r->comm->rank != 0) { /* rank 0's failure reaches every rank at the next agreement */
        r->saved_step = step;
        return 0;
    }
    dlt_watchdog_phase(wd, DLT_PHASE_CHECKPOINT, step);
    if ((rc = dlt_net_download(&r->net)) != 0)
        return dlt_fail_prefix(r->err, rc,
                               "checkpoint at step %" PRId64 " FAILED (the previous checkpoint is untouched): "
                               "reading the weights back",
                               step);
    /* Never replace a good checkpoint with diverged weights (the next loss will stop the run). */
    for (size_t i = 0; i < r->net.model.nparams; i++)
        if (!isfinite(r->net.params[i])) {
            dlt_log_warn(&r->log,
                         "weights not finite at step %" PRId64 ": checkpoint not written (the previous one "
                         "stays)",
                         step);
            return DLT_SAVE_SKIPPED;
        }
    memset(&st, 0, sizeof(st));
    st.step = step;
    st.epoch = epoch;
    st.seed = c->seed;
    dlt_run_config_text(c, r->comm->size, st.config, sizeof(st.config));
    snprintf(st.history, sizeof(st.history), "%s", r->resume_history);
    st.class_names = r->classes;
    dlt_run_data_text(r, st.data, sizeof(st.data));
    st.train_seconds = dlt_run_train_seconds(r);
    st.first_start = r->first_start;
    st.line = r->line;
    st.parent_line = r->parent_line;
    st.parent_step = r->parent_step;
    {
        /* An abandoned line's (or a damaged) checkpoint of this step is kept under another name. */
        char said[512];
        if ((rc = dlt_checkpoint_set_aside(c->checkpoint_dir, step, r->line, said, sizeof(said), r->err)) < 0)
            return dlt_fail_prefix(
                r->err, rc, "checkpoint at step %" PRId64 " FAILED (the previous checkpoint is untouched)", step);
        if (rc > 0)
            dlt_log(&r->log, DLT_LOG_QUIET,
                    "checkpoint at step %" PRId64 ": %s held another line's checkpoint of that step (or one "
                    "whose line cannot be read), kept under another name, not overwritten: %s",
                    step, c->checkpoint_dir, said);
    }
    if ((rc = dlt_checkpoint_save(&r->net, &st, c->checkpoint_dir, path, sizeof(path), r->err)) != 0)
        return dlt_fail_prefix(r->err, rc ? rc : -EIO,
                               "checkpoint at step %" PRId64 " FAILED (the previous checkpoint is untouched)", step);
    r->saved_step = step;
    {
        /* --verbose: the line also says when torchvision cannot load the file (a width multiplier). */
        char note[256];
        const char *tv =
            r->log.level >= DLT_LOG_VERBOSE ? dlt_model_torchvision_note(&c->model, note, sizeof(note)) : NULL;
        dlt_log(&r->log, DLT_LOG_INFO, "checkpoint %s (step %" PRId64 ")%s%s", path, step, tv ? "; " : "",
                tv ? tv : "");
    }
    if (c->keep_checkpoints > 0) {
        char said[512];
        dlt_err why = DLT_ERR_INIT;
        int n = 0;
        /* A removal that fails costs disk, not the run: said, and the next save tries again. */
        if (dlt_checkpoint_prune(c->checkpoint_dir, c->keep_checkpoints, step, &n, said, sizeof(said), &why) != 0)
            dlt_log_warn(&r->log, "--keep-checkpoints %d: %s", c->keep_checkpoints, why.msg);
        if (n > 0)
            dlt_log(&r->log, DLT_LOG_VERBOSE, "removed %s (--keep-checkpoints %d)", said, c->keep_checkpoints);
    }
    return 0;
}

/* Whether two paths name one folder. */
static int _same_dir(const char *a, const char *b)
{
    struct stat x, y;
    return stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

/* The line this run's checkpoints belong to (rank 0, which writes them). Resuming from the
 * checkpoint --resume auto would take (the head of the folder's newest line) continues that line;
 * a run from scratch, or one that goes back to any other checkpoint (a rollback), starts a new
 * line numbered above every line in the folder, whose parent is the checkpoint it resumed from (in
 * the same folder), so that the next --resume auto follows it, not the abandoned steps above. */
static void _choose_line(dlt_run *r, const dlt_train_state *st)
{
    const dlt_train_config *c = &r->cfg;
    dlt_checkpoint_entry *list = NULL;
    dlt_err ignore = DLT_ERR_INIT;
    int64_t top = 0;
    int n = 0, same = 0;
    r->line = 1;
    r->parent_line = r->parent_step = -1;
    if (r->comm->rank != 0 || !c->checkpoint_dir)
        return;
    if (dlt_checkpoint_list(c->checkpoint_dir, &list, &n, &ignore) != 0)
        n = 0; /* unreadable now: the first save says why */
    for (int i = 0; i < n; i++)
        if (list[i].lineage.line > top)
            top = list[i].lineage.line;
    if (st) {
        char dir[4096];
        const char *slash = strrchr(c->resume, '/');
        snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - c->resume) : 1, slash ? c->resume : ".");
        same = _same_dir(dir, c->checkpoint_dir);
    }
    if (st && same && n > 0 && list[0].step == st->step && list[0].lineage.line == st->line) {
        r->line = st->line; /* the head: this run continues its line */
        r->parent_line = st->parent_line;
        r->parent_step = st->parent_step;
    } else {
        r->line = top + 1;
        if (st && same) {
            r->parent_line = st->line;
            r->parent_step = st->step;
            if (n > 0)
                dlt_log(&r->log, DLT_LOG_INFO,
                        "%s is not the newest checkpoint of %s (%s is): this run's "
                        "checkpoints start a new line, which --resume auto will follow from now on",
                        c->resume, c->checkpoint_dir, list[0].name);
        }
    }
    free(list);
}

int dlt_run_resume(dlt_run *r, int64_t *step)
{
    const dlt_train_config *c = &r->cfg;
    dlt_train_state st;
    int rc, fc = 0;
    *step = 0;
    if (c->init && c->resume)
        return dlt_fail(r->err, -EINVAL,
                        "--init %s and --resume %s: --resume continues a run, --init "
                        "starts one from given weights; give one",
                        c->init, c->resume);
    if (!c->resume)
        _choose_line(r, NULL);
    if (c->init) {
        if ((rc = dlt_checkpoint_load_init(&r->net, c->init, &fc, r->err)) != 0)
            return dlt_fail_prefix(r->err, rc, "--init");
        if (fc)
            dlt_log(&r->log, DLT_LOG_INFO,
                    "initialised from %s; its classifier has %d classes, this run %d: fc "
                    "re-initialised",
                    c->init, fc, c->model.classes);
        else
            dlt_log(&r->log, DLT_LOG_INFO, "initialised from %s", c->init);
        return 0;
    }
    /* A path: --resume auto was turned into the newest valid one (or none) before launch, by every
     * rank together (cli/preflight.c). */
    if (!c->resume)
        return 0;
    if ((rc = dlt_checkpoint_load(&r->net, c->resume, &st, r->err)) != 0)
        return dlt_fail_prefix(r->err, rc, "cannot resume");
    *step = st.step;
    r->saved_step = st.step;
    _choose_line(r, &st);
    /* Time to target counts every incarnation (a checkpoint of an older dltrain: from here on). */
    r->prior_train_s = st.train_seconds;
    if (st.first_start > 0)
        r->first_start = st.first_start;
    /* The preflight refused settings that differ without --resume-override (every rank alike,
     * before launch); here the allowed changes are said, recorded, and a new global batch turns
     * the step count into the same number of images seen. */
    {
        char now[1024], refused[1024], changed[1024], v[32];
        long long old_batch = 0, old_world = 0;
        dlt_run_config_text(c, r->comm->size, now, sizeof(now));
        if (dlt_resume_compare(st.config, now, c->resume_override, refused, sizeof(refused), changed, sizeof(changed)) >
            0)
            return dlt_fail(r->err, -EINVAL, "cannot resume from %s with other settings: %s", c->resume, refused);
        snprintf(r->resume_history, sizeof(r->resume_history), "%s", st.history);
        /* A job array's tasks sharing one folder would otherwise continue each other's runs. */
        {
            char data[256], was[256], is[256];
            dlt_run_data_text(r, data, sizeof(data));
            if (st.data[0] && strcmp(st.data, data)) {
                _data_words(st.data, was, sizeof(was));
                _data_words(data, is, sizeof(is));
                if (c->resume_chosen) /* every rank read the same file and agreed on the data: all stop alike */
                    return dlt_fail_agreed(
                        r->err, -EINVAL,
                        "--resume auto: %s was written on other data (checkpoint: %s; this run: %s): "
                        "tasks of a job array sharing one --checkpoint-dir? give each task its own "
                        "--checkpoint-dir, or --resume FILE to continue from this one on purpose",
                        c->resume, was, is);
                dlt_log(&r->log, DLT_LOG_QUIET,
                        "continuing on other data as --resume FILE asks: %s was written on "
                        "other data (checkpoint: %s; this run: %s)",
                        c->resume, was, is);
                {
                    size_t n = strlen(r->resume_history);
                    snprintf(r->resume_history + n, sizeof(r->resume_history) - n, "%sstep %" PRId64 ": data %s -> %s",
                             n ? "; " : "", st.step, was, is);
                }
            }
        }
        if (changed[0]) {
            size_t n = strlen(r->resume_history);
            snprintf(r->resume_history + n, sizeof(r->resume_history) - n, "%sstep %" PRId64 ": %s", n ? "; " : "",
                     st.step, changed);
            dlt_log(&r->log, DLT_LOG_QUIET, "resuming with changed settings (--resume-override): %s", changed);
        }
        if (dlt_checkpoint_config_field(st.config, "batch", v, sizeof(v)))
            old_batch = strtoll(v, NULL, 10);
        if (dlt_checkpoint_config_field(st.config, "world", v, sizeof(v)))
            old_world = strtoll(v, NULL, 10);
        if (old_batch > 0 && old_world > 0 && old_batch * old_world != (long long)c->model.batch * r->comm->size) {
            long long gb = (long long)c->model.batch * r->comm->size;
            *step = (int64_t)((long long)st.step * old_batch * old_world / gb);
            /* Checkpoints numbered above the new step would be taken by a later --resume auto
             * over this run's own (the newest by step wins): continue in another directory. */
            if (c->checkpoint_dir && dlt_checkpoint_dir_max_step(c->checkpoint_dir) > *step)
                /* every rank reads the same directory: all stop alike, no abort */
                return dlt_fail_agreed(
                    r->err, -EEXIST,
                    "global batch %lld -> %lld: step %" PRId64 " of the checkpoint continues as step "
                    "%" PRId64 ", but %s holds checkpoints up to step %" PRId64 ", which a later --resume "
                    "auto would take over this run's; give another --checkpoint-dir (--resume with the "
                    "checkpoint's path)",
                    old_batch * old_world, gb, st.step, *step, c->checkpoint_dir,
                    dlt_checkpoint_dir_max_step(c->checkpoint_dir));
            dlt_log(&r->log, DLT_LOG_QUIET,
                    "global batch %lld -> %lld: step %" PRId64 " of the checkpoint (%lld "
                    "images) continues as step %" PRId64,
                    old_batch * old_world, gb, st.step, (long long)st.step * old_batch * old_world, *step);
        }
    }
    dlt_log(&r->log, DLT_LOG_INFO, "resumed from %s at step %" PRId64 " (the next step is in epoch %" PRId64 ")",
            c->resume, st.step, st.epoch + 1);
    return 0;
}

int dlt_run_check_replicas(dlt_run *r, int64_t step)
{
    dlt_agreement a;
    dlt_agree_values v;
    double sum = 0, s1 = 0, s2 = 0;
    dlt_net *n = &r->net;
    int size = r->comm->size, rc;
    if (size < 2)
        return 0;
    /* A checksum computed where the weights live: no copy of the model to the host. */
    if ((rc = r->be->ops->checksum(r->be, n->d_params, n->model.nparams, &sum)) != 0)
        return dlt_fail_prefix(r->err, rc, "weight checksum");
    /* Every rank's checksum, the same bytes everywhere: bit-identical when all are; the run stops
     * only when their spread (mean square less squared mean) passes 1e-9 of the mean square. */
    a = dlt_agreement_of_comm(r->comm);
    if ((rc = dlt_agree_same(&a, &sum, sizeof(sum), &v, r->err)) != 0)
        return rc;
    for (int k = 0; k < size; k++) {
        double x;
        memcpy(&x, dlt_agree_record(&v, k), sizeof(x));
        s1 += x;
        s2 += x * x;
    }
    if (fabs(s2 / size - (s1 / size) * (s1 / size)) > 1e-9 * fmax(1.0, s2 / size)) {
        char held[128], other[128];
        double ref, x = 0;
        int o = -1;
        memcpy(&ref, dlt_agree_record(&v, v.reference), sizeof(ref));
        for (int k = 0; k < size && o < 0; k++)
            if (dlt_agree_group_leader(&v, k) && k != v.reference)
                o = k;
        memcpy(&x, dlt_agree_record(&v, o), sizeof(x));
        dlt_agree_group_ranks(&v, v.reference, held, sizeof(held));
        dlt_agree_group_ranks(&v, o, other, sizeof(other));
        dlt_agree_values_free(&v);
        /* every rank reads the same checksums: all stop alike, with the same words */
        return dlt_fail_agreed(r->err, -EIO,
                               "weights differ across ranks at step %" PRId64 " (checksum %.17g on "
                               "rank(s) %s, %.17g on rank(s) %s): stopping",
                               step, ref, held, x, other);
    }
    dlt_log(&r->log, DLT_LOG_VERBOSE, "weights at step %" PRId64 " %s across %d ranks (checksum %.17g)", step,
            v.same ? "bit-identical" : "agree within 1e-9 but are not bit-identical", size, sum);
    dlt_agree_values_free(&v);
    return 0;
}
