/* trainer: the training loop, evaluation and the synthetic benchmark. */
#include "config.h"

#include "trainer/train/trainer.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifdef DLT_HAVE_CUDA_BACKEND
#include "trainer/backend/cuda_backend.h"
#endif
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/data/dataset.h"
#include "trainer/data/loader.h"
#include "trainer/data/synthetic.h"
#include "trainer/model/network.h"
#include "trainer/train/loss_scaler.h"
#include "trainer/train/schedule.h"
#include "trainer/train/watchdog.h"

/* ImageNet channel statistics (0..255 scale), as torchvision's Normalize. */
static const float g_mean[3] = {123.675f, 116.28f, 103.53f};
static const float g_inv_std[3] = {1.f / 58.395f, 1.f / 57.12f, 1.f / 57.375f};

/* Set by the signal handler only; read at iteration boundaries. */
static volatile sig_atomic_t g_stop_signal;

static void _on_signal(int sig)
{
    g_stop_signal = sig;
}

void dlt_train_config_defaults(dlt_train_config *c)
{
    memset(c, 0, sizeof(*c));
    snprintf(c->model.arch, sizeof(c->model.arch), "resnet50");
    c->model.depth = 50;
    c->model.width = 1.0f;
    c->model.image = 224;
    c->model.classes = 1000;
    c->model.batch = 32;
    dlt_backend_config_defaults(&c->backend);
    c->loss_scale_window = 2000;
    c->epochs = 90;
    c->base_lr = 0.1;
    c->momentum = 0.9;
    c->weight_decay = 1e-4;
    c->label_smoothing = 0.1;
    c->warmup_epochs = 5;
    c->milestones[0] = 30;
    c->milestones[1] = 60;
    c->milestones[2] = 80;
    c->nmilestones = 3;
    c->zero_init_residual = 1;
    c->seed = 1;
    c->synthetic_size = 1281167;
    c->learnable = 1;
    c->log_every = 10;
    c->eval_size = 50000;
    c->check_every = 100;
    c->max_bad_steps = 5;
    c->stall_timeout = 900;
}

static double _now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct {
    dlt_train_config cfg; /* the run's settings; the class count may come from the data */
    const dlt_train_config *c;
    dlt_comm *comm;
    dlt_backend *be;
    dlt_net net;
    dlt_synthetic data;
    dlt_dataset *ds;     /* real images, when --data is given */
    dlt_loader *loader;
    uint8_t *images;
    int32_t *labels;
    float *host_grads;   /* gradients staged for a host communicator when the backend is a GPU */
    dlt_loss_scaler scaler;
    int graph_warm, graph_ready; /* --cuda-graphs: a plain step ran; a recording exists */
    double graph_scale;          /* the loss scale the recording was made with */
    int failed;                  /* the run ends on an error */
    /* BN statistics before the step (backend memory) and batch counters, to undo a skipped step */
    float *stats_backup;
    int64_t *batches_backup;
    FILE *metrics;
} _run;

/* Where the images of one split are: an explicit path, ROOT/train|val, ROOT itself, or a .rec. */
static int _open_dataset(const char *path, const char *labels, dlt_dataset **ds, char *err, size_t errlen)
{
    size_t n = strlen(path);
    if (n > 4 && !strcmp(path + n - 4, ".rec"))
        return dlt_dataset_open_recordio(ds, path, err, errlen);
    return dlt_dataset_open_folder(ds, path, labels, err, errlen);
}

static int _split_path(const char *root, const char *split, char *out, size_t len)
{
    struct stat st;
    if (snprintf(out, len, "%s/%s", root, split) < (int)len && stat(out, &st) == 0 && S_ISDIR(st.st_mode))
        return 1;
    snprintf(out, len, "%s", root);
    return 0;
}

/* Opens the dataset for training (train) or evaluation and the loader over it; fixes the class
 * count from the data unless --classes was given. */
static int _setup_data(_run *r, dlt_train_config *c, dlt_comm *comm, int train, char *err, size_t errlen)
{
    char path[4096];
    dlt_loader_config lc;
    int rc;
    if (train || !c->val_data)
        _split_path(c->data, train ? "train" : "val", path, sizeof(path));
    else
        snprintf(path, sizeof(path), "%s", c->val_data);
    if ((rc = _open_dataset(path, train ? NULL : c->val_labels, &r->ds, err, errlen)) != 0)
        return rc;
    if (!c->classes_given)
        c->model.classes = dlt_dataset_classes(r->ds);
    else if (c->model.classes != dlt_dataset_classes(r->ds)) {
        snprintf(err, errlen, "%s has %d classes but --classes %d was given", path, dlt_dataset_classes(r->ds),
                 c->model.classes);
        return -EINVAL;
    }
    memset(&lc, 0, sizeof(lc));
    lc.batch = c->model.batch;
    lc.out = c->model.image;
    lc.train = train;
    lc.seed = c->seed;
    lc.rank = comm->rank;
    lc.world = comm->size;
    lc.workers = c->workers;
    lc.strict = c->strict;
    if ((rc = dlt_loader_create(&r->loader, r->ds, &lc, err, errlen)) != 0)
        return rc;
    if (comm->rank == 0)
        printf("dltrain: %s: %lld images, %d classes, %lld batches per rank per epoch\n", path,
               (long long)dlt_dataset_count(r->ds), dlt_dataset_classes(r->ds),
               (long long)dlt_loader_steps_per_epoch(r->loader));
    return 0;
}

