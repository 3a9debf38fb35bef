/* SPDX-License-Identifier: Apache-2.0 */
/* source: where a run's batches come from: one interface over real images (a dataset read by the
 * threaded loader) and the synthetic generator, so the loops never ask which it is. */
#ifndef DLT_SOURCE_H
#define DLT_SOURCE_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "trainer/data/dataset.h"
#include "trainer/data/loader.h"
#include "trainer/data/synthetic.h"

/* Batches a source holds for its user at most (acquired, not yet released) is this minus two. */
#define DLT_SOURCE_RING 4

typedef struct {
    dlt_dataset *ds; /* real images, or NULL */
    dlt_loader *loader;
    dlt_synthetic synth; /* generated images when ds is NULL */
    int batch;
    int64_t last_step; /* the step acquire() gave last (generated images) */
    char path[4096];   /* what was opened (real images) */
    /* Generated images' ring for dlt_source_acquire (real images use the loader's). */
    void *(*alloc)(void *arg, size_t bytes);
    void (*release)(void *arg, void *p);
    void *alloc_arg;
    uint8_t *ring_images[DLT_SOURCE_RING];
    int32_t *ring_labels[DLT_SOURCE_RING];
    int64_t acquired, released;
    /* Generated images made once per ring slot and handed out again (dlt_source_reuse_generated). */
    int reuse;
    unsigned char generated[DLT_SOURCE_RING];
} dlt_source;

/* Real images at path: an ImageFolder root (labels: a "FILENAME CLASS" file for a flat folder,
 * may be NULL) or a RecordIO .rec; lc says how the loader cuts and transforms them. */
int dlt_source_open_images(dlt_source *s, const char *path, const char *labels, const dlt_loader_config *lc,
                           dlt_err *err);
/* The same over a data set already open (one another rank's list built, folder_list.h); the
 * source owns ds from here, even when this fails. */
int dlt_source_open_dataset(dlt_source *s, dlt_dataset *ds, const char *path, const dlt_loader_config *lc,
                            dlt_err *err);
/* Generated images (see synthetic.h for the arguments); exact: an evaluation set, every image
 * scored once over the ranks. */
int dlt_source_open_synthetic(dlt_source *s, int batch, int image, int classes, int64_t size, uint64_t seed,
                              uint64_t class_seed, int learnable, int rank, int world, int exact, dlt_err *err);
/* Where generated batches are written for dlt_source_acquire (NULL: malloc): the backend's host
 * memory (real images: dlt_loader_config's alloc says it). Before the first acquire. */
void dlt_source_set_allocator(dlt_source *s, void *(*alloc)(void *arg, size_t bytes),
                              void (*release)(void *arg, void *p), void *arg);
void dlt_source_close(dlt_source *s);
/* Generated images only: each ring slot is generated once, the first time it is used, and handed
 * out as it is after that (DLT_SOURCE_RING different batches in turn), so that a throughput
 * measurement of the input path (bench --feed without --data) measures the path, not the
 * generator on the training thread. Not for training: the batches repeat. */
void dlt_source_reuse_generated(dlt_source *s);

/* Classes of a real data set; 0 for generated images (the model's count applies). */
int dlt_source_classes(const dlt_source *s);
int64_t dlt_source_images(const dlt_source *s);
int64_t dlt_source_steps_per_epoch(const dlt_source *s);
/* Positions the stream at (epoch, step); call once before the first acquire. */
int dlt_source_start(dlt_source *s, int64_t epoch, int64_t step, dlt_err *err);
/* The batch of (epoch, step) without a copy: pointers to where it was decoded (or generated),
 * the caller's until dlt_source_release, which gives back the oldest batch still held; at most
 * DLT_SOURCE_RING - 2 are held at a time. */
int dlt_source_acquire(dlt_source *s, int64_t epoch, int64_t step, const uint8_t **images, const int32_t **labels,
                       dlt_err *err);
void dlt_source_release(dlt_source *s);
/* Real images in the batch acquire() gave last: the batch, or fewer in an evaluation's last batch
 * on a rank (every image is scored exactly once; the rest of the batch is padding). */
int dlt_source_last_valid(const dlt_source *s);
/* Unreadable images skipped (and replaced) so far on this rank. */
int64_t dlt_source_bad_images(const dlt_source *s);

#endif
