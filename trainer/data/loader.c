/* SPDX-License-Identifier: Apache-2.0 */
/* loader: a worker pool filling a bounded ring of batches in sampler order. */
#include "config.h"

#include "trainer/data/loader.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/rng.h"
#include "common/status.h"
#include "trainer/data/transform.h"

typedef struct {
    int64_t seq; /* which batch of the stream this slot holds (-1 free) */
    int done;    /* images finished */
    uint8_t *images;
    int32_t *labels;
} _slot;

struct dlt_loader {
    dlt_dataset *ds;
    dlt_loader_config cfg;
    dlt_sampler sampler;
    int64_t spe;      /* steps per epoch */
    int64_t per_rank; /* images of this rank per epoch */
    int last_valid;   /* real images in the batch next() returned last */
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_done;
    _slot *slots;
    int64_t next_task; /* next (batch, image) to hand out, as seq * batch + j */
    int64_t consumed;  /* batches handed to the trainer */
    int64_t released;  /* batches the trainer gave back (their slots free again) */
    int64_t start_seq;
    int stop, fatal, started;
    char fatal_msg[1024];
    int64_t fatal_seq; /* the batch a --strict bad image belongs to: reported when the trainer
                        * reaches it, not while it is prefetched (-1: at once) */
    int64_t bad;
    unsigned char *reported; /* one bit per dataset index: known bad (logged here, or by another rank) */
    int64_t known;           /* bits set in reported */
    char first_bad[3][400];  /* the first unreadable files met here, with their causes */
    int nfirst;
    unsigned char *renamed; /* one bit per dataset index: read by content, its name says another format */
    int64_t renamed_png;    /* of those, PNGs named .jpg/.jpeg */
    int64_t renamed_jpeg;   /* JPEGs named .png */
    int64_t *fresh;         /* found bad (or renamed, tagged) here and not yet taken by dlt_loader_bad_take */
    int nfresh, capfresh;
    /* With deferred reports (several ranks): the line each bad file found here would have printed,
     * said later by dlt_loader_bad_report when the ranks agree who says it. */
    struct {
        int64_t idx;
        char *line;
    } * held;
    int nheld, capheld;
    pthread_t *threads;
    int nthreads;
};

static int _default_workers(void)
{
    cpu_set_t set;
    int n = 1;
    if (sched_getaffinity(0, sizeof(set), &set) == 0)
        n = CPU_COUNT(&set) - 1;
    return n > 0 ? n : 1;
}

int dlt_loader_create(dlt_loader **out, dlt_dataset *ds, const dlt_loader_config *cfg, dlt_err *err)
{
    dlt_loader *l = calloc(1, sizeof(*l));
    size_t img = (size_t)cfg->out * cfg->out * 3;
    *out = NULL;
    if (!l)
        return -ENOMEM;
    l->ds = ds;
    l->cfg = *cfg;
    if (l->cfg.depth <= 0)
        l->cfg.depth = 4; /* two held by the trainer (the step's, the next one being copied), two decoding */
    if (l->cfg.workers <= 0)
        l->cfg.workers = _default_workers();
    if (cfg->batch < 1 || cfg->world < 1) {
        dlt_fail(err, -EINVAL, "batch %d on %d rank(s): both must be at least 1", cfg->batch, cfg->world);
        free(l);
        return -EINVAL;
    }
    if (cfg->train) {
        int rc = dlt_loader_check_fit(dlt_dataset_count(ds), cfg->batch, cfg->world, dlt_dataset_root(ds), err);
        if (rc == 0 && dlt_sampler_init(&l->sampler, dlt_dataset_count(ds), cfg->seed, cfg->rank, cfg->world, 1) != 0)
            rc = dlt_fail(err, -ENOMEM, "out of memory for the sampler of %lld images",
                          (long long)dlt_dataset_count(ds));
        if (rc != 0) {
            free(l);
            return rc;
        }
        l->per_rank = dlt_sampler_per_rank(&l->sampler);
        l->spe = l->per_rank / cfg->batch;
    } else {
        if (dlt_sampler_init_exact(&l->sampler, dlt_dataset_count(ds), cfg->rank, cfg->world) != 0) {
            dlt_fail(err, -EINVAL, "%s: no images to evaluate", dlt_dataset_root(ds));
            free(l);
            return -EINVAL;
        }
        l->per_rank = dlt_sampler_per_rank(&l->sampler);
        l->spe = (l->per_rank + cfg->batch - 1) / cfg->batch;
    }
    l->slots = calloc((size_t)l->cfg.depth, sizeof(_slot));
    l->reported = calloc((size_t)(dlt_dataset_count(ds) / 8 + 1), 1);
    l->renamed = calloc((size_t)(dlt_dataset_count(ds) / 8 + 1), 1);
    l->threads = calloc((size_t)l->cfg.workers, sizeof(pthread_t));
    if (!l->slots || !l->reported || !l->renamed || !l->threads)
        goto oom;
    for (int s = 0; s < l->cfg.depth; s++) {
        l->slots[s].seq = -1;
        l->slots[s].images =
            cfg->alloc ? cfg->alloc(cfg->alloc_arg, img * (size_t)cfg->batch) : malloc(img * (size_t)cfg->batch);
        l->slots[s].labels = malloc(sizeof(int32_t) * (size_t)cfg->batch);
        if (!l->slots[s].images || !l->slots[s].labels)
            goto oom;
    }
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv_work, NULL);
    pthread_cond_init(&l->cv_done, NULL);
    *out = l;
    return 0;