static int _setup(_run *r, const dlt_train_config *cin, dlt_comm *comm, int learnable, uint64_t data_seed,
                  int64_t data_size)
{
    char err[1024];
    const dlt_train_config *c = &r->cfg;
    size_t img = (size_t)cin->model.image * cin->model.image * 3;
    memset(r, 0, sizeof(*r));
    r->cfg = *cin;
    r->c = c;
    r->comm = comm;
    if (cin->data && _setup_data(r, &r->cfg, comm, learnable >= 0, err, sizeof(err)) != 0) {
        fprintf(stderr, "dltrain: rank %d: %s\n", comm->rank, err);
        return -1;
    }
    if (dlt_backend_create(&r->be, &c->backend, err, sizeof(err)) != 0 ||
        dlt_net_create(&r->net, &c->model, r->be, err, sizeof(err)) != 0) {
        fprintf(stderr, "dltrain: rank %d: %s\n", comm->rank, err);
        return -1;
    }
    if (!c->data && dlt_synthetic_init(&r->data, c->model.image, c->model.classes, data_size, data_seed, c->seed,
                                       learnable > 0, comm->rank, comm->size) != 0) {
        fprintf(stderr, "dltrain: synthetic data: %" PRId64 " images cannot be split over %d ranks\n", data_size,
                comm->size);
        return -1;
    }
#ifdef DLT_HAVE_CUDA_BACKEND
    /* GPUs under NCCL: gradients are reduced on the device, bucket by bucket, during backward
     * (also for one rank when --comm nccl asks for it: the device check exercises the path so). */
    if (!r->be->host_memory && comm->ops->nccl && comm->ops->nccl(comm) &&
        dlt_backend_cuda_attach_nccl(r->be, comm->ops->nccl(comm), r->net.grads, r->net.model.nparams, err,
                                     sizeof(err)) != 0) {
        fprintf(stderr, "dltrain: rank %d: %s\n", comm->rank, err);
        return -1;
    }
#endif
    if (c->cuda_graphs && !r->be->ops->capture_begin) {
        fprintf(stderr, "dltrain: --cuda-graphs needs the CUDA backend (this run uses %s)\n", r->be->ops->name);
        return -1;
    }
    if (c->backend.precision == DLT_PREC_FP16)
        dlt_loss_scaler_init(&r->scaler, 1, c->loss_scale > 0 ? c->loss_scale : 0, c->loss_scale_window);
    else
        dlt_loss_scaler_init(&r->scaler, 0, 1, 0);
    if (!r->be->host_memory && comm->size > 1 && !r->be->ops->grad_comm_ready) {
        r->host_grads = malloc(r->net.model.nparams * sizeof(float));
        if (!r->host_grads) {
            fprintf(stderr, "dltrain: out of memory for the gradient staging buffer\n");
            return -1;
        }
    }
    r->images = malloc(img * (size_t)c->model.batch);
    r->labels = malloc(sizeof(int32_t) * (size_t)c->model.batch);
    if (!r->images || !r->labels) {
        fprintf(stderr, "dltrain: out of memory for the input batch\n");
        return -1;
    }
    return 0;
}

static void _teardown(_run *r)
{
    /* A failed GPU run may have NCCL kernels waiting on a lost peer: freeing device memory would
     * wait for them forever. Abort the communicator (which ends the process with status 1). */
    if (r->failed && r->comm && r->comm->ops->nccl && r->be && !r->be->host_memory)
        r->comm->ops->abort(r->comm, 1);
    if (r->loader && r->comm && r->comm->rank == 0 && dlt_loader_bad_images(r->loader) > 0)
        fprintf(stderr, "dltrain: %lld bad image(s) were skipped and replaced\n", (long long)dlt_loader_bad_images(r->loader));
    dlt_loader_destroy(r->loader);
    dlt_dataset_close(r->ds);
    if (r->stats_backup)
        r->be->ops->release(r->be, r->stats_backup);
    free(r->batches_backup);
    if (r->net.params)
        dlt_net_destroy(&r->net);
    if (r->be)
        r->be->ops->destroy(r->be);
    dlt_synthetic_free(&r->data);
    free(r->images);
    free(r->labels);
    free(r->host_grads);
    if (r->metrics)
        fclose(r->metrics);
}

