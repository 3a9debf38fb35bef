/* SPDX-License-Identifier: Apache-2.0 */
/* rng: a small counter-friendly PRNG (PCG32). No generator state is checkpointed: every stream is
 * seeded where it is used from the run's seed and a position (initialisation; each epoch's shuffle;
 * an image's augmentation by epoch and index, its synthetic pixels by index), so a resumed run,
 * which knows the seed and its step, draws exactly the numbers the uninterrupted one would have. */
#ifndef DLT_RNG_H
#define DLT_RNG_H

#include <math.h>
#include <stdint.h>

typedef struct {
    uint64_t state, inc;
} dlt_rng;

static inline uint32_t dlt_rng_u32(dlt_rng *r)
{
    uint64_t old = r->state;
    uint32_t xs, rot;
    r->state = old * 6364136223846793005ULL + r->inc;
    xs = (uint32_t)(((old >> 18u) ^ old) >> 27u);
    rot = (uint32_t)(old >> 59u);
    return (xs >> rot) | (xs << ((-rot) & 31));
}

static inline void dlt_rng_seed(dlt_rng *r, uint64_t seed, uint64_t stream)
{
    r->state = 0;
    r->inc = (stream << 1u) | 1u;
    (void)dlt_rng_u32(r);
    r->state += seed;
    (void)dlt_rng_u32(r);
}

/* Uniform in [0, 1). */
static inline float dlt_rng_uniform(dlt_rng *r)
{
    return (float)(dlt_rng_u32(r) >> 8) * (1.0f / 16777216.0f);
}

/* Uniform integer in [0, n). */
static inline uint32_t dlt_rng_below(dlt_rng *r, uint32_t n)
{
    return (uint32_t)(((uint64_t)dlt_rng_u32(r) * n) >> 32);
}

static inline float dlt_rng_normal(dlt_rng *r)
{
    /* Box-Muller; u1 in (0, 1]. */
    float u1 = 1.0f - dlt_rng_uniform(r), u2 = dlt_rng_uniform(r);
    return sqrtf(-2.0f * logf(u1)) * cosf(6.28318530718f * u2);
}

#endif
