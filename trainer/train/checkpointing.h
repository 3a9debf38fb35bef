/* SPDX-License-Identifier: Apache-2.0 */
/* checkpointing: a run's side of checkpoints: writing one (rank 0; never of non-finite weights),
 * resuming from one (a path or the newest valid in --checkpoint-dir), and the cross-rank check
 * that every replica holds the same weights. */
#ifndef DLT_CHECKPOINTING_H
#define DLT_CHECKPOINTING_H

#include <stdint.h>

#include "common/status.h"
#include "trainer/train/run.h"
#include "trainer/train/watchdog.h"

/* Rank 0 writes ckpt-STEP (when --checkpoint-dir is set); a failure keeps the previous one. Weights
 * that are not finite are never written: DLT_SAVE_SKIPPED (said), which a periodic save takes as
 * done (the next loss stops the run through --max-bad-steps) and a stop or the run's end as the
 * failure it is (dlt_run_save_required). */
#define DLT_SAVE_SKIPPED 1
int dlt_run_save(dlt_run *r, int64_t step, int64_t epoch, dlt_watchdog *wd);
/* dlt_run_save where a checkpoint must come of it (a stop, the run's end): a skipped one fails. */
int dlt_run_save_required(dlt_run *r, int64_t step, int64_t epoch, dlt_watchdog *wd);
/* Loads the weights --init names, or the checkpoint --resume names (a path: the CLI resolves
 * auto before launch), into the host copies; *step is where it stopped (0 without --resume). */
int dlt_run_resume(dlt_run *r, int64_t *step);
/* The settings a checkpoint records, "key=value ..." (world: the rank count). */
void dlt_run_config_text(const dlt_train_config *c, int world, char *buf, size_t len);
/* What the run trains on, for its checkpoints (dlt_train_state.data): the images' count, classes
 * and digests (dataset.h), or generated images. */
void dlt_run_data_text(const dlt_run *r, char *buf, size_t len);
/* Checks --resume-override's comma-separated names: each a setting a resume may change (batch, lr,
 * ranks, ...; not arch, width, image-size or classes). 0, or -EINVAL with err naming the bad one. */
int dlt_resume_override_check(const char *keys, dlt_err *err);
/* Compares a checkpoint's recorded settings with this run's (both dlt_run_config_text): each
 * difference the overrides list does not allow goes into refused, one line each, as
 * "--batch: checkpoint 8, now 16"; each allowed one into changed ("--batch 8 -> 16", comma
 * separated). Settings the checkpoint does not record are not compared; --epochs only under the
 * cosine schedule, --milestones only under the step schedule (where they shape the learning
 * rate). Returns the number refused. */
int dlt_resume_compare(const char *recorded, const char *now, const char *overrides, char *refused, size_t rlen,
                       char *changed, size_t clen);
/* Compares a weight checksum's spread across ranks; an error when they differ. */
int dlt_run_check_replicas(dlt_run *r, int64_t step);

#endif