oom:
    dlt_fail(err, -ENOMEM, "out of memory for %d prefetched batches", l->cfg.depth);
    dlt_loader_destroy(l);
    return -ENOMEM;
}

int dlt_loader_check_fit(int64_t count, int batch, int ranks, const char *what, dlt_err *err)
{
    int64_t per_rank = ranks > 0 ? count / ranks : 0;
    if (ranks < 1 || batch < 1)
        return dlt_fail(err, -EINVAL, "batch %d on %d rank(s): both must be at least 1", batch, ranks);
    if (per_rank >= batch)
        return 0;
    if (per_rank < 1)
        return dlt_fail(err, -EINVAL,
                        "%s: %lld image(s) for %d ranks: every rank needs at least one batch of --batch %d: use more "
                        "images or fewer ranks",
                        what, (long long)count, ranks, batch);
    return dlt_fail(err, -EINVAL,
                    "%s: %lld image(s) give no full batch of %d on each of %d rank(s) (%lld needed): use --batch %lld "
                    "or less, or more images",
                    what, (long long)count, batch, ranks, (long long)batch * ranks, (long long)per_rank);
}

int64_t dlt_loader_steps_per_epoch(const dlt_loader *l)
{
    return l->spe;
}

int64_t dlt_loader_images_per_epoch(const dlt_loader *l)
{
    return l->per_rank;
}

/* Keeps a report line for idx (mu held); an allocation failure prints it now instead. */
static void _hold(dlt_loader *l, int64_t idx, const char *line)
{
    char *copy;
    if (l->nheld == l->capheld) {
        int nc = l->capheld ? 2 * l->capheld : 16;
        void *nh = realloc(l->held, (size_t)nc * sizeof(*l->held));
        if (nh) {
            l->held = nh;
            l->capheld = nc;
        }
    }
    if (l->nheld == l->capheld || !(copy = strdup(line))) {
        fputs(line, stderr);
        return;
    }
    l->held[l->nheld].idx = idx;
    l->held[l->nheld].line = copy;
    l->nheld++;
}

void dlt_loader_bad_report(dlt_loader *l, int64_t idx)
{
    pthread_mutex_lock(&l->mu);
    for (int i = 0; i < l->nheld; i++)
        if (l->held[i].idx == idx && l->held[i].line) {
            fputs(l->held[i].line, stderr);
            free(l->held[i].line);
            l->held[i].line = NULL;
        }
    pthread_mutex_unlock(&l->mu);
}

void dlt_loader_bad_report_all(dlt_loader *l)
{
    pthread_mutex_lock(&l->mu);
    for (int i = 0; i < l->nheld; i++)
        if (l->held[i].line) {
            fputs(l->held[i].line, stderr);
            free(l->held[i].line);
            l->held[i].line = NULL;
        }
    pthread_mutex_unlock(&l->mu);
}

