/* SPDX-License-Identifier: Apache-2.0 */
/* sampler: DistributedSampler order. */
#include "config.h"

#include "trainer/data/sampler.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/rng.h"

int dlt_sampler_init(dlt_sampler *s, int64_t size, uint64_t seed, int rank, int world, int shuffle)
{
    memset(s, 0, sizeof(*s));
    if (size < world || world < 1 || rank < 0 || rank >= world)
        return -EINVAL;
    s->size = size;
    s->seed = seed;
    s->rank = rank;
    s->world = world;
    s->shuffle = shuffle;
    s->perm_epoch = -1;
    s->perm = malloc((size_t)size * sizeof(int64_t));
    return s->perm ? 0 : -ENOMEM;
}

int dlt_sampler_init_exact(dlt_sampler *s, int64_t size, int rank, int world)
{
    memset(s, 0, sizeof(*s));
    if (size < 1 || world < 1 || rank < 0 || rank >= world)
        return -EINVAL;
    s->size = size;
    s->rank = rank;
    s->world = world;
    s->exact = 1;
    s->perm_epoch = -1;
    s->perm = malloc((size_t)size * sizeof(int64_t));
    return s->perm ? 0 : -ENOMEM;
}

void dlt_sampler_free(dlt_sampler *s)
{
    free(s->perm);
    memset(s, 0, sizeof(*s));
}

int64_t dlt_sampler_per_rank(const dlt_sampler *s)
{
    if (s->exact)
        return s->size > s->rank ? (s->size - s->rank + s->world - 1) / s->world : 0;
    return s->size / s->world;
}

int64_t dlt_sampler_index(dlt_sampler *s, int64_t epoch, int64_t k)
{
    if (s->perm_epoch != epoch) {
        for (int64_t i = 0; i < s->size; i++)
            s->perm[i] = i;
        if (s->shuffle) {
            dlt_rng r;
            dlt_rng_seed(&r, s->seed ^ 0x9e3779b97f4a7c15ull, (uint64_t)epoch + 1);
            for (int64_t i = s->size - 1; i > 0; i--) {
                int64_t j = (int64_t)(((uint64_t)dlt_rng_u32(&r) << 32 | dlt_rng_u32(&r)) % (uint64_t)(i + 1));
                int64_t t = s->perm[i];
                s->perm[i] = s->perm[j];
                s->perm[j] = t;
            }
        }
        s->perm_epoch = epoch;
    }
    return s->perm[s->rank + k * s->world];
}
