/* run: the parts of a run and the steps training, evaluation and the benchmark share. */
#include "config.h"

#include "trainer/train/run.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "trainer/common/status.h"

/* ImageNet channel statistics (0..255 scale), as torchvision's Normalize. */
static const float g_mean[3] = {123.675f, 116.28f, 103.53f};
static const float g_inv_std[3] = {1.f / 58.395f, 1.f / 57.12f, 1.f / 57.375f};

/* ROOT/split when it is a directory, else ROOT itself (a class folder or a .rec). */
static void _split_path(const char *root, const char *split, char *out, size_t len)
{
    struct stat st;
    if (snprintf(out, len, "%s/%s", root, split) < (int)len && stat(out, &st) == 0 && S_ISDIR(st.st_mode))
        return;
    snprintf(out, len, "%s", root);
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
    /* Several ranks training: a bad file's report waits for the exchange, which has one rank say
     * it, once per run (dlt_run_share_bad_images). */
    lc->defer_reports = train && r->comm->size > 1;
}

/* Real images for training (train) or evaluation; fixes the class count from the data unless
 * --classes was given. */
static int _open_images(dlt_run *r, int train)
{
    dlt_train_config *c = &r->cfg;
    char path[4096];
    dlt_loader_config lc;
    int rc, classes;
    if (train || !c->val_data)
        _split_path(c->data, train ? "train" : "val", path, sizeof(path));
    else
        snprintf(path, sizeof(path), "%s", c->val_data);
    _loader_config(r, train, &lc);
    if ((rc = dlt_source_open_images(&r->src, path, train ? NULL : c->val_labels, &lc, r->err, r->errlen)) != 0)
        return rc;
    classes = dlt_source_classes(&r->src);
    if (!c->classes_given)
        c->model.classes = classes;
    else if (c->model.classes != classes)
        return dlt_fail(r->err, r->errlen, -EINVAL, "%s has %d classes but --classes %d was given", path, classes,
                        c->model.classes);
    dlt_log(&r->log, DLT_LOG_INFO, "%s: %lld images, %d classes, %lld batches per rank per epoch", path,
            (long long)dlt_source_images(&r->src), classes, (long long)dlt_source_steps_per_epoch(&r->src));
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
    return dlt_source_open_synthetic(&r->src, c->model.batch, c->model.image, c->model.classes, size, seed, c->seed,
                                     learnable, r->comm->rank, r->comm->size, purpose == DLT_RUN_EVAL, r->err,
                                     r->errlen);
}

int dlt_run_open(dlt_run *r, const dlt_train_config *c, dlt_comm *comm, dlt_run_purpose purpose, char *err,
                 size_t errlen)
{
    size_t img = (size_t)c->model.image * c->model.image * 3;
    int rc;
    memset(r, 0, sizeof(*r));
    r->cfg = *c;
    r->comm = comm;
    r->err = err;
    r->errlen = errlen;
    c = &r->cfg;
    if ((rc = dlt_run_log_open(&r->log, comm->rank, comm->size, c->model.batch, c->log_level,
                               purpose == DLT_RUN_TRAIN ? c->metrics_path : NULL, err, errlen)) != 0)
        return rc;
    if (c->data && (rc = _open_images(r, purpose != DLT_RUN_EVAL)) != 0)
        return rc;
    if ((rc = dlt_backend_create(&r->be, &c->backend, err, errlen)) != 0 ||
        (rc = dlt_net_create(&r->net, &c->model, r->be, err, errlen)) != 0)
        return rc;
    if (!c->data && (rc = _open_synthetic(r, purpose)) != 0)
        return rc;
    if ((rc = dlt_grad_reducer_create(&r->reducer, &c->reduce, comm, r->be, r->net.grads, r->net.model.nparams, err,
                                      errlen)) != 0)
        return rc;
    if (c->cuda_graphs && !r->be->graphs)
        return dlt_fail(err, errlen, -ENOTSUP, "--cuda-graphs needs the CUDA backend (this run uses %s)",
                        r->be->ops->name);
    if (c->backend.precision == DLT_PREC_FP16)
        dlt_loss_scaler_init(&r->scaler, 1, c->loss_scale > 0 ? c->loss_scale : 0, c->loss_scale_window);
    else
        dlt_loss_scaler_init(&r->scaler, 0, 1, 0);
    r->images = malloc(img * (size_t)c->model.batch);
    r->labels = malloc(sizeof(int32_t) * (size_t)c->model.batch);
    if (!r->images || !r->labels)
        return dlt_fail(err, errlen, -ENOMEM, "out of memory for the input batch");
    return 0;
}

