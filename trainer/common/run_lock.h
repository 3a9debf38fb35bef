/* SPDX-License-Identifier: Apache-2.0 */
/* run_lock: one run's exclusive claim on what it writes (a checkpoint folder, a TensorBoard folder,
 * a metrics file) for its life, so a second run given the same path is refused, naming the holder,
 * instead of silently interleaving with it. flock: released by the kernel when the process ends. */
#ifndef DLT_RUN_LOCK_H
#define DLT_RUN_LOCK_H

#include <stddef.h>
#include "trainer/common/status.h"

typedef struct {
    int fd; /* -1: nothing held */
} dlt_run_lock;

/* Who holds a claim, as written into a folder's lock file. */
typedef struct {
    char host[64];
    long pid;
    char job[32], step[32]; /* Slurm's, "-" outside a job */
    char since[32];         /* UTC, ISO 8601 */
} dlt_run_holder;

/* Claims folder dir through its file .dltrain.lock (created 0644, never through a symbolic link),
 * which then names the holder. opt names the option in messages. When the holder is this same
 * Slurm job (a requeued job whose previous incarnation is still ending) waits up to
 * same_job_wait_s for it. 0 and l held; -EBUSY with err naming the holder and the fix; -errno when
 * the claim cannot be made. */
int dlt_run_lock_dir(dlt_run_lock *l, const char *opt, const char *dir, double same_job_wait_s, dlt_err *err);
/* Claims the open file file_fd (path for messages) itself: its holder is known only as "another
 * running process". Returns as dlt_run_lock_dir. */
int dlt_run_lock_file(dlt_run_lock *l, const char *opt, const char *path, int file_fd, dlt_err *err);
void dlt_run_lock_release(dlt_run_lock *l);

/* The holder line written into a lock file, and its parse (0, or -EINVAL). */
void dlt_run_holder_self(dlt_run_holder *h);
int dlt_run_holder_format(const dlt_run_holder *h, char *buf, size_t len);
int dlt_run_holder_parse(const char *text, dlt_run_holder *h);

#endif