int dlt_loader_bad_take(dlt_loader *l, int64_t *idx, int max)
{
    int n;
    pthread_mutex_lock(&l->mu);
    n = l->nfresh < max ? l->nfresh : max;
    memcpy(idx, l->fresh, (size_t)n * sizeof(*idx));
    memmove(l->fresh, l->fresh + n, (size_t)(l->nfresh - n) * sizeof(*idx));
    l->nfresh -= n;
    pthread_mutex_unlock(&l->mu);
    return n;
}

/* Training with more distinct unreadable files than --max-bad-share of the data set: the run would
 * learn from a different data set than the one named, so it stops at once, with the count and
 * the first causes. Called with mu held, after known grew. */
static void _bad_bound(dlt_loader *l)
{
    const int64_t count = dlt_dataset_count(l->ds);
    char causes[1300] = "";
    size_t at = 0;
    if (!l->cfg.train || l->cfg.strict || l->cfg.max_bad_share <= 0 || l->cfg.max_bad_share >= 1 ||
        (double)l->known <= l->cfg.max_bad_share * (double)count || (l->fatal && l->fatal_seq < 0))
        return;
    for (int i = 0; i < l->nfirst && at < sizeof(causes); i++)
        at += (size_t)snprintf(causes + at, sizeof(causes) - at, "%s%s", i ? "; " : "", l->first_bad[i]);
    l->fatal = 1;
    l->fatal_seq = -1;
    snprintf(l->fatal_msg, sizeof(l->fatal_msg),
             "%lld of the %lld images of %.200s are unreadable (%.1f%%), more than --max-bad-share %g allows: "
             "training on the rest would learn from another data set. First: %.500s (repair or remove them, or "
             "raise --max-bad-share)",
             (long long)l->known, (long long)count, dlt_dataset_root(l->ds), 100.0 * (double)l->known / (double)count,
             l->cfg.max_bad_share, causes[0] ? causes : "found by another rank");
    pthread_cond_broadcast(&l->cv_done);
}

/* Records renamed file idx (tagged as in loader.h); 1 when it was not known (mu held). */
static int _renamed_note(dlt_loader *l, int64_t tagged)
{
    int64_t idx = tagged & (DLT_LOADER_RENAMED_JPEG - 1);
    if (idx >= dlt_dataset_count(l->ds) || (l->renamed[idx / 8] & (1u << (idx % 8))))
        return 0;
    l->renamed[idx / 8] |= (unsigned char)(1u << (idx % 8));
    if (tagged & DLT_LOADER_RENAMED_JPEG)
        l->renamed_jpeg++;
    else
        l->renamed_png++;
    return 1;
}

/* Appends idx to the indices dlt_loader_bad_take hands out (mu held; dropped when out of memory:
 * then only this rank counts it). */
static void _fresh(dlt_loader *l, int64_t idx)
{
    if (l->nfresh == l->capfresh) {
        int nc = l->capfresh ? 2 * l->capfresh : 64;
        int64_t *nf = realloc(l->fresh, (size_t)nc * sizeof(*nf));
        if (nf) {
            l->fresh = nf;
            l->capfresh = nc;
        }
    }
    if (l->nfresh < l->capfresh)
        l->fresh[l->nfresh++] = idx;
}

void dlt_loader_renamed(dlt_loader *l, int64_t *png_named_jpeg, int64_t *jpeg_named_png)
{
    pthread_mutex_lock(&l->mu);
    *png_named_jpeg = l->renamed_png;
    *jpeg_named_png = l->renamed_jpeg;
    pthread_mutex_unlock(&l->mu);
}

/* Image idx (name) was decoded as got although its name says named: counted once per file, said
 * (with --verbose) when this loader first reads it. */
static void _renamed(dlt_loader *l, int64_t idx, const char *name, dlt_image_format got, dlt_image_format named)
{
    int64_t tagged = idx | DLT_LOADER_RENAMED | (got == DLT_IMAGE_JPEG ? DLT_LOADER_RENAMED_JPEG : 0);
    pthread_mutex_lock(&l->mu);
    if (_renamed_note(l, tagged)) {
        _fresh(l, tagged);
        if (l->cfg.verbose)
            fprintf(stderr, "dltrain: %s: its content is %s, its name says %s: decoded as %s\n", name,
                    dlt_image_format_name(got), dlt_image_format_name(named), dlt_image_format_name(got));
    }
    pthread_mutex_unlock(&l->mu);
}

