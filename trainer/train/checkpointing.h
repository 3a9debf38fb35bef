/* SPDX-License-Identifier: Apache-2.0 */
/* checkpointing: a run's side of checkpoints: writing one (rank 0; never of non-finite weights),
 * resuming from one (a path or the newest valid in --checkpoint-dir), and the cross-rank check
 * that every replica holds the same weights. */
#ifndef DLT_CHECKPOINTING_H
#define DLT_CHECKPOINTING_H

#include <stdint.h>

#include "trainer/train/run.h"
#include "trainer/train/watchdog.h"

/* Rank 0 writes ckpt-STEP (when --checkpoint-dir is set); a failure keeps the previous one. */
int dlt_run_save(dlt_run *r, int64_t step, int64_t epoch, dlt_watchdog *wd);
/* Loads the weights --init names, or the checkpoint --resume names (a path: the CLI resolves
 * auto before launch), into the host copies; *step is where it stopped (0 without --resume). */
int dlt_run_resume(dlt_run *r, int64_t *step);
/* Compares a weight checksum's spread across ranks; an error when they differ. */
int dlt_run_check_replicas(dlt_run *r, int64_t step);

#endif
