/* SPDX-License-Identifier: Apache-2.0 */
/* synthetic: generated images for benchmarks and tests, with DistributedSampler sharding.
 * "learnable": each class has its own coloured square on noise, so a small network can learn it;
 * otherwise pure noise with balanced labels (throughput only). Deterministic in (seed, epoch,
 * rank, step): a resumed run sees exactly the batches an uninterrupted one would. */
#ifndef DLT_SYNTHETIC_H
#define DLT_SYNTHETIC_H

#include <stddef.h>
#include <stdint.h>

#include "trainer/data/sampler.h"

typedef struct {
    int image; /* height = width */
    int classes;
    int64_t size;        /* images per epoch, all ranks */
    uint64_t seed;       /* draws samples (and the epoch order) */
    uint64_t class_seed; /* draws each class's pattern: the same for training and validation */
    int learnable;
    int rank, world;
    int exact; /* evaluation: every image once over the ranks, the last batch short */
    dlt_sampler sampler;
} dlt_synthetic;

int dlt_synthetic_init(dlt_synthetic *s, int image, int classes, int64_t size, uint64_t seed, uint64_t class_seed,
                       int learnable, int rank, int world);
void dlt_synthetic_free(dlt_synthetic *s);

/* Evaluation images: every one of the size exactly once over the ranks, in order (a rank's last
 * batch may be short; see dlt_synthetic_valid). */
int dlt_synthetic_init_exact(dlt_synthetic *s, int image, int classes, int64_t size, uint64_t seed, uint64_t class_seed,
                             int learnable, int rank, int world);
/* Real images in batch step (the batch, or fewer in an exact set's last one). */
int dlt_synthetic_valid(const dlt_synthetic *s, int64_t step, int batch);

/* Batches per epoch for one rank with batch size b (drop_last; exact: the last may be short). */
int64_t dlt_synthetic_steps_per_epoch(const dlt_synthetic *s, int batch);

/* The sample index rank takes at position k of epoch e (DistributedSampler order). */
int64_t dlt_synthetic_index(dlt_synthetic *s, int64_t epoch, int64_t k);

/* Fills batch images (uint8 NHWC) and labels for step `step` of epoch `epoch`. */
int dlt_synthetic_batch(dlt_synthetic *s, int64_t epoch, int64_t step, int batch, uint8_t *images, int32_t *labels);

/* One sample by global index (used by the batch function and by tests). */
void dlt_synthetic_sample(const dlt_synthetic *s, int64_t idx, uint8_t *image, int32_t *label);

#endif