void dlt_loader_bad_merge(dlt_loader *l, const int64_t *idx, int n)
{
    const int64_t count = dlt_dataset_count(l->ds);
    pthread_mutex_lock(&l->mu);
    for (int i = 0; i < n; i++)
        if (idx[i] >= 0 && (idx[i] & DLT_LOADER_RENAMED))
            _renamed_note(l, idx[i]);
        else if (idx[i] >= 0 && idx[i] < count && !(l->reported[idx[i] / 8] & (1u << (idx[i] % 8)))) {
            l->reported[idx[i] / 8] |= (unsigned char)(1u << (idx[i] % 8));
            l->known++;
        }
    _bad_bound(l);
    pthread_mutex_unlock(&l->mu);
}

int64_t dlt_loader_bad_files(dlt_loader *l)
{
    int64_t n;
    pthread_mutex_lock(&l->mu);
    n = l->known;
    pthread_mutex_unlock(&l->mu);
    return n;
}

int dlt_loader_last_valid(const dlt_loader *l)
{
    return l->last_valid;
}

/* Real images in stream batch seq: the batch, but fewer in the short last batch of an epoch. */
static int _valid_in(const dlt_loader *l, int64_t seq)
{
    int64_t left = l->per_rank - (seq % l->spe) * l->cfg.batch;
    return left < l->cfg.batch ? (int)left : l->cfg.batch;
}

int64_t dlt_loader_bad_images(const dlt_loader *l)
{
    return l->bad;
}

