/* SPDX-License-Identifier: Apache-2.0 */
/* run: the parts of a run, opened and closed together (the verbs of its steps: step_verbs.c). */
#include "config.h"

#include "trainer/data/folder_index.h"
#include "trainer/train/run.h"
#include "trainer/train/shared_scan.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "common/clock.h"
#include "common/io.h"
#include "common/node_name.h"
#include "common/status.h"
#include "common/tunables.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/housekeeping.h"
#include "trainer/comm/agree.h"
#include "trainer/data/loader.h"

/* ROOT/split when it is a directory, else ROOT itself (a class folder or a .rec). */
static void _split_path(const char *root, const char *split, char *out, size_t len)
{
    struct stat st;
    if (snprintf(out, len, "%s/%s", root, split) < (int)len && stat(out, &st) == 0 && S_ISDIR(st.st_mode))
        return;
    snprintf(out, len, "%s", root);
}

/* The backend's host memory for the batch rings (pinned on a GPU). */
static void *_host_alloc(void *arg, size_t bytes)
{
    dlt_backend *be = arg;
    return be->ops->host_alloc(be, bytes);
}

static void _host_free(void *arg, void *p)
{
    dlt_backend *be = arg;
    be->ops->host_free(be, p);
}

/* How the run's loaders cut and transform images: training (train) or evaluation. */
static void _loader_config(const dlt_run *r, int train, dlt_loader_config *lc)
{
    const dlt_train_config *c = &r->cfg;
    memset(lc, 0, sizeof(*lc));
    lc->batch = c->model.batch;
    lc->out = c->model.image;
    lc->train = train;
    lc->no_augment = !c->augment;
    lc->seed = c->seed;
    lc->rank = r->comm->rank;
    lc->world = r->comm->size;
    lc->workers = c->workers;
    lc->strict = c->strict;
    lc->max_bad_share = c->max_bad_share;
    /* Several ranks training: a bad file's report waits for the exchange, which has one rank say
     * it, once per run (dlt_run_share_bad_images). */
    lc->defer_reports = train && r->comm->size > 1;
    lc->verbose = c->log_level >= DLT_LOG_VERBOSE;
    lc->alloc = _host_alloc;
    lc->release = _host_free;
    lc->alloc_arg = r->be;
}

/* What the data set left out of its folder (labels-file lines naming no file, images without a
 * line, nested folders, non-JPEG images, dangling links) is said once; --strict refuses it. */
static int _left_out(dlt_run *r, dlt_source *src, const char *path)
{
    char what[2048];
    int64_t refused = dlt_dataset_describe_left_out(src->ds, what, sizeof(what));
    if (!what[0])
        return 0;
    if (r->cfg.strict && refused > 0)
        return dlt_fail(r->err, -EINVAL,
                        "%s: left out: %s (--strict refuses a data set that leaves images out: fix the data, or "
                        "run without --strict to train on the rest)",
                        path, what);
    if (r->comm->rank == 0)
        dlt_log_warn(&r->log, "%s: left out: %s", path, what);
    return 0;
}

/* What each rank tells the others of its data set (zeroed first: compared as bytes). */
typedef struct {
    int32_t has; /* a data set at all */
    int32_t classes;
    int64_t images;
    uint64_t class_digest, file_digest;
} data_record;

/* Before the first step every rank must see the same data set (ds; NULL: none here): a rank with
 * other images would run other steps and the collectives would deadlock. One agreement on each
 * rank's counts and digests; a difference is refused on every rank with the same words, naming
 * the ranks that differ and how, and the run ends on that shared decision (no abort). */
