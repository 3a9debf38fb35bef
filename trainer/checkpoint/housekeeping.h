/* SPDX-License-Identifier: Apache-2.0 */
/* housekeeping: what a checkpoint folder collects over a run's life: the temporary files of saves
 * that never finished (a killed process's ckpt-N.safetensors.tmp.PID), and old checkpoints past
 * --keep-checkpoints. Both are called by rank 0 while it holds the folder's lock (run_lock.h), so
 * no other dltrain is writing there. Nothing here follows a symbolic link. */
#ifndef DLT_HOUSEKEEPING_H
#define DLT_HOUSEKEEPING_H

#include "common/status.h"
#include <stddef.h>
#include <stdint.h>

/* Removes every "ckpt-*.safetensors.tmp.PID" in dir: with the lock held they are left by saves
 * that did not finish. *removed gets their count and said the first names ("a, b, ..."). Returns
 * 0, or a negative errno with err when the folder cannot be read or a file cannot be removed. */
int dlt_checkpoint_remove_unfinished(const char *dir, int *removed, char *said, size_t saidlen, dlt_err *err);

/* Keeps the `keep` checkpoints of dir that --resume auto wants most (dlt_checkpoint_list's order:
 * the newest line's newest steps first, so that an abandoned line's checkpoints go first; by step
 * for checkpoints without lines; a pair, or the half of one that is there) and removes the rest,
 * state file first (so that a removal cut short leaves no pair that looks valid). The checkpoint
 * of step `newest` is never removed. *removed and said as above. */
int dlt_checkpoint_prune(const char *dir, int keep, int64_t newest, int *removed, char *said, size_t saidlen,
                         dlt_err *err);

/* Before a save of `step` by line `line`: a checkpoint of that step already in dir from another
 * line (an abandoned one, after a rollback) or whose line cannot be read (damaged, half a pair) is
 * kept, renamed to ckpt-STEP.lineL.safetensors (.unreadable. when its line is unknown; -2, -3...
 * when taken) with its state file beside it, a name that --resume auto and --keep-checkpoints
 * pass by and --resume FILE loads. Returns 0 when nothing was there (or it is this line's own),
 * 1 when moved (said: what went where), or a negative errno with err. */
int dlt_checkpoint_set_aside(const char *dir, int64_t step, int64_t line, char *said, size_t saidlen, dlt_err *err);

#endif