static int _load_batch(_run *r, int64_t epoch, int64_t step)
{
    dlt_net *n = &r->net;
    size_t pixels = (size_t)r->c->model.batch * r->c->model.image * r->c->model.image;
    if (r->loader) {
        char err[sizeof(r->be->err)];
        (void)epoch;
        (void)step; /* the loader was positioned by dlt_loader_start and runs in order */
        if (dlt_loader_next(r->loader, r->images, r->labels, err, sizeof(err)) != 0) {
            snprintf(r->be->err, sizeof(r->be->err), "%s", err);
            return -EIO;
        }
    } else {
        dlt_synthetic_batch(&r->data, epoch, step, r->c->model.batch, r->images, r->labels);
    }
    return r->be->ops->normalize_input(r->be, r->images, dlt_net_input(n), pixels, g_mean, g_inv_std);
}

static int _fail_be(_run *r, const char *what)
{
    fprintf(stderr, "dltrain: rank %d: %s: %s\n", r->comm->rank, what, r->be->err);
    return -1;
}

static int _fwd_loss_bwd(_run *r, double *loss_sum, int *top1, int *top5)
{
    dlt_net *n = &r->net;
    if (dlt_net_forward(n, 1) != 0)
        return _fail_be(r, "forward");
    if (r->be->ops->softmax_xent(r->be, dlt_net_logits(n), r->labels, r->c->model.batch, r->c->model.classes,
                                 (float)r->c->label_smoothing, (float)r->scaler.scale, dlt_net_dlogits(n), loss_sum,
                                 top1, top5) != 0)
        return _fail_be(r, "loss");
    if (dlt_net_backward(n) != 0)
        return _fail_be(r, "backward");
    return 0;
}

/* One forward/backward on the loaded batch. loss_sum/top1/top5 for this rank's batch. With
 * --cuda-graphs the second step is recorded as a CUDA graph (the first ran plainly, so every
 * lazily made buffer exists) and later steps replay it; a new loss scale (a kernel argument of
 * the recording) records again. */
static int _fwd_bwd(_run *r, double *loss_sum, int *top1, int *top5)
{
    dlt_backend *be = r->be;
    dlt_net *n = &r->net;
    int batch = r->c->model.batch;
    if (!r->c->cuda_graphs || !r->graph_warm) {
        r->graph_warm = 1;
        return _fwd_loss_bwd(r, loss_sum, top1, top5);
    }
    if (r->graph_ready && r->graph_scale == r->scaler.scale) {
        if (be->ops->replay(be, r->labels, batch) != 0 || be->ops->loss_results(be, loss_sum, top1, top5) != 0)
            return _fail_be(r, "CUDA graph replay");
        for (int i = 0; i < n->model.nbn; i++)
            n->bn_batches[i]++; /* the host side of a BN forward, which a replay does not run */
        return 0;
    }
    r->graph_ready = 0;
    if (be->ops->capture_begin(be) != 0)
        return _fail_be(r, "CUDA graph capture");
    if (_fwd_loss_bwd(r, loss_sum, top1, top5) != 0) {
        be->ops->capture_end(be); /* leave the stream usable; the error above says what failed */
        return -1;
    }
    if (be->ops->capture_end(be) != 0 || be->ops->replay(be, r->labels, batch) != 0 ||
        be->ops->loss_results(be, loss_sum, top1, top5) != 0)
        return _fail_be(r, "CUDA graph");
    r->graph_ready = 1;
    r->graph_scale = r->scaler.scale;
    return 0;
}

/* Sums the gradients over ranks: on the device while backward ran (CUDA + NCCL), else through the
 * host communicator (staged through host memory when the backend's memory is a GPU's). */
static int _allreduce_grads(_run *r)
{
    dlt_net *n = &r->net;
    dlt_backend *be = r->be;
    size_t bytes = n->model.nparams * sizeof(float);
    if (r->comm->size == 1 || be->ops->grad_comm_ready)
        return 0;
    if (be->host_memory)
        return r->comm->ops->allreduce_sum(r->comm, n->grads, n->model.nparams, DLT_DTYPE_F32);
    if (be->ops->download(be, r->host_grads, n->grads, bytes) != 0) {
        snprintf(r->comm->err, sizeof(r->comm->err), "%s", be->err);
        return -1;
    }
    if (r->comm->ops->allreduce_sum(r->comm, r->host_grads, n->model.nparams, DLT_DTYPE_F32) != 0)
        return -1;
    if (be->ops->upload(be, n->grads, r->host_grads, bytes) != 0) {
        snprintf(r->comm->err, sizeof(r->comm->err), "%s", be->err);
        return -1;
    }
    return 0;
}

