/* SPDX-License-Identifier: Apache-2.0 */
/* topo_file: whether the task can read its NCCL_TOPO_FILE where it runs (a container may not see
 * the host path), and the words that name the file and the bind to add. Used by the plugin's
 * task_init and by dltrain (env, train). */
#ifndef DLT_TOPO_FILE_H
#define DLT_TOPO_FILE_H

#include <stddef.h>

/* NCCL opens NCCL_TOPO_FILE with fopen; when that fails it says so only at NCCL_DEBUG=INFO and
 * probes the node itself (src/graph/xml.cc, ncclTopoGetXmlFromFile). path: the task's
 * NCCL_TOPO_FILE (NULL or "": none, nothing to check). Returns 0 when a regular file there can be
 * opened for reading by this process, else -errno with msg naming the file, the cause and the
 * read-only bind of its topo_dir (the folder above the step's folder) for pyxis/enroot and
 * Apptainer. Control characters of path are shown as '?'. */
int dlt_topo_file_check(const char *path, char *msg, size_t len);

#endif
