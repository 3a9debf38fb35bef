/* SPDX-License-Identifier: Apache-2.0 */
/* grad_buckets: the flat gradient buffer cut into contiguous all-reduce buckets, and which buckets
 * a backward position has completed. Pure planning: the gradient reducer launches the reductions.
 *
 * Backward finishes the top (the last layers, the highest offsets) first and the stem last, so the
 * bottom bucket's reduction can start only when backward is over: all of it is exposed. Buckets
 * are therefore cut from the bottom, growing: the bottom one small (bottom_elems), each above it at
 * most DLT_BUCKET_GROWTH times the one below, up to cap_elems; the top one takes what is left. For
 * ResNet-50 at 25 MiB the bottom bucket was the remainder of cutting from the top, 5.9 M floats
 * (stem, layer1, layer2, part of layer3), exposed whole; now it is 1 MiB, and the one above it
 * (4 MiB) is ready while layer1's backward still runs. */
#ifndef DLT_GRAD_BUCKETS_H
#define DLT_GRAD_BUCKETS_H

#include <stddef.h>

typedef struct {
    size_t lo, hi; /* element range [lo, hi) of the flat buffer */
} dlt_grad_bucket;

typedef struct {
    int n;
    dlt_grad_bucket *b; /* b[0] is the top (highest offsets): reduced first */
    int launched;       /* buckets handed to the communicator in this step */
} dlt_grad_buckets;

/* Each bucket above the bottom one is at most this many times the one below it. */
#define DLT_BUCKET_GROWTH 4

/* Cuts n elements into buckets from the bottom: the first (lowest) of bottom_elems, each next one
 * DLT_BUCKET_GROWTH times the previous, at most cap_elems (>= 1), boundaries aligned up to `align`
 * elements (a power of two; the top bucket takes the rest, at most cap_elems too).
 * bottom_elems > cap_elems is taken as cap_elems. Returns 0 or -ENOMEM/-EINVAL. */
int dlt_grad_buckets_plan(dlt_grad_buckets *bk, size_t n, size_t cap_elems, size_t bottom_elems, size_t align);
void dlt_grad_buckets_free(dlt_grad_buckets *bk);

/* Backward has finished every gradient at offsets >= ready_lo: returns how many buckets (from
 * b[launched]) are now complete and not yet launched, and marks them launched. */
int dlt_grad_buckets_take(dlt_grad_buckets *bk, size_t ready_lo);

static inline void dlt_grad_buckets_reset(dlt_grad_buckets *bk)
{
    bk->launched = 0;
}

#endif