static int _agree_data(dlt_run *r, const dlt_dataset *ds, const char *what)
{
    dlt_agreement a = dlt_agreement_of_comm(r->comm);
    dlt_agree_values v;
    data_record mine;
    const data_record *ref;
    char msg[1536];
    size_t o = 0;
    int rc;
    if (r->comm->size < 2)
        return 0;
    memset(&mine, 0, sizeof(mine));
    if (ds) {
        mine.has = 1;
        mine.images = dlt_dataset_count(ds);
        mine.classes = dlt_dataset_classes(ds);
        dlt_dataset_digest(ds, &mine.file_digest, &mine.class_digest);
    }
    if ((rc = dlt_agree_same(&a, &mine, sizeof(mine), &v, r->err)) != 0)
        return rc;
    if (v.same) {
        dlt_agree_values_free(&v);
        return 0;
    }
    ref = dlt_agree_record(&v, v.reference);
    o = (size_t)snprintf(msg, sizeof(msg), "the ranks do not see the same %s:", what);
    for (int g = 0, said = 0; g < v.size && o < sizeof(msg); g++) {
        const data_record *d = dlt_agree_record(&v, g);
        char ranks[128];
        int n;
        if (!dlt_agree_group_leader(&v, g))
            continue;
        n = dlt_agree_group_size(&v, g);
        dlt_agree_group_ranks(&v, g, ranks, sizeof(ranks));
        if (!d->has)
            o += (size_t)snprintf(msg + o, sizeof(msg) - o, "%s rank%s %s %s none", said++ ? ";" : "", n > 1 ? "s" : "",
                                  ranks, n > 1 ? "have" : "has");
        else
            o += (size_t)snprintf(msg + o, sizeof(msg) - o, "%s rank%s %s %s %lld images in %d classes",
                                  said++ ? ";" : "", n > 1 ? "s" : "", ranks, n > 1 ? "see" : "sees",
                                  (long long)d->images, (int)d->classes);
        if (g != v.reference && d->has && ref->has && o < sizeof(msg))
            o += (size_t)snprintf(
                msg + o, sizeof(msg) - o, " (%s%s%s)",
                d->classes != ref->classes || d->class_digest != ref->class_digest ? "the class names differ"
                                                                                   : "the same classes",
                ", ",
                d->images != ref->images || d->file_digest != ref->file_digest ? "the file list differs"
                                                                               : "the same files");
    }
    dlt_agree_values_free(&v);
    /* every rank refuses alike */
    return dlt_fail_agreed(r->err, -EINVAL, "%s: give every rank the same data", msg);
}

/* The first class where two class lists (one name a line) differ, in words. */
static void _first_difference(const char *a, const char *b, char *out, size_t len)
{
    int c = 0;
    size_t na, nb;
    for (;; c++) {
        na = strcspn(a, "\n");
        nb = strcspn(b, "\n");
        if (na != nb || strncmp(a, b, na) || !a[na] || !b[nb])
            break;
        a += na + 1;
        b += nb + 1;
    }
    if (!*a || !*b) {
        int more_a = 0, more_b = 0;
        for (const char *p = a; *p; p++)
            more_a += *p == '\n';
        for (const char *p = b; *p; p++)
            more_b += *p == '\n';
        snprintf(out, len, "%d classes here, %d in the checkpoint", c + (*a ? more_a + 1 : 0),
                 c + (*b ? more_b + 1 : 0));
        return;
    }
    snprintf(out, len, "class %d is '%.*s' here, '%.*s' in the checkpoint", c, (int)(na < 80 ? na : 80), a,
             (int)(nb < 80 ? nb : 80), b);
}

/* Maps an evaluation data set's classes by name onto the run's class list (the training data's, or
 * the checkpoint's); without a list the classes keep their own numbering, said once. */
static int _map_validation(dlt_run *r, dlt_source *src, const char *path)
{
    char note[512];
    int rc;
    if (!r->classes) {
        if (r->comm->rank == 0)
            dlt_log_warn(&r->log,
                         "%s: %s, so the validation classes are numbered in their own sorted order (right "
                         "only when they are exactly the training classes)",
                         path,
                         r->cfg.eval_checkpoint
                             ? "the checkpoint records no class names (a torchvision export, or a checkpoint of an "
                               "older dltrain)"
                             : "the training data has no class names (RecordIO without a .classes file)");
        return 0; /* the class counts must then agree (the callers check) */
    }
    if ((rc = dlt_dataset_map_classes(src->ds, r->classes, note, sizeof(note), r->err)) != 0)
        return rc;
    if (note[0] && r->comm->rank == 0)
        dlt_log_warn(&r->log, "%s: %s", path, note);
    return 0;
}

