/* SPDX-License-Identifier: Apache-2.0 */
/* step: one training step, read top to bottom in dlt_step_run: load the batch; save the batch-norm
 * statistics; queue forward, loss, backward (the gradient reduction runs while it does), the
 * agreement and SGD, or replay their recording; read the next batch ahead; read the results once;
 * settle the host's side. The benchmark takes the same queued step (dlt_step_queue). */
#ifndef DLT_STEP_H
#define DLT_STEP_H

#include <signal.h>
#include <stdint.h>

#include "trainer/train/run.h"
#include "trainer/train/watchdog.h"

/* What one step hands the next (zeroed before the first). */
typedef struct {
    int graph_warm, graph_ready; /* --cuda-graphs: a plain step ran; a recording exists */
    double graph_scale;          /* the loss scale the recording was made with */
    int bad_steps;               /* consecutive non-finite losses */
    int input_failed;            /* this rank could not load a batch; why: input_err */
    char input_err[1024];
    int dumped; /* --dump-batch written */
} dlt_step_state;

/* Which step, and what goes with it. */
typedef struct {
    int64_t index; /* optimizer steps done before this one: its batch is (index / spe, index % spe);
                    * messages number it index + 1 */
    int64_t spe;   /* steps per epoch */
    int64_t next;  /* the step whose batch is read ahead while this one runs; -1: none */
    double lr;
    const volatile sig_atomic_t *stop; /* nonzero when read: this rank asks every rank to stop (NULL: never) */
    dlt_watchdog *wd;
} dlt_step_plan;

/* What the step found, every rank agreeing. */
typedef struct {
    double t0, t_data, t_wait, t_agreed; /* step start, batch in, the one wait starts, results read */
    double agree_s;                      /* seconds in the agreement's host paths */
    double res[DLT_RES_COUNT];           /* summed over ranks: loss, hits, overflow, stop requests, input failures */
} dlt_step_result;

/* The step p: 0 when it ran (its update applied or, on a non-finite loss or an fp16 overflow,
 * skipped without a trace), else a negative status with the run's first failure in r->err. A rank whose
 * batch cannot be read still takes part in the step's collectives, and every rank stops at that
 * step, the failing one naming the cause. */
int dlt_step_run(dlt_run *r, dlt_step_state *s, const dlt_step_plan *p, dlt_step_result *out);

/* The step's device work, nothing waited for: the results from zero, forward, loss and backward
 * (handing finished gradients to the reducer), the agreement (the gradient sum completes, fp16
 * overflow is counted on it, the stop request and input failure join the results, which are
 * summed over the ranks) and SGD at lr, which the backend drops when the agreed results void the
 * step (dlt_results_skip). With --cuda-graphs the second step is recorded and later ones replay it.
 * *agree_s: seconds the agreement spent on the host. */
int dlt_step_queue(dlt_run *r, dlt_step_state *s, double lr, int stop, double *agree_s);

#endif
