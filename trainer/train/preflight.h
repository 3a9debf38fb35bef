/* SPDX-License-Identifier: Apache-2.0 */
/* preflight: what every rank checks before a run starts, decided the same way on every rank (the
 * outcome is agreed on through agree.h, so no rank starts while another stops): the outputs
 * rank 0 writes, a verified checkpoint to evaluate, and which checkpoint --resume auto continues
 * from. Each returns a run status (trainer.h): DLT_RUN_DONE to go on, DLT_RUN_REFUSED or
 * DLT_RUN_REFUSED_USAGE after saying why; the command maps it to an exit status with the run's. */
#ifndef DLT_TRAIN_PREFLIGHT_H
#define DLT_TRAIN_PREFLIGHT_H

#include <stddef.h>
#include <stdint.h>

#include "common/run_lock.h"
#include "trainer/comm/comm.h"
#include "trainer/train/trainer.h"

/* dltrain eval: verifies the model file against its state file on every rank. Rank 0 says
 * "verified" or "unverified" (no state file); a mismatch stops every rank. Returns DLT_RUN_DONE or
 * DLT_RUN_REFUSED. */
int dlt_preflight_eval_checkpoint(const char *path, dlt_comm *comm);

/* --verify: checks one file pair in this process and prints the result. Returns DLT_RUN_DONE when
 * the pair verifies, DLT_RUN_REFUSED when it is damaged or cannot be verified (no state file). */
int dlt_verify_checkpoint_cmd(const char *path);

/* --resume auto | auto-or-fresh: resolves to the newest verified checkpoint in dir (*resume is
 * then set to its path, kept in pathbuf), or to a fresh start (*resume NULL) when dir has no
 * checkpoint at all. When checkpoints exist but none verifies, "auto" stops with a list of each
 * file and why it was refused; "auto-or-fresh" lists them and starts fresh. Every rank must see
 * the same answer (a --checkpoint-dir that not every node shares is refused). Returns DLT_RUN_DONE,
 * DLT_RUN_REFUSED (dir cannot be read, the ranks disagree, or no checkpoint verifies under "auto")
 * or DLT_RUN_REFUSED_USAGE (no dir). */
int dlt_preflight_resume(const char **resume, const char *dir, dlt_comm *comm, char *pathbuf, size_t pathlen);

/* --resume PATH (after auto resolved): the settings the checkpoint's state file records against
 * this run's (now, dlt_run_config_text), every rank alike. Each difference that overrides (the
 * --resume-override list) does not allow is named with both values, said once by rank 0, and
 * every rank returns DLT_RUN_REFUSED_USAGE; a pair that cannot be read is left to the trainer's
 * load, which names the fault. Returns DLT_RUN_DONE, DLT_RUN_REFUSED (ranks disagree) or
 * DLT_RUN_REFUSED_USAGE. */
int dlt_preflight_resume_settings(const char *path, const char *now, const char *overrides, dlt_comm *comm);

/* dltrain train: rank 0 can append to --metrics and write into --checkpoint-dir and
 * --tensorboard (created when missing), checked now rather than hours later at the first
 * checkpoint, when only rank 0 would stop. Returns DLT_RUN_DONE, or DLT_RUN_REFUSED_USAGE on every
 * rank after rank 0 said why. */
int dlt_preflight_outputs(const char *metrics_path, const char *checkpoint_dir, const char *tensorboard_dir,
                          dlt_comm *comm);

/* Every rank sees the files rank 0 makes in the checkpoint directory (refused otherwise, with
 * DLT_RUN_REFUSED_USAGE: a job requeued onto other nodes would find no checkpoint there and start
 * over). One rank, or no directory: nothing to check. */
int dlt_preflight_shared_dir(const char *dir, dlt_comm *comm);

/* dltrain train: rank 0 claims the run's outputs (run_lock.h), waiting for this job's previous
 * incarnation when a requeue meets it still ending, before --resume auto chooses a checkpoint: the
 * choice then sees everything that run saved, and no pruning of it races the scan. Every rank
 * waits with rank 0. Returns DLT_RUN_DONE (claims held on rank 0, for the run to take over), or
 * DLT_RUN_REFUSED on every rank after rank 0 said why. */
int dlt_preflight_claims(dlt_run_claims *claims, const char *metrics_path, const char *checkpoint_dir,
                         const char *tensorboard_dir, dlt_comm *comm);

/* dltrain train --baseline FILE: rank 0 (which reads it at the end) finds at least one usable
 * interval line in it now, rather than a useless summary hours later. Returns DLT_RUN_DONE, or
 * DLT_RUN_REFUSED_USAGE on every rank after rank 0 said why. */
int dlt_preflight_baseline(const char *path, dlt_comm *comm);

#endif