static int _check_images(dlt_run *r, int train, const char *path);

/* Images at path into src: a RecordIO file is opened by each rank (its index is one file); a folder
 * is listed once for the whole job (shared_scan.h). */
static int _open_source(dlt_run *r, dlt_source *src, const char *path, const char *labels, const dlt_loader_config *lc)
{
    dlt_shared_scan_info info;
    dlt_dataset *ds = NULL;
    int rc;
    if (dlt_recordio_path(path)) {
        /* each rank opens the file itself: whether any rank failed, and the first one's words, are
         * agreed on before the data agreement that follows (a rank that failed would not reach it) */
        return dlt_run_agree_first_failure(r, dlt_source_open_images(src, path, labels, lc, r->err));
    }
    if ((rc = dlt_shared_scan_open(r->comm, path, labels, &ds, &info, r->err)) != 0)
        return rc; /* an agreed failure (every rank has the same words: rank 0 says them for all) or a lost peer */
    if (r->comm->rank == 0 && info.index_note[0])
        dlt_log_warn(&r->log,
                     "%s: its index %s is not used (%s): listing the folder instead (`dltrain data index %s` "
                     "remakes it)",
                     path, DLT_FOLDER_INDEX_NAME, info.index_note, path);
    if (r->comm->rank == 0 && info.from_index)
        dlt_log(&r->log, DLT_LOG_INFO, "%s: read from its index %s (it matches the folder): not listed", path,
                DLT_FOLDER_INDEX_NAME);
    if (r->comm->size > 1 && r->comm->rank == 0)
        dlt_log(&r->log, DLT_LOG_INFO, "%s: %s once for all %d ranks in %.2f s (a %.1f MB list sent to the others)",
                path, info.from_index ? "read" : "listed", r->comm->size, info.scan_seconds,
                (double)info.list_bytes / 1e6);
    return dlt_source_open_dataset(src, ds, path, lc, r->err);
}

/* Real images for training (train) or evaluation; fixes the class count from the data unless
 * --classes was given. */
static int _open_images(dlt_run *r, int train)
{
    dlt_train_config *c = &r->cfg;
    char path[4096];
    dlt_loader_config lc;
    int rc;
    if (train || !c->val_data)
        _split_path(c->data, train ? "train" : "val", path, sizeof(path));
    else
        snprintf(path, sizeof(path), "%s", c->val_data);
    _loader_config(r, train, &lc);
    if ((rc = _open_source(r, &r->src, path, train ? NULL : c->val_labels, &lc)) != 0 ||
        (rc = _agree_data(r, r->src.ds, train ? "training data" : "validation data")) != 0)
        return rc;
    /* The ranks see the same data: what follows decides alike on every rank. */
    if ((rc = _check_images(r, train, path)) != 0 && r->comm->size > 1)
        dlt_err_agree(r->err, rc);
    return rc;
}

