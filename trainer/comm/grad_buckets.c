/* SPDX-License-Identifier: Apache-2.0 */
/* grad_buckets: bucket planning over the flat gradient buffer. */
#include "config.h"

#include "trainer/comm/grad_buckets.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int dlt_grad_buckets_plan(dlt_grad_buckets *bk, size_t n, size_t cap_elems, size_t bottom_elems, size_t align)
{
    size_t lo = 0, size;
    int count = 0, most;
    memset(bk, 0, sizeof(*bk));
    if (n == 0 || cap_elems == 0 || bottom_elems == 0 || align == 0 || (align & (align - 1)))
        return -EINVAL;
    cap_elems = cap_elems < align ? align : cap_elems & ~(align - 1);
    size = bottom_elems > cap_elems ? cap_elems : (bottom_elems + align - 1) & ~(align - 1);
    if (n / cap_elems >= (size_t)1 << 24)
        return -EINVAL; /* a cap this small for this many gradients: millions of launches a step */
    /* at most: the growing ones (a size_t quadruples fewer than 64 times), n / cap full ones, the top */
    most = 64 + (int)(n / cap_elems) + 2;
    bk->b = calloc((size_t)most, sizeof(*bk->b));
    if (!bk->b)
        return -ENOMEM;
    while (lo < n) { /* bottom up; the array is reversed below so that b[0] is the top */
        size_t hi = n - lo <= size ? n : lo + size;
        bk->b[count].lo = lo;
        bk->b[count].hi = hi;
        count++;
        lo = hi;
        size = size > cap_elems / DLT_BUCKET_GROWTH ? cap_elems : size * DLT_BUCKET_GROWTH;
    }
    for (int i = 0; i < count / 2; i++) {
        dlt_grad_bucket t = bk->b[i];
        bk->b[i] = bk->b[count - 1 - i];
        bk->b[count - 1 - i] = t;
    }
    bk->n = count;
    return 0;
}

void dlt_grad_buckets_free(dlt_grad_buckets *bk)
{
    free(bk->b);
    memset(bk, 0, sizeof(*bk));
}

int dlt_grad_buckets_take(dlt_grad_buckets *bk, size_t ready_lo)
{
    int k = 0;
    while (bk->launched + k < bk->n && bk->b[bk->launched + k].lo >= ready_lo)
        k++;
    bk->launched += k;
    return k;
}
