/* SPDX-License-Identifier: Apache-2.0 */
/* step_dir: the step-private directory under the site's topo_dir, written as root without
 * following any link, handed to the job user, removed at step end. */
#ifndef DLT_STEP_DIR_H
#define DLT_STEP_DIR_H

#include <stddef.h>
#include <sys/types.h>
#include "trainer/common/status.h"

/* Expands %n in a site path to the node name (several slurmd on one host need distinct
 * directories, as Slurm's TmpFS=/tmp/%n). node must be a plain name. Returns 0 or -1. */
int dlt_expand_node(const char *pattern, const char *node, char *out, size_t outlen);

/* Checks topo_dir (creating it 0755 if absent): a root-owned directory that group and others
 * cannot write, so nothing in it can be swapped by a user. */
int dlt_topo_dir_check(const char *topo_dir, dlt_err *err);

/* How deep a user's tree in a step directory is removed; below that it is left and reported. */
#define DLT_STEP_DIR_MAX_DEPTH 64

/* Creates topo_dir/name (0700), writes file_name with contents inside it (O_EXCL|O_NOFOLLOW,
 * 0644), then gives both to uid:gid. path_out receives the file's full path. A directory of the
 * same name left by an earlier step is removed first (*stale set to 1). */
int dlt_step_dir_create(const char *topo_dir, const char *name, const char *file_name, const char *contents,
                        size_t len, uid_t uid, gid_t gid, char *path_out, size_t pathlen, int *stale, dlt_err *err);

/* Removes topo_dir/name and everything the user put in it, never following a link and never
 * entering another filesystem; what cannot be removed is named in err. */
int dlt_step_dir_remove(const char *topo_dir, const char *name, dlt_err *err);

#endif