static int _check_images(dlt_run *r, int train, const char *path)
{
    dlt_train_config *c = &r->cfg;
    int rc, classes;
    if ((rc = _left_out(r, &r->src, path)) != 0)
        return rc;
    classes = dlt_source_classes(&r->src);
    /* A classifier of one class has nothing to learn; say it in the data's terms, not the model's. */
    if (train && classes < 2)
        return dlt_fail(
            r->err, -EINVAL,
            "%s has %d class%s%s%s: training a classifier needs at least 2 (one folder per class, or "
            "labels of at least two values)",
            path, classes, classes == 1 ? "" : "es", classes == 1 && dlt_dataset_class_name(r->src.ds, 0) ? ", " : "",
            classes == 1 && dlt_dataset_class_name(r->src.ds, 0) ? dlt_dataset_class_name(r->src.ds, 0) : "");
    if (train) {
        /* The classes the model's outputs will mean: the training data's names; a resumed run must
         * have the checkpoint's. */
        r->classes = dlt_dataset_class_list(r->src.ds);
        if (r->classes && r->ck_classes && strcmp(r->classes, r->ck_classes)) {
            char diff[256];
            _first_difference(r->classes, r->ck_classes, diff, sizeof(diff));
            return dlt_fail(r->err, -EINVAL,
                            "%s does not have the classes of the checkpoint %s (%s): resume on the data it was "
                            "trained on",
                            path, c->resume, diff);
        }
        if (!r->classes && r->ck_classes && !(r->classes = strdup(r->ck_classes)))
            return -ENOMEM;
    } else {
        if (r->ck_classes && !(r->classes = strdup(r->ck_classes)))
            return -ENOMEM;
        if ((rc = _map_validation(r, &r->src, path)) != 0)
            return rc;
        classes = dlt_source_classes(&r->src);
    }
    if (!c->classes_given)
        c->model.classes = classes;
    else if (c->model.classes != classes)
        return dlt_fail(r->err, -EINVAL, "%s has %d %s but the model has %d (--classes%s)", path, classes,
                        classes == 1 ? "class" : "classes", c->model.classes,
                        c->eval_checkpoint ? " or the checkpoint" : "");
    dlt_log(&r->log, DLT_LOG_INFO, "%s: %lld images, %d %s, %lld %s per rank per epoch", path,
            (long long)dlt_source_images(&r->src), classes, classes == 1 ? "class" : "classes",
            (long long)dlt_source_steps_per_epoch(&r->src),
            dlt_source_steps_per_epoch(&r->src) == 1 ? "batch" : "batches");
    return 0;
}

/* Generated images: training draws with the run's seed; evaluation other images (another seed)
 * of the same classes; the benchmark noise, one batch per rank. */
static int _open_synthetic(dlt_run *r, dlt_run_purpose purpose)
{
    const dlt_train_config *c = &r->cfg;
    uint64_t seed = purpose == DLT_RUN_EVAL ? c->seed ^ 0x5eed5eedull : c->seed;
    int64_t size = purpose == DLT_RUN_TRAIN  ? c->synthetic_size
                   : purpose == DLT_RUN_EVAL ? c->eval_size
                                             : (int64_t)c->model.batch * r->comm->size;
    int learnable = purpose == DLT_RUN_BENCH ? 0 : c->learnable;
    int rc = dlt_source_open_synthetic(&r->src, c->model.batch, c->model.image, c->model.classes, size, seed, c->seed,
                                       learnable, r->comm->rank, r->comm->size, purpose == DLT_RUN_EVAL, r->err);
    if (rc == 0)
        dlt_source_set_allocator(&r->src, _host_alloc, _host_free, r->be);
    return rc;
}

static double _unix_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

double dlt_run_train_seconds(const dlt_run *r)
{
    return r->prior_train_s + (r->log.t_start > 0 ? dlt_now() - r->log.t_start : 0.0);
}

double dlt_run_wall_seconds(const dlt_run *r)
{
    /* The first start was stamped by the clock of the node that ran it, maybe another one, which
     * may be ahead of this node's: the wall time is never less than the training time, which each
     * incarnation measured on its own monotonic clock. */
    double wall = _unix_now() - r->first_start, train = dlt_run_train_seconds(r);
    return wall > train ? wall : train;
}

/* The run's own parts, each rank alone (no collective): the log, rank 0's claims on its folders,
 * the backend. */
