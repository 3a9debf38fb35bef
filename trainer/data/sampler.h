/* SPDX-License-Identifier: Apache-2.0 */
/* sampler: DistributedSampler order: one permutation per epoch, the same on every rank (seeded by
 * seed and epoch), rank r takes positions r, r + world, r + 2 world, ...; the remainder that does
 * not fill every rank is dropped, so each image is seen at most once per epoch across ranks. The
 * exact variant (evaluation) keeps the remainder, in order: every image exactly once. */
#ifndef DLT_SAMPLER_H
#define DLT_SAMPLER_H

#include <stdint.h>

typedef struct {
    int64_t size;
    uint64_t seed;
    int rank, world;
    int shuffle;
    int exact; /* keep the remainder: ranks may differ by one image, and have none */
    int64_t *perm;
    int64_t perm_epoch;
} dlt_sampler;

int dlt_sampler_init(dlt_sampler *s, int64_t size, uint64_t seed, int rank, int world, int shuffle);
/* Every image exactly once across ranks, in order (evaluation): rank r takes positions r,
 * r + world, ... below size; a rank may have none when size < world. */
int dlt_sampler_init_exact(dlt_sampler *s, int64_t size, int rank, int world);
void dlt_sampler_free(dlt_sampler *s);
/* Samples one rank takes per epoch. */
int64_t dlt_sampler_per_rank(const dlt_sampler *s);
/* The dataset index at position k of this rank's share of epoch e. */
int64_t dlt_sampler_index(dlt_sampler *s, int64_t epoch, int64_t k);

#endif