static int _sgd(_run *r, double lr)
{
    dlt_net *n = &r->net;
    const dlt_model *m = &n->model;
    float scale = (float)dlt_loss_scaler_unscale(&r->scaler, r->comm->size);
    for (int i = 0; i < m->nentries; i++) {
        const dlt_state_entry *e = &m->entries[i];
        float wd = (e->no_decay && !r->c->decay_bn_bias) ? 0.f : (float)r->c->weight_decay;
        if (!e->is_param)
            continue;
        if (r->be->ops->sgd_update(r->be, n->d_params + e->off, n->d_momentum + e->off, n->grads + e->off, e->len,
                                   (float)lr, (float)r->c->momentum, wd, scale) != 0)
            return _fail_be(r, "SGD update");
    }
    if (dlt_net_sync_weights(n) != 0)
        return _fail_be(r, "weight layout");
    return 0;
}

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

static void _abort_comm(void *arg)
{
    dlt_comm *comm = arg;
    comm->ops->abort(comm, DLT_EXIT_STALLED);
}

/* Fault injection for the tests: DLT_TEST_STALL=PHASE:STEP:SECONDS sleeps in that phase of that step
 * (PHASE: data, compute, allreduce). Rank selection: DLT_TEST_STALL_RANK (default all). */
static void _test_stall(const char *phase, int64_t step, int rank)
{
    const char *spec = getenv("DLT_TEST_STALL"), *who = getenv("DLT_TEST_STALL_RANK");
    char p[16];
    long long s;
    unsigned secs;
    if (!spec || sscanf(spec, "%15[a-z]:%lld:%u", p, &s, &secs) != 3 || strcmp(p, phase) || s != step ||
        (who && atoi(who) != rank))
        return;
    sleep(secs);
}

static void _skipped(const char *path, const char *why, void *arg)
{
    (void)arg;
    fprintf(stderr, "dltrain: skipping checkpoint %s: %s\n", path, why);
}

static int _save(_run *r, int64_t step, int64_t epoch, dlt_watchdog *wd)
{
    dlt_train_state st;
    char path[4096], err[1024];
    if (r->comm->rank != 0 || !r->c->checkpoint_dir)
        return 0;
    dlt_watchdog_phase(wd, DLT_PHASE_CHECKPOINT, step);
    if (dlt_net_download(&r->net) != 0) {
        fprintf(stderr, "dltrain: checkpoint at step %" PRId64 " FAILED (the previous checkpoint is untouched): "
                "reading the weights back: %s\n", step, r->be->err);
        return -1;
    }
    /* Never replace a good checkpoint with diverged weights: the next loss will stop the run. */
    for (size_t i = 0; i < r->net.model.nparams; i++)
        if (!isfinite(r->net.params[i])) {
            fprintf(stderr, "dltrain: weights not finite at step %" PRId64 ": checkpoint not written (the previous "
                    "one stays)\n", step);
            return 0;
        }
    memset(&st, 0, sizeof(st));
    st.step = step;
    st.epoch = epoch;
    st.seed = r->c->seed;
    _config_text(r->c, r->comm->size, st.config, sizeof(st.config));
    if (dlt_checkpoint_save(&r->net, &st, r->c->checkpoint_dir, path, sizeof(path), err, sizeof(err)) != 0) {
        fprintf(stderr, "dltrain: checkpoint at step %" PRId64 " FAILED (the previous checkpoint is untouched): %s\n",
                step, err);
        return -1;
    }
    printf("dltrain: checkpoint %s (step %" PRId64 ")\n", path, step);
    fflush(stdout);
    return 0;
}

/* Weights must be identical on every rank: compare a checksum's spread across ranks. */
static int _check_replicas(_run *r, int64_t step)
{
    double v[2] = {0, 0}, sum = 0;
    dlt_net *n = &r->net;
    if (r->comm->size < 2)
        return 0;
    if (dlt_net_download(n) != 0) {
        fprintf(stderr, "dltrain: rank %d: reading the weights back: %s\n", r->comm->rank, r->be->err);
        return -1;
    }
    for (size_t i = 0; i < n->model.nparams; i++)
        sum += (double)n->params[i] * (double)((i % 7) + 1);
    v[0] = sum;
    v[1] = sum * sum;
    if (r->comm->size < 2)
        return 0;
    if (r->comm->ops->allreduce_sum(r->comm, v, 2, DLT_DTYPE_F64) != 0) {
        fprintf(stderr, "dltrain: %s\n", r->comm->err);
        return -1;
    }
    if (fabs(v[1] / r->comm->size - (v[0] / r->comm->size) * (v[0] / r->comm->size)) >
        1e-9 * fmax(1.0, v[1] / r->comm->size)) {
        fprintf(stderr, "dltrain: rank %d: weights differ across ranks at step %" PRId64 " (checksum %.17g): stopping\n",
                r->comm->rank, step, sum);
        return -1;
    }
    return 0;
}

