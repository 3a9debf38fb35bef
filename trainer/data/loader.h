/* SPDX-License-Identifier: Apache-2.0 */
/* loader: batches of decoded, augmented images from a dataset, prepared ahead by a pool of worker
 * threads into a bounded ring of batches, in DistributedSampler order. Each image's augmentation
 * is drawn from (seed, epoch, index), so batches do not depend on thread timing and a resumed run
 * sees the same images. A bad image is counted, reported once with its name and reason, and
 * replaced by another of the shard (or, with strict, ends the run). Training takes full batches
 * only (DistributedSampler, drop_last); evaluation scores every image exactly once: each rank's
 * last batch may be short, padded with blank images that its valid count leaves out. */
#ifndef DLT_LOADER_H
#define DLT_LOADER_H

#include <pthread.h>
#include <stdint.h>

#include "common/status.h"
#include "trainer/data/dataset.h"
#include "trainer/data/sampler.h"

typedef struct dlt_loader dlt_loader;

typedef struct {
    int batch, out; /* images per batch, output side */
    int train;      /* random crops and flips, shuffled order; else centre crops in order */
    uint64_t seed;
    int rank, world;
    int workers;          /* threads; <= 0: the CPUs this process may use, minus one, at least 1 */
    int depth;            /* batches in the ring, held by the trainer or prepared ahead (default 4) */
    int strict;           /* a bad image ends the run */
    double max_bad_share; /* training: more distinct bad files than this share of the data set
                           * ends the run (0: no bound) */
    int defer_reports;    /* several ranks: a bad file's line waits for dlt_loader_bad_report (said once) */
    int no_augment;       /* training order, but the evaluation transform (no random crop or flip) */
    int verbose;          /* a line for each file whose content is not what its name says, when this
                           * loader first reads it */
    /* Where the ring's images live (NULL: malloc): the backend's host memory, pinned on a GPU, so
     * a batch is decoded once and copied to the device straight from its slot. */
    void *(*alloc)(void *arg, size_t bytes);
    void (*release)(void *arg, void *p);
    void *alloc_arg;
} dlt_loader_config;

/* Fails with a usage message (image count, batch, ranks, the fix) when training would have no
 * full batch per rank. */
int dlt_loader_create(dlt_loader **out, dlt_dataset *ds, const dlt_loader_config *cfg, dlt_err *err);
/* Whether count images give each of ranks ranks a full batch: 0, or -EINVAL with a message naming
 * what (where the images come from), the image count, the batch, the ranks and the fix. */
int dlt_loader_check_fit(int64_t count, int batch, int ranks, const char *what, dlt_err *err);
/* Batches per epoch for this rank (evaluation: the last may be short; 0 when this rank has no
 * image because there are fewer images than ranks). */
int64_t dlt_loader_steps_per_epoch(const dlt_loader *l);
/* Images of this rank per epoch. */
int64_t dlt_loader_images_per_epoch(const dlt_loader *l);
/* Positions the stream at (epoch, step) and starts the workers; call once before next(). */
int dlt_loader_start(dlt_loader *l, int64_t epoch, int64_t step);
/* The label of an evaluation image that could not be read: no class (softmax_xent scores no hit
 * and counts it as out of range), left out of the image count. */
#define DLT_LABEL_UNSCORED (-1)

/* The next batch (uint8 NHWC images, labels). Blocks until ready. Returns 0 or -EIO (err). */
int dlt_loader_next(dlt_loader *l, uint8_t *images, int32_t *labels, dlt_err *err);
/* The next batch without a copy: pointers into its ring slot, which stays the caller's until
 * dlt_loader_release (batches are released in the order they were acquired). */
int dlt_loader_acquire(dlt_loader *l, const uint8_t **images, const int32_t **labels, dlt_err *err);
void dlt_loader_release(dlt_loader *l);
/* How many of the batch next() returned last are real images (the first ones); the batch size
 * except for the short last batch of an evaluation. Only these are to be scored. */
int dlt_loader_last_valid(const dlt_loader *l);
/* Bad-image events: a file met again (next epoch) counts again. */
int64_t dlt_loader_bad_images(const dlt_loader *l);

/* Bad files, once per run across ranks. Each rank logs a bad file the first time it meets one
 * that it does not know of. To make that once per run over all ranks, the training loop shares
 * what each rank found: take() hands out (and forgets) the dataset indices this rank found bad
 * since the last take, at most max; merge() adds indices other ranks found, which this rank then
 * skips without logging them again. bad_files() is the number of distinct bad files this rank
 * knows of: after a last exchange, the run's total, the same on every rank. */
int dlt_loader_bad_take(dlt_loader *l, int64_t *idx, int max);
void dlt_loader_bad_merge(dlt_loader *l, const int64_t *idx, int n);
int64_t dlt_loader_bad_files(dlt_loader *l);
/* Files read by their content although their name says another format (a PNG named .JPEG, a JPEG
 * named .png), distinct files this rank knows of: found here, or by other ranks through the same
 * take/merge exchange as bad files (their indices travel tagged with DLT_LOADER_RENAMED). */
#define DLT_LOADER_RENAMED (1ll << 62)
#define DLT_LOADER_RENAMED_JPEG (1ll << 61) /* with DLT_LOADER_RENAMED: the content is JPEG, else PNG */
void dlt_loader_renamed(dlt_loader *l, int64_t *png_named_jpeg, int64_t *jpeg_named_png);
/* With defer_reports: prints the line this rank holds for bad file idx (the ranks chose this one
 * to say it), or every line it still holds (a rank stopping on its own). */
void dlt_loader_bad_report(dlt_loader *l, int64_t idx);
void dlt_loader_bad_report_all(dlt_loader *l);
void dlt_loader_destroy(dlt_loader *l);

#endif
