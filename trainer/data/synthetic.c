/* SPDX-License-Identifier: Apache-2.0 */
/* synthetic: generated images with DistributedSampler sharding. */
#include "config.h"

#include "trainer/data/synthetic.h"

#include <errno.h>
#include <string.h>

#include "common/rng.h"

static int _setup(dlt_synthetic *s, int image, int classes, int64_t size, uint64_t seed, uint64_t class_seed,
                  int learnable, int rank, int world, int exact)
{
    memset(s, 0, sizeof(*s));
    if (image < 8 || classes < 2)
        return -EINVAL;
    s->image = image;
    s->classes = classes;
    s->size = size;
    s->seed = seed;
    s->class_seed = class_seed;
    s->learnable = learnable;
    s->rank = rank;
    s->world = world;
    s->exact = exact;
    return exact ? dlt_sampler_init_exact(&s->sampler, size, rank, world)
                 : dlt_sampler_init(&s->sampler, size, seed, rank, world, 1);
}

int dlt_synthetic_init(dlt_synthetic *s, int image, int classes, int64_t size, uint64_t seed, uint64_t class_seed,
                       int learnable, int rank, int world)
{
    return _setup(s, image, classes, size, seed, class_seed, learnable, rank, world, 0);
}

int dlt_synthetic_init_exact(dlt_synthetic *s, int image, int classes, int64_t size, uint64_t seed, uint64_t class_seed,
                             int learnable, int rank, int world)
{
    return _setup(s, image, classes, size, seed, class_seed, learnable, rank, world, 1);
}

int dlt_synthetic_valid(const dlt_synthetic *s, int64_t step, int batch)
{
    int64_t left = dlt_sampler_per_rank(&s->sampler) - step * batch;
    return left < 0 ? 0 : left < batch ? (int)left : batch;
}

void dlt_synthetic_free(dlt_synthetic *s)
{
    dlt_sampler_free(&s->sampler);
    memset(s, 0, sizeof(*s));
}

int64_t dlt_synthetic_steps_per_epoch(const dlt_synthetic *s, int batch)
{
    int64_t n = dlt_sampler_per_rank(&s->sampler);
    return s->exact ? (n + batch - 1) / batch : n / batch;
}

int64_t dlt_synthetic_index(dlt_synthetic *s, int64_t epoch, int64_t k)
{
    return dlt_sampler_index(&s->sampler, epoch, k);
}

void dlt_synthetic_sample(const dlt_synthetic *s, int64_t idx, uint8_t *img, int32_t *label)
{
    dlt_rng r, cls;
    int n = s->image, k = (int)(idx % s->classes);
    size_t total = (size_t)n * n * 3, p = 0;
    uint32_t mask = s->learnable ? 0x3f3f3f3fu : 0xffffffffu;
    dlt_rng_seed(&r, s->seed, (uint64_t)idx * 2 + 1);
    *label = k;
    /* Four pixel bytes a draw (one a draw made the generator, 4,600 images/s at 224x224 on one
     * core, slower than a GPU trains: bench --feed measured it, not the input path); byte by
     * byte, so the images are the same on any byte order. */
    for (; p + 4 <= total; p += 4) {
        uint32_t v = dlt_rng_u32(&r) & mask;
        img[p] = (uint8_t)v;
        img[p + 1] = (uint8_t)(v >> 8);
        img[p + 2] = (uint8_t)(v >> 16);
        img[p + 3] = (uint8_t)(v >> 24);
    }
    for (; p < total; p++)
        img[p] = (uint8_t)(dlt_rng_u32(&r) & mask);
    if (!s->learnable)
        return;
    /* The class's square: colour and place fixed per class, jittered per sample. */
    {
        dlt_rng_seed(&cls, s->class_seed ^ 0xc1a55ull, (uint64_t)k + 7);
        int side = n / 4, span = n - side - 4;
        int x0 = 2 + (int)dlt_rng_below(&cls, (uint32_t)span), y0 = 2 + (int)dlt_rng_below(&cls, (uint32_t)span);
        uint8_t col[3] = {(uint8_t)(96 + dlt_rng_below(&cls, 160)), (uint8_t)(96 + dlt_rng_below(&cls, 160)),
                          (uint8_t)(96 + dlt_rng_below(&cls, 160))};
        x0 += (int)dlt_rng_below(&r, 5) - 2;
        y0 += (int)dlt_rng_below(&r, 5) - 2;
        for (int y = y0; y < y0 + side; y++)
            for (int x = x0; x < x0 + side; x++)
                if (x >= 0 && y >= 0 && x < n && y < n)
                    for (int c = 0; c < 3; c++)
                        img[((size_t)y * n + x) * 3 + c] = col[c];
    }
}

int dlt_synthetic_batch(dlt_synthetic *s, int64_t epoch, int64_t step, int batch, uint8_t *images, int32_t *labels)
{
    size_t img = (size_t)s->image * s->image * 3;
    int valid = s->exact ? dlt_synthetic_valid(s, step, batch) : batch;
    for (int b = 0; b < batch; b++) {
        if (b >= valid) { /* padding of a short last batch: not scored */
            memset(images + (size_t)b * img, 0, img);
            labels[b] = 0;
            continue;
        }
        int64_t idx = dlt_synthetic_index(s, epoch, step * batch + b);
        dlt_synthetic_sample(s, idx, images + (size_t)b * img, &labels[b]);
    }
    return 0;
}