/* Decodes image j of stream batch seq into its slot, replacing unreadable images. */
static void _produce(dlt_loader *l, dlt_decoder *dec, uint8_t **buf, size_t *cap, int64_t seq, int j, _slot *slot)
{
    const int64_t epoch = seq / l->spe, step = seq % l->spe, n = dlt_dataset_count(l->ds);
    const size_t img = (size_t)l->cfg.out * l->cfg.out * 3;
    int64_t idx;
    if (j >= _valid_in(l, seq)) {
        /* Padding of a short evaluation batch: blank, and left out of the valid count. */
        memset(slot->images + (size_t)j * img, 0, img);
        slot->labels[j] = 0;
        return;
    }
    pthread_mutex_lock(&l->mu);
    idx = dlt_sampler_index(&l->sampler, epoch, step * l->cfg.batch + j);
    pthread_mutex_unlock(&l->mu);
    for (int attempt = 0; attempt < 16; attempt++, idx = (idx + 7919) % n) {
        char name[1024];
        dlt_err err = DLT_ERR_INIT;
        size_t len = 0;
        int32_t label = 0;
        dlt_rng r;
        dlt_rng_seed(&r, l->cfg.seed ^ ((uint64_t)epoch * 0x9e3779b97f4a7c15ull), (uint64_t)idx);
        if (dlt_dataset_read(l->ds, idx, buf, cap, &len, &label, name, sizeof(name), &err) == 0 &&
            dlt_decode_transform(dec, *buf, len, l->cfg.out, l->cfg.train && !l->cfg.no_augment, &r,
                                 slot->images + (size_t)j * img, &err) == 0) {
            dlt_image_format got = dlt_decoder_last_format(dec), named = dlt_image_format_of_name(name);
            slot->labels[j] = label;
            if (named != DLT_IMAGE_UNKNOWN && named != got)
                _renamed(l, idx, name, got, named);
            return;
        }
        if (!dlt_dataset_present(l->ds)) {
            /* Not a bad image: the data itself is gone. Replacing would only fail again. */
            pthread_mutex_lock(&l->mu);
            if (!l->fatal || l->fatal_seq >= 0) {
                l->fatal = 1;
                l->fatal_seq = -1;
                snprintf(l->fatal_msg, sizeof(l->fatal_msg),
                         "the data at %.900s is gone (removed or unmounted during the run)", dlt_dataset_root(l->ds));
                pthread_cond_broadcast(&l->cv_done);
            }
            pthread_mutex_unlock(&l->mu);
            break;
        }
        pthread_mutex_lock(&l->mu);
        l->bad++;
        if (!(l->reported[idx / 8] & (1u << (idx % 8)))) {
            l->reported[idx / 8] |= (unsigned char)(1u << (idx % 8));
            l->known++;
            if (l->nfirst < 3)
                snprintf(l->first_bad[l->nfirst++], sizeof(l->first_bad[0]), "%.250s: %.140s", name, err.msg);
            _fresh(l, idx);
            if (l->cfg.defer_reports) {
                char line[2048];
                snprintf(line, sizeof(line), "dltrain: %s image %s: %.900s\n", l->cfg.strict ? "bad" : "skipping bad",
                         name, err.msg);
                _hold(l, idx, line);
            } else {
                fprintf(stderr, "dltrain: %s image %s: %s\n", l->cfg.strict ? "bad" : "skipping bad", name, err.msg);
            }
            _bad_bound(l);
        }
        if (l->cfg.strict && (!l->fatal || (l->fatal_seq >= 0 && seq < l->fatal_seq))) {
            l->fatal = 1;
            l->fatal_seq = seq;
            pthread_cond_broadcast(&l->cv_done);
            snprintf(l->fatal_msg, sizeof(l->fatal_msg), "bad image %.900s (--strict): %.100s", name, err.msg);
        }
        pthread_mutex_unlock(&l->mu);
        /* Evaluation scores every image once: another image in its place would be scored twice. */
        if (l->cfg.strict || !l->cfg.train)
            break;
    }
    /* Nothing readable among 16 tries (training), or an unreadable evaluation image: a black image
     * keeps the batch shape. Evaluation leaves it unscored (DLT_LABEL_UNSCORED), the count says so;
     * training stops before the batch is used, so that no label of ours enters the loss (only a data
     * set mostly unreadable gets this far: --max-bad-share stops it sooner). */
    memset(slot->images + (size_t)j * img, 0, img);
    slot->labels[j] = l->cfg.train ? 0 : DLT_LABEL_UNSCORED;
    if (l->cfg.train && !l->cfg.strict) {
        pthread_mutex_lock(&l->mu);
        if (!l->fatal || l->fatal_seq >= 0) {
            l->fatal = 1;
            l->fatal_seq = -1;
            snprintf(l->fatal_msg, sizeof(l->fatal_msg),
                     "16 images in a row of %.300s could not be read for one place of a batch (%lld distinct "
                     "unreadable files so far; first: %.500s): the data set is mostly unreadable (permissions? "
                     "neither JPEG nor PNG?)",
                     dlt_dataset_root(l->ds), (long long)l->known, l->nfirst ? l->first_bad[0] : "?");
            pthread_cond_broadcast(&l->cv_done);
        }
        pthread_mutex_unlock(&l->mu);
    }
}

static void *_worker(void *arg)
{
    dlt_loader *l = arg;
    dlt_decoder *dec = dlt_decoder_create();
    uint8_t *buf = NULL;
    size_t cap = 0;
    pthread_mutex_lock(&l->mu);
    if (!dec) {
        l->fatal = 1;
        l->fatal_seq = -1;
        snprintf(l->fatal_msg, sizeof(l->fatal_msg), "cannot create a JPEG decoder");
        pthread_cond_broadcast(&l->cv_done);
    }
    while (!l->stop && dec) {
        if (l->spe == 0) { /* this rank has no image (fewer images than ranks): nothing to prepare */
            pthread_cond_wait(&l->cv_work, &l->mu);
            continue;
        }
        int64_t task = l->next_task, seq = task / l->cfg.batch;
        int j = (int)(task % l->cfg.batch);
        _slot *slot = &l->slots[seq % l->cfg.depth];
        /* The ring is full: wait until the trainer takes the batch this slot still holds. */
        if (seq >= l->released + l->cfg.depth || (slot->seq != seq && slot->seq != -1)) {
            pthread_cond_wait(&l->cv_work, &l->mu);
            continue;
        }
        if (slot->seq == -1) {
            slot->seq = seq;
            slot->done = 0;
        }
        l->next_task++;
        pthread_mutex_unlock(&l->mu);
        _produce(l, dec, &buf, &cap, seq, j, slot);
        pthread_mutex_lock(&l->mu);
        if (++slot->done == l->cfg.batch)
            pthread_cond_broadcast(&l->cv_done);
    }
    pthread_mutex_unlock(&l->mu);
    free(buf);
    dlt_decoder_destroy(dec);
    return NULL;
}

