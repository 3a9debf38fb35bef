/* SPDX-License-Identifier: Apache-2.0 */
/* step_verbs: what the steps of training, evaluation and the benchmark do to a run's parts: load a
 * batch (or read the next one ahead), forward and loss, read the step's results, give the batches
 * back. Every failure goes into the run's error (r->err). */
#ifndef DLT_STEP_VERBS_H
#define DLT_STEP_VERBS_H

#include <stdint.h>

#include "trainer/data/source.h"
#include "trainer/train/run.h"

/* The batch of (epoch, step), normalised into the network's input: the one dlt_run_prefetch
 * staged, or read and staged now. */
int dlt_run_load_batch(dlt_run *r, int64_t epoch, int64_t step);
/* Acquires the batch of (epoch, step) and queues its copy to the backend now, so it overlaps the
 * step in flight (a failure is kept for dlt_run_load_batch of that step to report). */
void dlt_run_prefetch(dlt_run *r, int64_t epoch, int64_t step);
/* One evaluation batch of src (step of its pass): staged, normalised, forward and loss over its
 * *valid real images (adding to be->results), *unscored of them unreadable (DLT_LABEL_UNSCORED:
 * no hit, counted by the backend as out-of-range labels); its memory goes back to the source
 * after a sync. */
int dlt_run_eval_batch(dlt_run *r, dlt_source *src, int64_t step, int *valid, int *unscored);
/* After the step's results read (the backend has read every consumed batch): the batches the
 * steps consumed go back to the source's ring. */
void dlt_run_release_batches(dlt_run *r);
/* Forward and loss over the first n images of the batch (training: batch statistics, label
 * smoothing, the loss scale and d(logits); else evaluation); adds to be->results. */
int dlt_run_forward_loss(dlt_run *r, int training, int n);
/* The step's one wait: the agreed results into res (DLT_RES_COUNT); labels outside the classes
 * are an error here. */
int dlt_run_read_results(dlt_run *r, double *res);
/* The same for an evaluation pass: unscored images (DLT_LABEL_UNSCORED) are expected among the
 * out-of-range labels; any other is an error. */
int dlt_run_read_eval_results(dlt_run *r, double *res, int64_t unscored);

#endif