static int _open_parts(dlt_run *r, const dlt_train_config *c, dlt_comm *comm, dlt_run_purpose purpose, dlt_err *err)
{
    int rc;
    memset(r, 0, sizeof(*r));
    r->cfg = *c;
    r->comm = comm;
    r->err = err;
    c = &r->cfg;
    dlt_run_claims_init(&r->claims);
    r->first_start = _unix_now(); /* until a checkpoint says when the run first started */
    r->line = 1;                  /* until dlt_run_resume chooses the line */
    r->parent_line = r->parent_step = -1;
    r->saved_step = -1;
    /* One run per output path: two would overwrite each other's checkpoints (and a later --resume
     * auto would continue whichever saved last), merge their TensorBoard curves, interleave their
     * metrics. Taken before the log opens, so a requeue waits for its previous run first. */
    if (purpose == DLT_RUN_TRAIN && comm->rank == 0) {
        if (c->claims && c->claims->taken) {
            r->claims = *c->claims;
            dlt_run_claims_init(c->claims); /* the run's now: released at its close */
        } else if ((rc = dlt_run_claims_take(&r->claims, c->metrics_path, c->checkpoint_dir, c->tensorboard_dir,
                                             DLT_REQUEUE_LOCK_WAIT_S, err)) != 0)
            return rc;
    }
    if ((rc = dlt_run_log_open(&r->log, comm->rank, comm->size, c->model.batch, c->log_level,
                               purpose == DLT_RUN_TRAIN ? c->metrics_path : NULL, err)) != 0)
        return rc;
    if (purpose == DLT_RUN_TRAIN && (rc = dlt_run_log_open_tensorboard(&r->log, c->tensorboard_dir, err)) != 0)
        return rc;
    if (purpose == DLT_RUN_TRAIN && comm->rank == 0 && c->checkpoint_dir) {
        /* Ours now: a temporary file there is a save of an earlier run that never finished. */
        {
            char said[512];
            int n = 0;
            if ((rc = dlt_checkpoint_remove_unfinished(c->checkpoint_dir, &n, said, sizeof(said), err)) != 0)
                return dlt_fail_prefix(err, rc, "--checkpoint-dir %s", c->checkpoint_dir);
            if (n > 0)
                dlt_log(&r->log, DLT_LOG_QUIET,
                        "removed %d unfinished checkpoint file(s) in %s left by a save that "
                        "did not finish (a killed run): %s",
                        n, c->checkpoint_dir, said);
        }
    }
    /* The backend first: the data loader's batch ring lives in its host memory. */
    r->cfg.backend.progress = comm->rank == 0 && c->log_level >= DLT_LOG_INFO;
    if ((rc = dlt_backend_create(&r->be, &c->backend, err)) != 0)
        return rc;
    r->be->peers = &comm->peers; /* a lost peer ends the backend's waits too */
    if (c->backend_hook)
        c->backend_hook(r->be, c->backend_hook_arg);
    if ((c->data || c->val_data) && (purpose == DLT_RUN_EVAL    ? c->eval_checkpoint
                                     : purpose == DLT_RUN_TRAIN ? c->resume
                                                                : NULL)) {
        const char *ck = purpose == DLT_RUN_EVAL ? c->eval_checkpoint : c->resume;
        dlt_checkpoint_class_names(ck, &r->ck_classes);
        /* (eval says it where it matches the validation classes) */
        if (!r->ck_classes && purpose == DLT_RUN_TRAIN && comm->rank == 0)
            dlt_log_warn(&r->log,
                         "%s records no class names (written by an older dltrain): the classes are taken "
                         "in the data's sorted order, as before",
                         ck);
    }
    return 0;
}

/* The images: listed once for the job, agreed on (collectives every rank takes part in); they fix
 * the class count the model is made with. */
static int _open_data(dlt_run *r, dlt_run_purpose purpose)
{
    const dlt_train_config *c = &r->cfg;
    /* Evaluation of --val-data alone: those images, not generated ones. */
    if (c->data || (purpose == DLT_RUN_EVAL && c->val_data))
        return _open_images(r, purpose != DLT_RUN_EVAL);
    return _open_synthetic(r, purpose);
}

