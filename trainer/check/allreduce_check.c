/* SPDX-License-Identifier: Apache-2.0 */
/* allreduce_check: the sweep. Each size: one all-reduce of fresh data checked element by element
 * against the exact sum, then a timed loop (the values grow, unchecked, as in nccl-tests). */
#include "config.h"

#include "trainer/check/allreduce_check.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/status.h"
#include "trainer/backend/cuda_module.h"
#include "trainer/comm/agree.h"

double dlt_ar_busbw(double algbw, int n)
{
    return n > 1 ? algbw * 2.0 * (n - 1) / n : 0.0;
}

float dlt_ar_value(int rank, size_t i)
{
    return (float)((i + 3u * (size_t)rank) % 8u) + 1.0f;
}

double dlt_ar_expected(int n, size_t i)
{
    double s = 0;
    for (int r = 0; r < n; r++)
        s += dlt_ar_value(r, i);
    return s;
}

/* Fewer repetitions for big messages: about 64 MiB moved per size, 2..20 times. */
static int _iters(size_t bytes)
{
    size_t it = ((size_t)64 << 20) / bytes;
    return it < 2 ? 2 : it > 20 ? 20 : (int)it;
}

/* One all-reduce of count floats in buf (host), or iters of them on the device (NCCL). */
static int _reduce(dlt_comm *c, float *buf, size_t count, int iters, int check, double *seconds)
{
    double t0;
    (void)check; /* the host path checks what it reduced in place */
    if (c->ops->nccl && c->ops->nccl(c)) {
        dlt_err why = DLT_ERR_INIT;
        const dlt_cuda_module *m = dlt_cuda_module_get(&why); /* open: the communicator is NCCL's */
        if (!m)
            return -ENOTSUP;
        return m->allreduce_run(c, check ? buf : NULL, check ? buf : NULL, count, iters, seconds);
    }
    t0 = dlt_now();
    for (int i = 0; i < iters; i++) {
        int rc = c->ops->allreduce_sum(c, buf, count, DLT_DTYPE_F32);
        if (rc)
            return rc;
    }
    *seconds = dlt_now() - t0;
    return 0;
}

static int _point_iters(size_t bytes, int max_iters)
{
    return max_iters > 0 && max_iters < _iters(bytes) ? max_iters : _iters(bytes);
}

/* What each rank tells the others after a size: its time per all-reduce, the wrong elements it
 * saw, and (rank 0, under a budget) the seconds since the budget began, so that every rank takes
 * the slowest time, the total of wrong elements and rank 0's clock from the same records. */
typedef struct {
    double seconds, wrong, elapsed;
} point_record;