int dlt_loader_start(dlt_loader *l, int64_t epoch, int64_t step)
{
    l->start_seq = epoch * l->spe + step;
    l->consumed = l->start_seq;
    l->released = l->start_seq;
    l->next_task = l->start_seq * l->cfg.batch;
    for (int i = 0; i < l->cfg.workers; i++) {
        /* pthread_create returns its error; errno is not set */
        int e = pthread_create(&l->threads[i], NULL, _worker, l);
        if (e != 0)
            return -e;
        l->nthreads++;
    }
    l->started = 1;
    return 0;
}

int dlt_loader_acquire(dlt_loader *l, const uint8_t **images, const int32_t **labels, dlt_err *err)
{
    int64_t seq;
    _slot *slot;
    if (l->spe == 0)
        return dlt_fail(err, -EINVAL, "rank %d has no images of %s to read (fewer images than ranks)", l->cfg.rank,
                        dlt_dataset_root(l->ds));
    pthread_mutex_lock(&l->mu);
    seq = l->consumed;
    if (seq >= l->released + l->cfg.depth) {
        pthread_mutex_unlock(&l->mu);
        return dlt_fail(err, -EBUSY, "all %d batches of the ring are held: release one first", l->cfg.depth);
    }
    slot = &l->slots[seq % l->cfg.depth];
#define FATAL_NOW(l) ((l)->fatal && ((l)->fatal_seq < 0 || (l)->fatal_seq <= seq))
    while (!FATAL_NOW(l) && !(slot->seq == seq && slot->done == l->cfg.batch))
        pthread_cond_wait(&l->cv_done, &l->mu);
    if (FATAL_NOW(l)) {
#undef FATAL_NOW
        dlt_fail(err, -EIO, "%s", l->fatal_msg);
        pthread_mutex_unlock(&l->mu);
        return -EIO;
    }
    l->consumed++;
    pthread_mutex_unlock(&l->mu);
    *images = slot->images;
    *labels = slot->labels;
    l->last_valid = _valid_in(l, seq);
    return 0;
}

void dlt_loader_release(dlt_loader *l)
{
    pthread_mutex_lock(&l->mu);
    if (l->released < l->consumed) {
        l->slots[l->released % l->cfg.depth].seq = -1;
        l->released++;
        pthread_cond_broadcast(&l->cv_work);
    }
    pthread_mutex_unlock(&l->mu);
}

int dlt_loader_next(dlt_loader *l, uint8_t *images, int32_t *labels, dlt_err *err)
{
    const uint8_t *im;
    const int32_t *lb;
    int rc = dlt_loader_acquire(l, &im, &lb, err);
    if (rc)
        return rc;
    memcpy(images, im, (size_t)l->cfg.batch * l->cfg.out * l->cfg.out * 3);
    memcpy(labels, lb, sizeof(int32_t) * (size_t)l->cfg.batch);
    dlt_loader_release(l);
    return 0;
}

void dlt_loader_destroy(dlt_loader *l)
{
    if (!l)
        return;
    if (l->started) {
        pthread_mutex_lock(&l->mu);
        l->stop = 1;
        pthread_cond_broadcast(&l->cv_work);
        pthread_mutex_unlock(&l->mu);
        for (int i = 0; i < l->nthreads; i++)
            pthread_join(l->threads[i], NULL);
    }
    if (l->slots)
        for (int s = 0; s < l->cfg.depth; s++) {
            if (l->cfg.alloc && l->slots[s].images)
                l->cfg.release(l->cfg.alloc_arg, l->slots[s].images);
            else
                free(l->slots[s].images);
            free(l->slots[s].labels);
        }
    if (l->slots) {
        pthread_mutex_destroy(&l->mu);
        pthread_cond_destroy(&l->cv_work);
        pthread_cond_destroy(&l->cv_done);
    }
    free(l->slots);
    free(l->reported);
    free(l->renamed);
    free(l->fresh);
    for (int i = 0; i < l->nheld; i++)
        free(l->held[i].line);
    free(l->held);
    free(l->threads);
    dlt_sampler_free(&l->sampler);
    free(l);
}