/* The network, the gradient reducer and what the step needs, each rank alone. */
static int _open_model(dlt_run *r, dlt_run_purpose purpose)
{
    const dlt_train_config *c = &r->cfg;
    dlt_comm *comm = r->comm;
    dlt_err *err = r->err;
    int rc;
    if (purpose == DLT_RUN_INPUT)
        return 0;
    if ((rc = dlt_net_create(&r->net, &c->model, r->be, err)) != 0)
        return rc;
    if (r->net.fuse && comm->rank == 0) { /* --fuse-bn: what the planning made of it, once */
        int convs = 0;
        for (int i = 0; i < r->net.model.nlayers; i++)
            convs += r->net.model.layers[i].kind == DLT_LAYER_CONV;
        fprintf(stderr,
                "dltrain: convolution + batch-norm chain (--fuse-bn on): %d of %d convolutions write their batch "
                "norm's statistics, %d batch norms never stored (applied by the next convolution), %d applied by "
                "their residual join (training steps; inference runs each op on its own)\n",
                r->net.fused_convs, convs, r->net.virtual_bns, r->net.folded_bns);
    }
    if ((rc = dlt_grad_reducer_create(&r->reducer, &c->reduce, comm, r->be, r->net.grads, r->net.model.nparams, err)) !=
        0)
        return rc;
    if (c->cuda_graphs && !r->be->graphs)
        return dlt_fail(err, -ENOTSUP, "--cuda-graphs needs the CUDA backend (this run uses %s)", r->be->ops->name);
    /* A recorded step cannot wait for its stream: the reducer says whether it waits (the host path
     * copies the gradients through host memory); graphs need NCCL between ranks. */
    if (c->cuda_graphs && !dlt_grad_reducer_capturable(r->reducer))
        return dlt_fail(err, -ENOTSUP,
                        "--cuda-graphs with %d ranks needs NCCL between them (--comm nccl; "
                        "this run reduces through %s, which a recorded step cannot wait for)",
                        comm->size, comm->ops->name);
    if (c->backend.precision == DLT_PREC_FP16)
        dlt_loss_scaler_init(&r->scaler, 1, c->loss_scale > 0 ? c->loss_scale : 0, c->loss_scale_window);
    else
        dlt_loss_scaler_init(&r->scaler, 0, 1, 0);
    if (!(r->no_labels = calloc((size_t)c->model.batch, sizeof(int32_t))))
        return dlt_fail(err, -ENOMEM, "out of memory for the input batch");
    r->labels = r->no_labels;
    return 0;
}

int dlt_run_agree_on_failure(dlt_run *r, int rc)
{
    dlt_agreement a;
    dlt_agree_verdict v;
    if (rc != 0)
        dlt_run_fail(r, rc);
    if (r->comm->size < 2)
        return rc;
    a = dlt_agreement_of_comm(r->comm);
    if (dlt_agree_verdict_of(&a, rc, r->err->msg, &v, r->err) != 0)
        return rc ? rc : -EIO; /* the communicator's error is in err: dlt_run_close ends every rank */
    if (v.f.failed == 0)
        return 0;
    dlt_err_agree(r->err, 0);
    if (v.all_alike) {
        if (r->comm->rank != 0)
            r->err->msg[0] = 0; /* rank 0 says it for all */
        return rc;
    }
    if (v.say_own)
        return rc; /* the error holds one message: a failing rank 0 says its own, not the others' */
    if (v.name_ranks)
        return dlt_fail_agreed(r->err, -ECANCELED,
                               "%d of %d ranks could not start the run (rank%s %s; their messages "
                               "say why): every rank stops",
                               v.f.failed, r->comm->size, v.f.failed == 1 ? "" : "s", v.f.ranks);
    return dlt_fail_agreed(r->err, -ECANCELED, "%s", "");
}

