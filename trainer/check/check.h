/* SPDX-License-Identifier: Apache-2.0 */
/* check: the health check of a job's ranks (dltrain check, dltrain train --preflight): each
 * rank's GEMM (verified exactly, TFLOP/s against the median of its device model), the all-reduce
 * sweep on the trainer's communicator, then within each node, one rank per node across nodes, and
 * node pairs, so that a slow or wrong GPU, CPU, node or link is named. Every rank reaches the same
 * verdict from the same gathered figures. */
#ifndef DLT_CHECK_H
#define DLT_CHECK_H

#include <stddef.h>
#include <stdio.h>

#include "common/exit_status.h"
#include "common/status.h"
#include "pmix/dltpmix.h"
#include "trainer/backend/backend.h"
#include "trainer/comm/comm.h"

/* Exit statuses of dltrain check (and of a train --preflight that stops): documented in dltrain(1). */
#define DLT_CHECK_HEALTHY 0
#define DLT_CHECK_DEGRADED DLT_EXIT_DEGRADED /* slow ranks, nodes or links named */
#define DLT_CHECK_BROKEN DLT_EXIT_BROKEN     /* a wrong GEMM or all-reduce result, named */

typedef struct {
    int gpu;                 /* the ranks compute on GPUs (device below) */
    int device;              /* CUDA device of this rank */
    dlt_precision precision; /* the GEMM's */
    int gemm_n;              /* 0: 1024 on a CPU, 8192 on a GPU */
    double gemm_seconds;     /* timed GEMMs per rank, about (default 0.5) */
    double fraction;         /* slower than this fraction of the median of one model: named (0.85) */
    double min_tflops;       /* 0: no site threshold */
    double min_busbw;        /* GB/s at the largest size; 0: none */
    size_t min_bytes, max_bytes;
    int iters;           /* > 0: at most this many timed all-reduces per size */
    int isolate;         /* 1: within nodes, across nodes, node pairs */
    int pairs;           /* 1: node pairs even when the cross-node figure is not low */
    int json;            /* rank 0 prints one JSON object instead of the table */
    int quiet;           /* the --preflight form: one line when healthy, else the named problems */
    double budget_s;     /* > 0: the whole check's time budget (--seconds): the sweep stops before a
                          * size it has no time for, isolation uses a size that fits what is left */
    int progress;        /* rank 0 says on stderr what it expects, then a line per phase and size */
    int max_bytes_given; /* --max-bytes given: not lowered for many ranks per node */
} dlt_check_config;

void dlt_check_defaults(dlt_check_config *cfg);

/* Runs the check on every rank of comm (px: the bootstrap, for the gathers). Rank 0 prints the
 * report to out; a named rank also says on stderr what it found. Returns DLT_CHECK_HEALTHY,
 * DEGRADED or BROKEN, the same on every rank, or 1 when the check itself failed (err filled). */
int dlt_check_run(const dlt_check_config *cfg, dltpmix_ctx *px, dlt_comm *comm, FILE *out, dlt_err *err);

/* dltrain train --preflight: the check before the first step, quick (full = 0: a smaller GEMM,
 * sizes up to 1 MiB, no isolation) or full (dltrain check's defaults). Rank 0 says one line when
 * healthy; else the named problems, and every rank returns the same status (3 or 4; 1 when the
 * check could not run) so that every rank stops before training. Returns 0 when healthy. */
int dlt_check_preflight(int full, const dlt_backend_config *be, dltpmix_ctx *px, dlt_comm *comm);

#endif
