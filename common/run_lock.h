/* SPDX-License-Identifier: Apache-2.0 */
/* run_lock: one run's exclusive claim on what it writes (a checkpoint folder, a TensorBoard folder,
 * a metrics file) for its life, so a second run given the same path is refused, naming the holder,
 * instead of silently interleaving with it. flock: released by the kernel when the process ends. */
#ifndef DLT_RUN_LOCK_H
#define DLT_RUN_LOCK_H

#include "common/status.h"
#include <stddef.h>

typedef struct {
    int fd; /* -1: nothing held */
} dlt_run_lock;

/* Who holds a claim, as written into a folder's lock file. */
typedef struct {
    char host[64];
    long pid;
    char job[32], step[32]; /* Slurm's, "-" outside a job */
    char since[32];         /* UTC, ISO 8601 */
    int restart;            /* SLURM_RESTART_COUNT (0 when unset); -1: a holder line without it */
} dlt_run_holder;

/* A held claim's holder seen from this process: no incarnation of this job; an earlier one (a
 * requeue whose previous run is still ending: worth waiting for); this same incarnation (another
 * step of the job, or a later incarnation: refused at once). */
typedef enum { DLT_HOLDER_OTHER, DLT_HOLDER_EARLIER, DLT_HOLDER_SAME_JOB } dlt_run_holder_relation;

/* Everything one training run claims (rank 0): its checkpoint folder, TensorBoard folder and
 * metrics file, taken together before the run chooses a checkpoint to resume from, and held to
 * its end. */
typedef struct {
    dlt_run_lock ckpt, tb, metrics;
    int taken;
} dlt_run_claims;

/* Claims folder dir through its file .dltrain.lock (created 0644, never through a symbolic link),
 * which then names the holder (host, pid, Slurm job, step and restart count). opt names the option
 * in messages. While the holder is an earlier incarnation of this Slurm job (a requeued job whose
 * previous run is still ending: a lower SLURM_RESTART_COUNT) waits for it until `until` (a
 * dlt_now() time; 0: no wait); another step of this same incarnation is refused at once, naming
 * it. 0 and l held; -EBUSY with err naming the holder and the fix; -errno when the claim cannot be
 * made. */
int dlt_run_lock_dir(dlt_run_lock *l, const char *opt, const char *dir, double until, dlt_err *err);
/* The same claim on a file, through the lock file .NAME.dltrain.lock beside it (a file of data such
 * as a metrics file has no room for its holder's name). */
int dlt_run_lock_beside(dlt_run_lock *l, const char *opt, const char *file, double until, dlt_err *err);
/* Claims the open file file_fd (path for messages) itself: its holder is known only as "another
 * running process". Returns as dlt_run_lock_dir. */
int dlt_run_lock_file(dlt_run_lock *l, const char *opt, const char *path, int file_fd, dlt_err *err);
void dlt_run_lock_release(dlt_run_lock *l);

/* Takes every claim of a run (the paths that are NULL are skipped), creating the folders, with one
 * deadline of wait_s for this job's previous incarnation across all of them. 0 and c->taken, or a
 * failure as dlt_run_lock_dir with nothing held. */
void dlt_run_claims_init(dlt_run_claims *c);
int dlt_run_claims_take(dlt_run_claims *c, const char *metrics_path, const char *checkpoint_dir,
                        const char *tensorboard_dir, double wait_s, dlt_err *err);
void dlt_run_claims_release(dlt_run_claims *c);

/* The holder line written into a lock file, and its parse (0, or -EINVAL). */
void dlt_run_holder_self(dlt_run_holder *h);
int dlt_run_holder_format(const dlt_run_holder *h, char *buf, size_t len);
int dlt_run_holder_parse(const char *text, dlt_run_holder *h);
dlt_run_holder_relation dlt_run_holder_relate(const dlt_run_holder *me, const dlt_run_holder *holder);

#endif