void dlt_run_close(dlt_run *r, int failed)
{
    /* One rank failing alone leaves the others in a collective, waiting for it: end them now, with
     * this rank's cause said first. A failed GPU run may also have NCCL kernels waiting on a lost
     * peer, and freeing device memory would wait for them forever. abort() ends the process. */
    if (failed && r->comm &&
        ((r->comm->size > 1 && !r->agreed) || (r->comm->ops->nccl && r->be && !r->be->host_memory))) {
        fprintf(stderr, "dltrain: rank %d: %s\n", r->comm->rank, r->err);
        if (r->comm->size > 1)
            fprintf(stderr, "dltrain: rank %d: ending every rank of the run\n", r->comm->rank);
        fflush(NULL);
        r->comm->ops->abort(r->comm, 1);
    }
    if (failed && r->src.loader && !r->cfg.strict)
        dlt_loader_bad_report_all(r->src.loader); /* what was never exchanged is still said */
    dlt_source_close(&r->src);
    dlt_grad_reducer_destroy(r->reducer);
    if (r->net.params)
        dlt_net_destroy(&r->net);
    if (r->be)
        r->be->ops->destroy(r->be);
    free(r->images);
    free(r->labels);
    dlt_run_log_close(&r->log);
}

/* Rounds of at most this many indices per rank. */
#define BAD_SHARE_MAX 64

int64_t dlt_run_share_bad_images(dlt_run *r)
{
    dlt_loader *l = r->src.loader;
    int world = r->comm->size;
    double *all;
    if (!l)
        return 0;
    if (world < 2)
        return dlt_loader_bad_files(l);
    all = malloc(((size_t)world * BAD_SHARE_MAX + 1) * sizeof(double));
    if (!all)
        return dlt_loader_bad_files(l);
    /* Each rank fills its own slots with index + 1 (exact in a double) and the last slot with how
     * many it still holds; one sum gives every rank everyone's. Rounds until nobody holds more. */
    for (int round = 0; round < 1 << 20; round++) {
        int64_t idx[BAD_SHARE_MAX], got[BAD_SHARE_MAX];
        int n = dlt_loader_bad_take(l, idx, BAD_SHARE_MAX), m = 0;
        double more;
        memset(all, 0, ((size_t)world * BAD_SHARE_MAX + 1) * sizeof(double));
        for (int i = 0; i < n; i++)
            all[(size_t)r->comm->rank * BAD_SHARE_MAX + i] = (double)(idx[i] + 1);
        all[(size_t)world * BAD_SHARE_MAX] = n == BAD_SHARE_MAX ? 1 : 0;
        if (r->comm->ops->allreduce_sum(r->comm, all, (size_t)world * BAD_SHARE_MAX + 1, DLT_DTYPE_F64) != 0)
            break; /* the error is in the run's buffer; the next collective of the step reports it */
        for (size_t i = 0; i < (size_t)world * BAD_SHARE_MAX; i++)
            if (all[i] > 0) {
                int first = 1;
                /* The lowest rank that found a file says it; the others only learn it. */
                for (size_t k = 0; k < i && first; k++)
                    first = all[k] != all[i];
                if (first && i / BAD_SHARE_MAX == (size_t)r->comm->rank)
                    dlt_loader_bad_report(l, (int64_t)all[i] - 1);
                got[m++] = (int64_t)all[i] - 1;
                if (m == BAD_SHARE_MAX) {
                    dlt_loader_bad_merge(l, got, m);
                    m = 0;
                }
            }
        dlt_loader_bad_merge(l, got, m);
        more = all[(size_t)world * BAD_SHARE_MAX];
        if (more == 0)
            break;
    }
    free(all);
    return dlt_loader_bad_files(l);
}

int dlt_run_normalize(dlt_run *r)
{
    const dlt_train_config *c = &r->cfg;
    size_t pixels = (size_t)c->model.batch * c->model.image * c->model.image;
    return r->be->ops->normalize_input(r->be, r->images, dlt_net_input(&r->net), pixels, g_mean, g_inv_std);
}

int dlt_run_load_batch(dlt_run *r, int64_t epoch, int64_t step)
{
    int rc;
    if ((rc = dlt_source_next(&r->src, epoch, step, r->images, r->labels, r->err, r->errlen)) != 0)
        return rc;
    return dlt_run_normalize(r);
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
                                       r->err, r->errlen);
        return rc ? rc : 1;
    }
    if (c->val_data)
        snprintf(path, sizeof(path), "%s", c->val_data);
    else if (snprintf(path, sizeof(path), "%s/val", c->data) >= (int)sizeof(path) || stat(path, &st) != 0 ||
             !S_ISDIR(st.st_mode))
        return 0; /* no validation images */
    _loader_config(r, 0, &lc);
    if ((rc = dlt_source_open_images(val, path, c->val_labels, &lc, r->err, r->errlen)) != 0)
        return dlt_fail_prefix(r->err, r->errlen, rc, "validation images");
    if (dlt_source_classes(val) != c->model.classes)
        return dlt_fail(r->err, r->errlen, -EINVAL, "%s has %d classes but the training images %d", path,
                        dlt_source_classes(val), c->model.classes);
    if ((rc = dlt_source_start(val, 0, 0, r->err, r->errlen)) != 0)
        return rc;
    dlt_log(&r->log, DLT_LOG_INFO, "validation: %s: %lld images", path, (long long)dlt_source_images(val));
    return 1;
}