/* Mean images/s per rank of a metrics file (its first interval left out as warm-up). */
static int _baseline_per_rank(const char *path, double *per_rank)
{
    FILE *f = fopen(path, "r");
    char line[2048];
    double sum = 0;
    int n = 0, lines = 0;
    if (!f)
        return -errno;
    while (fgets(line, sizeof(line), f)) {
        const char *a = strstr(line, "\"images_per_s\":"), *r = strstr(line, "\"ranks\":");
        /* A damaged line (no positive finite rate, no rank count) is left out rather than printed as inf or NaN. */
        if (!a || !r || lines++ == 0 || !(atof(a + 15) > 0 && atof(a + 15) < 1e12 && atof(r + 8) >= 1))
            continue;
        sum += atof(a + 15) / atof(r + 8);
        n++;
    }
    fclose(f);
    if (!n)
        return -EINVAL;
    *per_rank = sum / n;
    return 0;
}

int dlt_train_run(const dlt_train_config *c, dlt_comm *comm)
{
    _run r;
    dlt_schedule sched;
    int64_t spe, step = 0, total;
    double t_start, window_t0, w_data = 0, w_comm = 0, w_total = 0, loss_acc = 0;
    int64_t w_images = 0, w_correct = 0, w_seen = 0;
    int rc = 1, bad_steps = 0;
    dlt_watchdog wd;
    struct sigaction sa;

    memset(&wd, 0, sizeof(wd));
    if (_setup(&r, c, comm, c->learnable, c->seed, c->synthetic_size) != 0)
        goto out;
    r.stats_backup = r.be->ops->alloc(r.be, (r.net.model.nstats + 1) * sizeof(float));
    r.batches_backup = malloc(((size_t)r.net.model.nbn + 1) * sizeof(int64_t));
    if (!r.stats_backup || !r.batches_backup) {
        fprintf(stderr, "dltrain: out of memory\n");
        goto out;
    }
    spe = r.loader ? dlt_loader_steps_per_epoch(r.loader) : dlt_synthetic_steps_per_epoch(&r.data, c->model.batch);
    c = r.c; /* the class count may have come from the data */
    if (spe < 1) {
        fprintf(stderr, "dltrain: %" PRId64 " images per epoch give no full batch of %d on each of %d ranks\n",
                c->synthetic_size, c->model.batch, comm->size);
        goto out;
    }
    total = c->epochs * spe;
    if (c->max_steps > 0 && c->max_steps < total)
        total = c->max_steps;
    memset(&sched, 0, sizeof(sched));
    sched.peak = c->base_lr * (double)c->model.batch * comm->size / 256.0;
    sched.steps_per_epoch = spe;
    sched.warmup_epochs = c->warmup_epochs;
    sched.cosine = c->cosine;
    sched.total_epochs = (int)c->epochs;
    sched.nmilestones = c->nmilestones;
    memcpy(sched.milestones, c->milestones, sizeof(sched.milestones));

    dlt_net_init_params(&r.net, c->seed, c->zero_init_residual);
    if (c->resume) {
        char path[4096], err[1024];
        dlt_train_state st;
        int found = 0;
        if (!strcmp(c->resume, "auto")) {
            if (!c->checkpoint_dir) {
                fprintf(stderr, "dltrain: --resume auto needs --checkpoint-dir\n");
                goto out;
            }
            found = dlt_checkpoint_find_latest(c->checkpoint_dir, path, sizeof(path), comm->rank == 0 ? _skipped : NULL,
                                               NULL) == 0;
            if (!found && comm->rank == 0)
                printf("dltrain: no checkpoint in %s: starting from scratch\n", c->checkpoint_dir);
        } else {
            snprintf(path, sizeof(path), "%s", c->resume);
            found = 1;
        }
        if (found) {
            if (dlt_checkpoint_load(&r.net, path, &st, err, sizeof(err)) != 0) {
                fprintf(stderr, "dltrain: cannot resume: %s\n", err);
                goto out;
            }
            step = st.step;
            if (comm->rank == 0)
                printf("dltrain: resumed from %s at step %" PRId64 " (epoch %" PRId64 ")\n", path, step, st.epoch);
        }
    }
    if (dlt_net_upload(&r.net) != 0) {
        _fail_be(&r, "loading the weights into the backend");
        goto out;
    }
    if (comm->rank == 0 && c->metrics_path) {
        r.metrics = fopen(c->metrics_path, "a");
        if (!r.metrics) {
            fprintf(stderr, "dltrain: cannot open metrics file %s: %s\n", c->metrics_path, strerror(errno));
            goto out;
        }
    }
    if (r.loader && dlt_loader_start(r.loader, step / spe, step % spe) != 0) {
        fprintf(stderr, "dltrain: cannot start the data loader threads\n");
        goto out;
    }
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = _on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
    if (comm->rank == 0) {
        printf("dltrain: training %s (%zu parameters, %.3g GFLOPs/image) on %d rank(s), batch %d x %d = %d, %" PRId64
               " steps/epoch, %" PRId64 " steps, peak lr %.4g, backend %s %s\n",
               c->model.arch, r.net.model.nparams, (double)r.net.model.macs * 1e-9, comm->size, c->model.batch,
               comm->size, c->model.batch * comm->size, spe, total, sched.peak, r.be->ops->name,
               dlt_precision_name(c->backend.precision));
        fflush(stdout);
    }

    {
        char host[64] = "?";
        if (gethostname(host, sizeof(host) - 1) != 0 || getenv("SLURMD_NODENAME"))
            snprintf(host, sizeof(host), "%.63s", getenv("SLURMD_NODENAME") ? getenv("SLURMD_NODENAME") : "?");
        if (dlt_watchdog_start(&wd, c->stall_timeout, comm->rank, host, _abort_comm, comm) != 0) {
            fprintf(stderr, "dltrain: cannot start the stall watchdog\n");
            goto out;
        }
    }
    t_start = window_t0 = _now();
    double last_ckpt = t_start, run_images = 0, steady_t0 = 0;
    int64_t first_step = step;
    while (step < total) {
        int64_t epoch = step / spe, in_epoch = step % spe;
        double t0 = _now(), t1, t2, t3, lr, flags[3];
        double loss_sum = 0;
        int top1 = 0, top5 = 0, overflow, apply;
        dlt_watchdog_phase(&wd, DLT_PHASE_DATA, step);
        _test_stall("data", step, comm->rank);
        if (_load_batch(&r, epoch, in_epoch) != 0) {
            _fail_be(&r, "input");
            goto out;
        }
        t1 = _now();
        /* A step whose loss turns out non-finite must leave no trace, BN running statistics included. */
        if (r.be->ops->copy(r.be, r.stats_backup, r.net.d_stats, r.net.model.nstats * sizeof(float)) != 0) {
            _fail_be(&r, "statistics backup");
            goto out;
        }
        memcpy(r.batches_backup, r.net.bn_batches, (size_t)r.net.model.nbn * sizeof(int64_t));
        dlt_watchdog_phase(&wd, DLT_PHASE_COMPUTE, step);
        _test_stall("compute", step, comm->rank);
        if (_fwd_bwd(&r, &loss_sum, &top1, &top5) != 0)
            goto out;
        t2 = _now();
        dlt_watchdog_phase(&wd, DLT_PHASE_ALLREDUCE, step);
        _test_stall("allreduce", step, comm->rank);
        if (_allreduce_grads(&r) != 0) {
            fprintf(stderr, "dltrain: rank %d: gradient all-reduce: %s\n", comm->rank, comm->err);
            goto out;
        }
        /* Gradient buckets reduced by NCCL on the backend's stream: the host collective below uses
         * the same communicator from another stream, so it must not start before they end (NCCL
         * needs one order of operations on every rank). Its result is needed before the update
         * anyway, so this wait costs no overlap. */
        if (comm->size > 1 && r.be->ops->grad_comm_ready && r.be->ops->sync(r.be) != 0) {
            _fail_be(&r, "gradient all-reduce");
            goto out;
        }
        /* fp16: the summed gradients are the same on every rank, so every rank finds the same
         * overflow and skips the same step. */
        overflow = 0;
        if (r.scaler.enabled) {
            int finite = 1;
            if (r.be->ops->all_finite(r.be, r.net.grads, r.net.model.nparams, &finite) != 0) {
                _fail_be(&r, "gradient check");
                goto out;
            }
            overflow = !finite;
        }
        /* Loss, accuracy and the stop flag travel together: every rank stops at the same step. */
        flags[0] = loss_sum;
        flags[1] = top1;
        flags[2] = g_stop_signal ? 1.0 : 0.0;
        if (comm->ops->allreduce_sum(comm, flags, 3, DLT_DTYPE_F64) != 0) {
            fprintf(stderr, "dltrain: rank %d: %s\n", comm->rank, comm->err);
            goto out;
        }
        t3 = _now();
        dlt_watchdog_phase(&wd, DLT_PHASE_COMPUTE, step);
        lr = dlt_schedule_lr(&sched, step);
        if (!isfinite(flags[0])) {
            /* Every rank sees the same summed loss, so all skip the same update. */
            if (++bad_steps > c->max_bad_steps) {
                fprintf(stderr,
                        "dltrain: rank %d: loss not finite for %d consecutive steps (last at step %" PRId64 "): "
                        "stopping; the last checkpoint is intact (lower --lr?)\n",
                        comm->rank, bad_steps, step);
                goto out;
            }
            if (comm->rank == 0)
                fprintf(stderr, "dltrain: loss is %g at step %" PRId64 ": update skipped (%d of %d allowed in a row)\n",
                        flags[0], step, bad_steps, c->max_bad_steps);
            apply = 0;
        } else {
            /* An fp16 overflow is a normal event while the scale settles, not a divergence. */
            bad_steps = 0;
            apply = dlt_loss_scaler_update(&r.scaler, overflow);
        }
        if (apply) {
            if (_sgd(&r, lr) != 0)
                goto out;
        } else {
            /* Skipped: weights and momentum untouched, statistics restored, no trace left; the step
             * still counts so the data moves on. */
            if (r.be->ops->copy(r.be, r.net.d_stats, r.stats_backup, r.net.model.nstats * sizeof(float)) != 0) {
                _fail_be(&r, "statistics restore");
                goto out;
            }
            memcpy(r.net.bn_batches, r.batches_backup, (size_t)r.net.model.nbn * sizeof(int64_t));
        }
        step++;
        if (step == first_step + 1)
            steady_t0 = _now(); /* the first step includes one-time setup */
        else
            run_images += (double)c->model.batch * comm->size;
        w_data += t1 - t0;
        w_comm += t3 - t2;
        w_total += _now() - t0;
        w_images += (int64_t)c->model.batch * comm->size;
        loss_acc += flags[0];
        w_correct += (int64_t)flags[1];
        w_seen += (int64_t)c->model.batch * comm->size;
        if (c->check_every > 0 && step % c->check_every == 0 && _check_replicas(&r, step) != 0)
            goto out;
        if ((c->log_every > 0 && step % c->log_every == 0) || step == total || flags[2] > 0) {
            double now = _now(), ips = (double)w_images / (now - window_t0);
            if (comm->rank == 0) {
                printf("dltrain: epoch %" PRId64 " step %" PRId64 "/%" PRId64 " loss %.4f top1 %.3f lr %.5f img/s %.1f "
                       "(%.1f per rank) data %.1f%% allreduce %.1f%%",
                       step / spe, step, total, loss_acc / (double)w_seen, (double)w_correct / (double)w_seen, lr, ips,
                       ips / comm->size, 100 * w_data / w_total, 100 * w_comm / w_total);
                if (r.scaler.enabled)
                    printf(" loss-scale %g skipped %" PRId64, r.scaler.scale, r.scaler.skipped);
                printf("\n");
                fflush(stdout);
                if (r.metrics) {
                    fprintf(r.metrics,
                            "{\"step\":%" PRId64 ",\"epoch\":%.4f,\"loss\":%.6f,\"top1\":%.5f,\"lr\":%.6g,"
                            "\"images_per_s\":%.3f,\"images_per_s_per_rank\":%.3f,\"data_wait\":%.5f,"
                            "\"allreduce\":%.5f,\"ranks\":%d,\"batch\":%d,\"time\":%.3f}\n",
                            step, (double)step / spe, loss_acc / (double)w_seen, (double)w_correct / (double)w_seen, lr,
                            ips, ips / comm->size, w_data / w_total, w_comm / w_total, comm->size, c->model.batch,
                            now - t_start);
                    fflush(r.metrics);
                }
            }
            window_t0 = now;
            w_data = w_comm = w_total = loss_acc = 0;
            w_images = w_correct = w_seen = 0;
        }
        if (flags[2] > 0) {
            if (comm->rank == 0)
                printf("dltrain: stop requested (signal) at step %" PRId64 ": checkpointing\n", step);
            if (_save(&r, step, step / spe, &wd) != 0)
                goto out;
            rc = DLT_EXIT_PREEMPTED;
            goto out;
        }
        if (step < total && bad_steps == 0 && ((c->checkpoint_every > 0 && step % c->checkpoint_every == 0) ||
                             (c->checkpoint_minutes > 0 && _now() - last_ckpt >= 60 * c->checkpoint_minutes))) {
            if (_save(&r, step, step / spe, &wd))
                goto out;
            last_ckpt = _now();
        }
    }
    if (bad_steps > 0) {
        fprintf(stderr, "dltrain: the run ended on non-finite losses: no final checkpoint written\n");
        goto out;
    }
    if (_save(&r, step, step / spe, &wd) != 0)
        goto out;
    if (comm->rank == 0) {
        double el = _now() - t_start, steady = _now() - steady_t0, ips = steady > 0 ? run_images / steady : 0;
        double base = 0;
        printf("dltrain: done: %" PRId64 " steps in %.1f s\n", step, el);
        if (run_images > 0) {
            printf("dltrain: summary: %.1f images/s, %.1f per rank, %d rank(s)", ips, ips / comm->size, comm->size);
            if (c->baseline && _baseline_per_rank(c->baseline, &base) == 0)
                printf(", scaling efficiency %.1f%% against %.1f images/s per rank in %s", 100 * ips / comm->size / base,
                       base, c->baseline);
            else if (c->baseline)
                printf(" (baseline %s unreadable or empty)", c->baseline);
            printf("\n");
        }
    }
    rc = 0;
out:
    dlt_watchdog_stop(&wd);
    r.failed = rc != 0 && rc != DLT_EXIT_PREEMPTED;
    _teardown(&r);
    return rc;
}