int dlt_ar_sweep(dlt_comm *c, size_t min_bytes, size_t max_bytes, int max_iters, dlt_ar_point *pts, int maxpts,
                 int *npts, dlt_ar_budget *budget)
{
    size_t maxcount = max_bytes / sizeof(float) < 2 ? 2 : max_bytes / sizeof(float);
    float *buf = malloc(maxcount * sizeof(float));
    dlt_agreement a = dlt_agreement_of_comm(c);
    double expect[8];
    int rc = 0, np = 0;
    *npts = 0;
    if (!buf)
        return dlt_fail(c->err, -ENOMEM, "all-reduce check: no memory for %zu bytes", max_bytes);
    for (int i = 0; i < 8; i++) /* the data has period 8 */
        expect[i] = dlt_ar_expected(c->size, (size_t)i);
    for (size_t bytes = min_bytes < 8 ? 8 : min_bytes; bytes <= max_bytes && np < maxpts && rc == 0; bytes *= 2) {
        size_t count = bytes / sizeof(float) < 2 ? 2 : bytes / sizeof(float);
        dlt_ar_point *p = &pts[np];
        double secs = 0, wrong = 0, elapsed = 0;
        memset(p, 0, sizeof(*p));
        p->bytes = count * sizeof(float);
        p->iters = _point_iters(p->bytes, max_iters);
        for (size_t i = 0; i < count; i++)
            buf[i] = dlt_ar_value(c->rank, i);
        if ((rc = _reduce(c, buf, count, 1, 1, &secs)) != 0)
            break;
        for (size_t i = 0; i < count; i++)
            wrong += (double)buf[i] != expect[i % 8];
        /* Warm-up, then the timed loop. */
        if ((rc = _reduce(c, buf, count, 1, 0, &secs)) != 0 || (rc = _reduce(c, buf, count, p->iters, 0, &secs)) != 0)
            break;
        {
            point_record mine = {secs / p->iters, wrong, c->rank == 0 && budget ? dlt_now() - budget->t0 : 0}, *all;
            double total_wrong = 0;
            if ((rc = dlt_agree_gather(&a, &mine, sizeof(mine), (void **)&all, c->err)) != 0)
                break;
            for (int r = 0; r < c->size; r++) {
                if (all[r].seconds > p->seconds)
                    p->seconds = all[r].seconds;
                total_wrong += all[r].wrong;
            }
            elapsed = all[0].elapsed;
            free(all);
            p->wrong = (long long)total_wrong;
        }
        p->algbw = p->seconds > 0 ? (double)p->bytes / p->seconds / 1e9 : 0;
        p->busbw = dlt_ar_busbw(p->algbw, c->size);
        np++;
        if (budget) {
            size_t next = bytes * 2;
            double projected = 2 * p->seconds * (_point_iters(next, max_iters) + 2);
            budget->elapsed = elapsed;
            if (budget->on_point)
                budget->on_point(p, budget->elapsed, budget->arg);
            if (budget->seconds > 0 && next <= max_bytes && np < maxpts &&
                budget->elapsed + projected > budget->seconds) {
                budget->cut = 1;
                break;
            }
        }
    }
    free(buf);
    *npts = np;
    return rc;
}

/* What a group's first rank tells every world rank after a group point: its slot of vec and the
 * busbw measured (-1: a wrong sum); slot -1 from every other rank. */
typedef struct {
    int64_t slot;
    double busbw;
} group_record;

/* One point (the isolation size) on a sub-communicator; its busbw lands in slot of every rank's
 * vec (gathered over the world: only the group's first rank writes). Every world rank calls it. */
int dlt_ar_group_point(dlt_comm *world, int color, int key, size_t bytes, int iters, double *vec, int slot, int nslots)
{
    dlt_agreement a = dlt_agreement_of_comm(world);
    group_record mine = {-1, 0}, *all;
    dlt_comm *sub = NULL;
    dlt_ar_point p;
    int np = 0, rc;
    memset(vec, 0, (size_t)nslots * sizeof(double));
    if ((rc = world->ops->split(world, color, key, &sub)) != 0)
        return rc;
    if (sub && sub->size > 1) {
        rc = dlt_ar_sweep(sub, bytes, bytes, iters, &p, 1, &np, NULL);
        if (rc == 0 && np == 1 && sub->rank == 0 && slot >= 0 && slot < nslots)
            mine = (group_record){slot, p.wrong > 0 ? -1 : p.busbw}; /* -1: a wrong sum */
    }
    if (rc) {
        /* A failed collective on the sub-communicator: a peer may be gone, and destroying it would
         * wait for that peer (NCCL flushes outstanding work first): it is aborted instead. */
        dlt_comm_discard(sub);
        return rc;
    }
    if (sub)
        sub->ops->destroy(sub);
    if ((rc = dlt_agree_gather(&a, &mine, sizeof(mine), (void **)&all, world->err)) != 0)
        return rc;
    for (int k = 0; k < world->size; k++)
        if (all[k].slot >= 0 && all[k].slot < nslots)
            vec[all[k].slot] = all[k].busbw;
    free(all);
    return 0;
}
