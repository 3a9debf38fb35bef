/* SPDX-License-Identifier: Apache-2.0 */
/* grad_buckets: bucket planning over the flat gradient buffer. */
#include "config.h"

#include "trainer/comm/grad_buckets.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int dlt_grad_buckets_plan(dlt_grad_buckets *bk, size_t n, size_t cap_elems, size_t align)
{
    size_t hi = n;
    int count = 0;
    memset(bk, 0, sizeof(*bk));
    if (n == 0 || cap_elems == 0 || align == 0 || (align & (align - 1)))
        return -EINVAL;
    if (cap_elems < align)
        cap_elems = align;
    bk->b = calloc(n / (cap_elems - cap_elems % align) + 2, sizeof(*bk->b));
    if (!bk->b)
        return -ENOMEM;
    while (hi > 0) {
        size_t lo = hi > cap_elems ? hi - cap_elems : 0;
        lo = (lo + align - 1) & ~(align - 1); /* round up: the bucket stays within cap */
        if (lo >= hi)
            lo = hi > align ? (hi - 1) & ~(align - 1) : 0;
        bk->b[count].lo = lo;
        bk->b[count].hi = hi;
        count++;
        hi = lo;
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
