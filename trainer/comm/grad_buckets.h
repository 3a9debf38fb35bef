/* SPDX-License-Identifier: Apache-2.0 */
/* grad_buckets: the flat gradient buffer cut into contiguous all-reduce buckets, from the top
 * (backward finishes the last layers' gradients first), and which buckets a backward position
 * has completed. Pure planning: the gradient reducer launches the reductions. */
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

/* Cuts n elements into buckets of at most cap_elems (>= 1), boundaries aligned down to `align`
 * elements (a power of two; the last bucket takes the rest). Returns 0 or -ENOMEM/-EINVAL. */
int dlt_grad_buckets_plan(dlt_grad_buckets *bk, size_t n, size_t cap_elems, size_t align);
void dlt_grad_buckets_free(dlt_grad_buckets *bk);

/* Backward has finished every gradient at offsets >= ready_lo: returns how many buckets (from
 * b[launched]) are now complete and not yet launched, and marks them launched. */
int dlt_grad_buckets_take(dlt_grad_buckets *bk, size_t ready_lo);

static inline void dlt_grad_buckets_reset(dlt_grad_buckets *bk)
{
    bk->launched = 0;
}

#endif