int dlt_run_forward_loss(dlt_run *r, int training, int n, double *loss_sum, int *top1, int *top5)
{
    const dlt_train_config *c = &r->cfg;
    dlt_net *net = &r->net;
    double loss = 0;
    int t1 = 0, t5 = 0, rc;
    if ((rc = dlt_net_forward(net, training)) != 0)
        return dlt_fail_prefix(r->err, r->errlen, rc, "forward");
    if ((rc = r->be->ops->softmax_xent(r->be, dlt_net_logits(net), r->labels, n, c->model.classes,
                                       training ? (float)c->label_smoothing : 0.f,
                                       training ? (float)r->scaler.scale : 1.f, training ? dlt_net_dlogits(net) : NULL,
                                       &loss, &t1, &t5)) != 0)
        return dlt_fail_prefix(r->err, r->errlen, rc, "loss");
    if (loss_sum)
        *loss_sum = loss;
    if (top1)
        *top1 = t1;
    if (top5)
        *top5 = t5;
    return 0;
}

static int _forward_loss_backward(dlt_run *r, double *loss_sum, int *top1, int *top5)
{
    dlt_grad_listener listen = dlt_grad_reducer_listener(r->reducer);
    int rc;
    if ((rc = dlt_run_forward_loss(r, 1, r->cfg.model.batch, loss_sum, top1, top5)) != 0)
        return rc;
    if ((rc = dlt_net_backward(&r->net, &listen)) != 0)
        return dlt_fail_prefix(r->err, r->errlen, rc, "backward");
    return 0;
}

/* With --cuda-graphs the second step is recorded as a CUDA graph (the first ran plainly, so every
 * lazily made buffer exists) and later steps replay it; a new loss scale (a kernel argument of
 * the recording) records again. */
int dlt_run_forward_backward(dlt_run *r, double *loss_sum, int *top1, int *top5)
{
    dlt_backend *be = r->be;
    const dlt_graph_ops *g = be->graphs;
    dlt_net *n = &r->net;
    int batch = r->cfg.model.batch, rc;
    if (!r->cfg.cuda_graphs || !r->graph_warm) {
        r->graph_warm = 1;
        return _forward_loss_backward(r, loss_sum, top1, top5);
    }
    if (r->graph_ready && r->graph_scale == r->scaler.scale) {
        if ((rc = g->replay(be, r->labels, batch)) != 0 || (rc = g->loss_results(be, loss_sum, top1, top5)) != 0)
            return dlt_fail_prefix(r->err, r->errlen, rc, "CUDA graph replay");
        for (int i = 0; i < n->model.nbn; i++)
            n->bn_batches[i]++; /* the host side of a BN forward, which a replay does not run */
        return 0;
    }
    r->graph_ready = 0;
    if ((rc = g->capture_begin(be)) != 0)
        return dlt_fail_prefix(r->err, r->errlen, rc, "CUDA graph capture");
    if ((rc = _forward_loss_backward(r, loss_sum, top1, top5)) != 0) {
        char keep[1024];
        snprintf(keep, sizeof(keep), "%s", r->err);
        g->capture_end(be); /* leave the stream usable; the error above says what failed */
        snprintf(r->err, r->errlen, "%s", keep);
        return rc;
    }
    if ((rc = g->capture_end(be)) != 0 || (rc = g->replay(be, r->labels, batch)) != 0 ||
        (rc = g->loss_results(be, loss_sum, top1, top5)) != 0)
        return dlt_fail_prefix(r->err, r->errlen, rc, "CUDA graph");
    r->graph_ready = 1;
    r->graph_scale = r->scaler.scale;
    return 0;
}

int dlt_run_reduce(dlt_run *r, int host_collective_next)
{
    int rc = dlt_grad_reducer_finish(r->reducer, host_collective_next);
    return rc ? dlt_fail_prefix(r->err, r->errlen, rc, "gradient all-reduce") : 0;
}

int dlt_run_sgd(dlt_run *r, double lr)
{
    const dlt_train_config *c = &r->cfg;
    dlt_net *n = &r->net;
    const dlt_model *m = &n->model;
    float scale = (float)dlt_loss_scaler_unscale(&r->scaler, r->comm->size);
    int rc;
    for (int i = 0; i < m->nentries; i++) {
        const dlt_state_entry *e = &m->entries[i];
        float wd = (e->no_decay && !c->decay_bn_bias) ? 0.f : (float)c->weight_decay;
        if (!e->is_param)
            continue;
        if ((rc = r->be->ops->sgd_update(r->be, n->d_params + e->off, n->d_momentum + e->off, n->grads + e->off,
                                         e->len, (float)lr, (float)c->momentum, wd, scale)) != 0)
            return dlt_fail_prefix(r->err, r->errlen, rc, "SGD update");
    }
    if ((rc = dlt_net_sync_weights(n)) != 0)
        return dlt_fail_prefix(r->err, r->errlen, rc, "weight layout");
    return 0;
}