int dlt_run_agree_first_failure(dlt_run *r, int rc)
{
    dlt_agreement a;
    char node[64];
    if (r->comm->size < 2)
        return rc;
    a = dlt_agreement_of_comm(r->comm);
    dlt_node_name(node, sizeof(node));
    return dlt_agree_first_failure(&a, rc, node, r->err);
}

int dlt_run_open(dlt_run *r, const dlt_train_config *c, dlt_comm *comm, dlt_run_purpose purpose, dlt_err *err)
{
    /* Each stretch that a rank runs alone ends in an agreement on its failures, so that a rank that
     * failed never misses the collectives of the next one. */
    int rc = dlt_run_agree_on_failure(r, _open_parts(r, c, comm, purpose, err));
    if (rc == 0)
        rc = dlt_run_agree_on_failure(r, _open_data(r, purpose));
    if (rc == 0)
        rc = dlt_run_agree_on_failure(r, _open_model(r, purpose));
    return rc;
}

int dlt_run_fail(dlt_run *r, int rc)
{
    return dlt_fail_prefix(r->err, rc, NULL);
}

void dlt_run_close(dlt_run *r, int failed)
{
    if (failed)
        dlt_run_fail(r, -EIO); /* kept unless a failure already was */
    /* One rank failing alone leaves the others in a collective, waiting for it: end them now, with
     * this rank's cause said first. A failed GPU run may also have NCCL kernels waiting on a lost
     * peer, and freeing device memory would wait for them forever. abort() ends the process. */
    if (failed && r->comm &&
        ((r->comm->size > 1 && !r->err->agreed) || (r->comm->ops->nccl && r->be && !r->be->host_memory))) {
        dlt_rank_say(r->comm->rank, "%s", r->err->msg);
        if (r->comm->size > 1)
            dlt_rank_say(r->comm->rank, "ending every rank of the run");
        fflush(NULL);
        /* The recorded step first: its NCCL work holds the communicator, and the abort would wait
         * for the graph forever (dlt_graph_ops.release). */
        if (r->be && r->be->graphs)
            r->be->graphs->release(r->be);
        r->comm->ops->abort(r->comm, 1);
    }
    if (failed && r->src.loader && !r->cfg.strict)
        dlt_loader_bad_report_all(r->src.loader); /* what was never exchanged is still said */
    dlt_source_close(&r->src);
    dlt_run_claims_release(&r->claims);
    dlt_grad_reducer_destroy(r->reducer);
    if (r->net.params)
        dlt_net_destroy(&r->net);
    if (r->be)
        r->be->ops->destroy(r->be);
    free(r->no_labels);
    free(r->classes);
    free(r->ck_classes);
    dlt_run_log_close(&r->log);
}

/* Rounds of at most this many indices per rank. */
#define BAD_SHARE_MAX 64

/* One rank's part of a round: the bad files it found since the last round. */
typedef struct {
    int32_t n, more; /* how many below; whether it holds more for another round */
    int64_t idx[BAD_SHARE_MAX];
} bad_round;

int64_t dlt_run_share_bad_images(dlt_run *r)
{
    dlt_loader *l = r->src.loader;
    dlt_agreement a;
    int world = r->comm->size;
    if (!l)
        return 0;
    if (world < 2)
        return dlt_loader_bad_files(l);
    a = dlt_agreement_of_comm(r->comm);
    /* Rounds until nobody holds more; every rank reads the same gathered rounds. */
    for (int round = 0; round < 1 << 20; round++) {
        bad_round mine, *all;
        int64_t got[BAD_SHARE_MAX];
        int m = 0, more = 0;
        memset(&mine, 0, sizeof(mine));
        mine.n = dlt_loader_bad_take(l, mine.idx, BAD_SHARE_MAX);
        mine.more = mine.n == BAD_SHARE_MAX;
        if (dlt_agree_gather(&a, &mine, sizeof(mine), (void **)&all, r->err) != 0)
            break; /* the error is in the run's buffer; the next collective of the step reports it */
        for (int k = 0; k < world; k++) {
            more |= all[k].more;
            for (int i = 0; i < all[k].n && i < BAD_SHARE_MAX; i++) {
                int first = 1;
                /* The lowest rank that found a file says it; the others only learn it. */
                for (int q = 0; q <= k && first; q++)
                    for (int p = 0; p < (q < k ? all[q].n : i) && first; p++)
                        first = all[q].idx[p] != all[k].idx[i];
                if (first && k == r->comm->rank)
                    dlt_loader_bad_report(l, all[k].idx[i]);
                got[m++] = all[k].idx[i];
                if (m == BAD_SHARE_MAX) {
                    dlt_loader_bad_merge(l, got, m);
                    m = 0;
                }
            }
        }
        dlt_loader_bad_merge(l, got, m);
        free(all);
        if (!more)
            break;
    }
    return dlt_loader_bad_files(l);
}

