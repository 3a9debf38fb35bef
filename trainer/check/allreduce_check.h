/* SPDX-License-Identifier: Apache-2.0 */
/* allreduce_check: an all-reduce sweep over message sizes on the trainer's communicator, as
 * nccl-tests' all_reduce_perf reports it (time, algbw, busbw = algbw x 2(n-1)/n), every size's
 * sum checked exactly: float32 small integers, whose sum over the ranks is exact. */
#ifndef DLT_ALLREDUCE_CHECK_H
#define DLT_ALLREDUCE_CHECK_H

#include <stddef.h>

#include "trainer/comm/comm.h"

typedef struct {
    size_t bytes;
    int iters;
    double seconds;  /* per all-reduce: the slowest rank's mean */
    double algbw;    /* GB/s: bytes / seconds / 1e9 */
    double busbw;    /* GB/s: algbw * 2 (n - 1) / n */
    long long wrong; /* elements of the checked result that differ from the exact sum (summed over ranks) */
} dlt_ar_point;

/* A time budget for a sweep, in numbers every rank agrees on: rank 0's clock travels with each
 * size's result, so that every rank stops before the same size. */
typedef struct {
    double t0;      /* rank 0's dlt_now() when the budget started (the other ranks' are not read) */
    double seconds; /* > 0: no size starts whose projected time would end past t0 + seconds */
    /* Called on every rank after each size, with rank 0's seconds since t0 (may be NULL). */
    void (*on_point)(const dlt_ar_point *p, double elapsed, void *arg);
    void *arg;
    int cut;        /* out: sizes were left out for the budget */
    double elapsed; /* out: rank 0's seconds since t0 after the last size */
} dlt_ar_budget;

/* nccl-tests' bus bandwidth of an all-reduce over n ranks. */
double dlt_ar_busbw(double algbw, int n);
/* What rank r of any size contributes at element i, and the exact sum over n ranks. */
float dlt_ar_value(int rank, size_t i);
double dlt_ar_expected(int n, size_t i);

/* Sizes min_bytes, 2 min_bytes, ... up to max_bytes (rounded down to whole float32 elements, at
 * least two); at most maxpts points; max_iters (> 0) bounds the timed all-reduces per size (else
 * 20 for small sizes, fewer from 4 MiB, at least 2). budget (may be NULL) ends the sweep early: the
 * next size is projected at twice the last one's time per all-reduce, for its timed loop, the
 * warm-up and the checked one. Every rank of c calls it with the same arguments. Returns 0 (each
 * point filled, agreed over the ranks) or a negative status with c->err filled. */
int dlt_ar_sweep(dlt_comm *c, size_t min_bytes, size_t max_bytes, int max_iters, dlt_ar_point *pts, int maxpts,
                 int *npts, dlt_ar_budget *budget);

/* One point of bytes (iters all-reduces) on the sub-communicator of world split by color and key;
 * its busbw lands in slot of every rank's vec (nslots doubles, gathered over the world: only the
 * group's first rank writes; -1 marks a wrong sum; the other slots 0). Every world rank calls it. A failure on the
 * sub-communicator discards it (dlt_comm_discard: no wait for a lost peer) and is returned. */
int dlt_ar_group_point(dlt_comm *world, int color, int key, size_t bytes, int iters, double *vec, int slot, int nslots);

#ifdef DLT_HAVE_CUDA_BACKEND
/* The device half of the sweep on an NCCL communicator: src (count floats, may be NULL: keep the
 * device buffer) up, iters in-place all-reduces on the device timed by this host, result down
 * into dst (may be NULL). */
int dlt_ar_nccl_run(dlt_comm *c, const float *src, float *dst, size_t count, int iters, double *seconds);
#endif

#endif