int dlt_eval_run(const dlt_train_config *c, dlt_comm *comm, const char *checkpoint)
{
    _run r;
    char err[1024];
    int64_t steps;
    double counts[3] = {0, 0, 0};
    int rc = 1;
    /* The validation set: other images (another seed) of the same classes. */
    if (_setup(&r, c, comm, c->data ? -1 : c->learnable, c->seed ^ 0x5eed5eedull, c->eval_size) != 0)
        goto out;
    c = r.c;
    if (dlt_checkpoint_load(&r.net, checkpoint, NULL, err, sizeof(err)) != 0) {
        fprintf(stderr, "dltrain: %s\n", err);
        goto out;
    }
    if (dlt_net_upload(&r.net) != 0) {
        _fail_be(&r, "loading the weights into the backend");
        goto out;
    }
    steps = r.loader ? dlt_loader_steps_per_epoch(r.loader) : dlt_synthetic_steps_per_epoch(&r.data, c->model.batch);
    if (r.loader && dlt_loader_start(r.loader, 0, 0) != 0) {
        fprintf(stderr, "dltrain: cannot start the data loader threads\n");
        goto out;
    }
    for (int64_t s = 0; s < steps; s++) {
        double loss = 0;
        int t1 = 0, t5 = 0, nv = c->model.batch; /* nv: real images; a rank's last batch may be short */
        if (_load_batch(&r, 0, s) != 0 || dlt_net_forward(&r.net, 0) != 0 ||
            (nv = r.loader ? dlt_loader_last_valid(r.loader) : c->model.batch,
             r.be->ops->softmax_xent(r.be, dlt_net_logits(&r.net), r.labels, nv, c->model.classes, 0.f, 1.f, NULL,
                                     &loss, &t1, &t5)) != 0) {
            _fail_be(&r, "evaluation");
            goto out;
        }
        counts[0] += t1;
        counts[1] += t5;
        counts[2] += nv;
    }
    if (comm->ops->allreduce_sum(comm, counts, 3, DLT_DTYPE_F64) != 0) {
        fprintf(stderr, "dltrain: %s\n", comm->err);
        goto out;
    }
    if (comm->rank == 0)
        printf("dltrain: eval %s: %.0f images, top-1 %.4f, top-5 %.4f\n", checkpoint, counts[2], counts[0] / counts[2],
               counts[1] / counts[2]);
    rc = 0;
out:
    r.failed = rc != 0;
    _teardown(&r);
    return rc;
}