int dlt_run_open_validation(dlt_run *r, dlt_source *val)
{
    dlt_train_config *c = &r->cfg;
    char path[4096];
    dlt_loader_config lc;
    struct stat st;
    int rc;
    memset(val, 0, sizeof(*val));
    if (!c->data) { /* generated validation images: other images of the same classes */
        rc = dlt_source_open_synthetic(val, c->model.batch, c->model.image, c->model.classes, c->eval_size,
                                       c->seed ^ 0x5eed5eedull, c->seed, c->learnable, r->comm->rank, r->comm->size, 1,
                                       r->err);
        if (rc == 0)
            dlt_source_set_allocator(val, _host_alloc, _host_free, r->be);
        return rc ? rc : 1;
    }
    if (c->val_data) {
        snprintf(path, sizeof(path), "%s", c->val_data);
    } else {
        /* ROOT/val where it exists. Every rank must find it or none (the evaluations' collectives
         * would wait for a rank without): ask first, so that all ranks take the same path below. */
        dlt_agreement a = dlt_agreement_of_comm(r->comm);
        int here = snprintf(path, sizeof(path), "%s/val", c->data) < (int)sizeof(path) && stat(path, &st) == 0 &&
                   S_ISDIR(st.st_mode),
            everywhere;
        if ((rc = dlt_agree_count(&a, here, &everywhere, r->err)) != 0)
            return rc;
        if (!here || everywhere != r->comm->size) {
            if (!here || everywhere == 0)
                return (rc = _agree_data(r, NULL, "validation data")) != 0 ? rc : 0;
            /* Here but not on every rank: this rank's own listing, for the refusal that follows. */
            _loader_config(r, 0, &lc);
            if ((rc = dlt_source_open_images(val, path, c->val_labels, &lc, r->err)) != 0)
                return dlt_fail_prefix(r->err, rc, "validation images");
            return (rc = _agree_data(r, val->ds, "validation data")) != 0 ? rc : -EIO;
        }
    }
    _loader_config(r, 0, &lc);
    if ((rc = _open_source(r, val, path, c->val_labels, &lc)) != 0)
        return dlt_fail_prefix(r->err, rc, "validation images");
    if ((rc = _agree_data(r, val->ds, "validation data")) != 0)
        return rc;
    /* The ranks see the same data: the checks below decide alike on every rank. */
    if ((rc = _left_out(r, val, path)) != 0 || (rc = _map_validation(r, val, path)) != 0 ||
        (dlt_source_classes(val) != c->model.classes &&
         (rc = dlt_fail(r->err, -EINVAL, "%s has %d classes but the training images %d", path, dlt_source_classes(val),
                        c->model.classes)) != 0)) {
        if (r->comm->size > 1)
            dlt_err_agree(r->err, rc);
        return rc;
    }
    if ((rc = dlt_source_start(val, 0, 0, r->err)) != 0)
        return rc;
    dlt_log(&r->log, DLT_LOG_INFO, "validation: %s: %lld images", path, (long long)dlt_source_images(val));
    return 1;
}
