/* SPDX-License-Identifier: Apache-2.0 */
/* step_dir: the step-private directory under the site's topo_dir, written as root without
 * following any link, readable by the job's group and never writable by it, removed at step end. */
#ifndef DLT_STEP_DIR_H
#define DLT_STEP_DIR_H

#include "common/status.h"
#include "text_escape.h"
#include <stddef.h>
#include <sys/types.h>

/* Expands %n in a site path to the node name (several slurmd on one host need distinct
 * directories, as Slurm's TmpFS=/tmp/%n). node must be a plain name. Returns 0 or -1. */
int dlt_expand_node(const char *pattern, const char *node, char *out, size_t outlen);

/* Checks topo_dir (creating it 0755, whatever the umask, if absent): a root-owned directory that
 * group and others cannot write, so nothing in it can be swapped by a user, and that others can
 * search, so tasks reach their topology file; every directory above it root's and writable by no
 * one else unless sticky, and every link on its way root's (checked from / on open descriptors). */
int dlt_topo_dir_check(const char *topo_dir, dlt_err *err);

/* How many entries one removal (a step folder at step end, or a stale one) handles at most, in all (a
 * stale folder of an earlier version of the plugin, which handed the folder to the user, can hold a
 * user's tree of any depth); beyond that the rest is left and reported, so a task that keeps adding
 * entries cannot hold slurmstepd. */
#define DLT_STEP_DIR_MAX_ENTRIES (1ul << 20)

/* The lock file in every step folder (root's, 0600): flock'ed by the slurmstepd that made the folder
 * for the step's life, so a folder of the same name is told live (its lock held: never touched)
 * from left over (no lock, or a lock nobody holds: a crashed node, job ids that wrapped). */
#define DLT_STEP_DIR_LOCK ".stepd.lock"
/* Creates topo_dir/name, writes file_name with contents inside it (O_EXCL|O_NOFOLLOW), then makes
 * the folder 0750 and the file 0640 with group gid; the owner stays the caller (root in slurmstepd),
 * so a task reads the file and can write nothing there. path_out receives the file's full path. A
 * folder (or anything) of the same name left by an earlier step is moved into a fresh work folder of
 * the caller's (0700) in topo_dir and removed there, never blocking the step (*stale set to 1); when
 * its removal stops (a mount point, a folder of another owner than the stale folder's, the entry
 * limit), what is left stays in that work folder, note says where and at which entry (escaped), and
 * the step goes on; a folder of the same name whose lock a live slurmstepd holds (several slurmd on
 * one host sharing a topo_dir without %n) is refused (-EBUSY) and left. *held receives the lock's
 * descriptor, flock'ed, for the step's life (dlt_step_dir_remove closes it; -1 on failure). On
 * failure nothing of the step is left (a failed cleanup is added to err). */
int dlt_step_dir_create(const char *topo_dir, const char *name, const char *file_name, const char *contents, size_t len,
                        gid_t gid, char *path_out, size_t pathlen, int *stale, char *note, size_t notelen, int *held,
                        dlt_err *err);

/* Removes topo_dir/name and everything in it, at any depth, never following a link, never entering
 * another filesystem nor a folder of another owner than topo_dir/name's; it is first moved into a
 * fresh work folder of the caller's (0700) in topo_dir, where what cannot be removed stays, named
 * (escaped) in err with the work folder. held: the lock dlt_step_dir_create gave (closed here), and
 * then only the folder holding that lock is removed (anything else at the name: -ESTALE, left); -1
 * removes whatever is at the name. */
int dlt_step_dir_remove(const char *topo_dir, const char *name, int held, dlt_err *err);

/* A step folder whose slurmstepd died (kill -9, a crash: its lock went with it) stays until the
 * same job.step recurs on the node. Each step's start sweeps topo_dir for such folders: named
 * J.S, the caller's (root's), not `except` (the step's own name), changed last at least min_age_s
 * ago (DLT_STEP_DIR_SWEEP_AGE_S in slurmstepd: a folder being made is not yet locked) and with no live slurmstepd
 * holding the lock; each is removed as dlt_step_dir_remove does. At most DLT_STEP_DIR_SWEEP_MAX step folders are looked
 * at per sweep (the rest wait for the next step). *removed: how many went; note (escaped) says what could not be
 * removed. 0, or a negative errno when topo_dir cannot be read. */
#define DLT_STEP_DIR_SWEEP_AGE_S 10
#define DLT_STEP_DIR_SWEEP_MAX 256
int dlt_step_dir_sweep(const char *topo_dir, const char *except, int min_age_s, int *removed, char *note,
                       size_t notelen, dlt_err *err);

#endif
