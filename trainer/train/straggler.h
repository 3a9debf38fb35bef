/* SPDX-License-Identifier: Apache-2.0 */
/* straggler: names a rank that keeps the others waiting. Each rank adds its compute and data-wait
 * seconds per step (timings the loop already has); at each log interval one all-reduce of two
 * doubles per rank shares them; a rank above factor x the median for `windows` intervals in a row
 * is named (log and metrics event), and the end summary names the slowest rank. */
#ifndef DLT_STRAGGLER_H
#define DLT_STRAGGLER_H

#include <stdint.h>

#include "trainer/backend/backend.h"
#include "trainer/comm/comm.h"
#include "trainer/train/run_log.h"

#define DLT_STRAGGLER_FACTOR 1.15
#define DLT_STRAGGLER_WINDOWS 3
/* An interval spans at least this many steps (a log line every step would otherwise judge single,
 * noisy steps and pay the exchange every step). */
#define DLT_STRAGGLER_MIN_STEPS 10
#define DLT_STRAGGLER_ID 96 /* bytes of "host H, local rank L, DEVICE" */

typedef struct {
    double factor;
    int windows;
    int size, rank;
    double compute_s, data_s; /* this interval's sums */
    int steps;
    char (*ids)[DLT_STRAGGLER_ID]; /* every rank's identity, gathered once */
    int *streak_c, *streak_d;      /* consecutive slow intervals per rank */
    int64_t *slowest;              /* intervals in which each rank was the slowest */
    double *ratio_sum;             /* its step time over the median, summed over those */
    int64_t intervals;
    double cost_s;             /* time spent here: the check's own cost */
    double *buf;               /* 2 size doubles: the interval's exchange */
    char me[DLT_STRAGGLER_ID]; /* this rank's identity */
    int have_ids;              /* ids gathered (when a rank is first named, or at the end) */
} dlt_straggler;

/* One interval's verdict, the same on every rank (pure: what the unit test exercises). For each
 * rank i of n, per-step compute[i] and data[i] seconds: slow_c[i] / slow_d[i] set when above
 * factor x the median (data: also by at least a tenth of the median compute, so that noise on
 * near-zero waits is not named); returns the rank with the longest compute + data. */
int dlt_straggler_judge(const double *compute, const double *data, int n, double factor, int *slow_c, int *slow_d);

/* This rank's identity (host, local rank, the GPU's PCI bus id or the CPUs it may use); no
 * communication. */
void dlt_straggler_init(dlt_straggler *s, const char *host, const dlt_backend_config *be);
/* After each step, on every rank: compute seconds (the step without its time in collectives) and
 * seconds waiting for the batch. At interval_end (the log cadence, the same step on every rank) once at least
 * DLT_STRAGGLER_MIN_STEPS steps were added since the last exchange:
 * one all-reduce of two doubles per rank and the verdict; rank 0 names a rank slow for `windows` intervals in a row in
 * the log and as a "straggler" metrics event. Returns 0 or the collective's status (comm->err says why). */
int dlt_straggler_step(dlt_straggler *s, dlt_comm *comm, dlt_run_log *log, int64_t step, double compute_s,
                       double data_s, int interval_end);
/* At the end, on every rank (it may gather the identities): rank 0 names the slowest rank and its
 * share of the intervals, and the check's own cost against run_s (the run's seconds). Returns 0
 * or the collective's status. */
int dlt_straggler_summary(dlt_straggler *s, dlt_comm *comm, const dlt_run_log *log, double run_s);
void dlt_straggler_close(dlt_straggler *s);

#endif