int dlt_bench_run(const dlt_train_config *c, const dlt_bench_config *b, dlt_comm *comm)
{
    _run r;
    double t0 = 0, el;
    int rc = 1;
    if (_setup(&r, c, comm, 0, c->seed, (int64_t)c->model.batch * comm->size) != 0)
        goto out;
    dlt_net_init_params(&r.net, c->seed, 1);
    if (dlt_net_upload(&r.net) != 0 || _load_batch(&r, 0, 0) != 0) {
        _fail_be(&r, "setup");
        goto out;
    }
    for (int i = 0; i < b->warmup + b->iters; i++) {
        double loss;
        int t1, t5;
        if (i == b->warmup)
            t0 = _now();
        if (b->inference) {
            if (dlt_net_forward(&r.net, 0) != 0) {
                _fail_be(&r, "forward");
                goto out;
            }
            continue;
        }
        if (_fwd_bwd(&r, &loss, &t1, &t5) != 0)
            goto out;
        if (_allreduce_grads(&r) != 0) {
            fprintf(stderr, "dltrain: %s\n", comm->err);
            goto out;
        }
        if (_sgd(&r, 0.01) != 0)
            goto out;
    }
    if (r.be->ops->sync(r.be) != 0) {
        _fail_be(&r, "device");
        goto out;
    }
    el = _now() - t0;
    if (comm->rank == 0) {
        double ips = (double)b->iters * c->model.batch * comm->size / el;
        double flops = (double)r.net.model.macs * 2 * (b->inference ? 1 : 3);
        if (b->json)
            printf("{\"arch\":\"%s\",\"image\":%d,\"batch\":%d,\"ranks\":%d,\"precision\":\"%s\",\"mode\":\"%s\","
                   "\"iters\":%d,\"images_per_s\":%.3f,\"tflops\":%.4f}\n",
                   c->model.arch, c->model.image, c->model.batch, comm->size,
                   dlt_precision_name(c->backend.precision), b->inference ? "inference" : "train", b->iters, ips,
                   ips * flops * 1e-12);
        else
            printf("dltrain: bench %s %dx%d batch %d x %d rank(s) %s %s: %.2f images/s (%.3f TFLOP/s at %.3g GFLOP "
                   "per image)\n",
                   c->model.arch, c->model.image, c->model.image, c->model.batch, comm->size,
                   dlt_precision_name(c->backend.precision), b->inference ? "inference" : "training", ips,
                   ips * flops * 1e-12, flops * 1e-9);
    }
    rc = 0;
out:
    r.failed = rc != 0;
    _teardown(&r);
    return rc;
}
