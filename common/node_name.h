/* SPDX-License-Identifier: Apache-2.0 */
/* node_name: the one way the plugin, libdltpmix and the trainer name the node they run on in
 * messages and in the rank info: the name Slurm knows it by. */
#ifndef DLT_NODE_NAME_H
#define DLT_NODE_NAME_H

#include <stddef.h>

/* SLURMD_NODENAME when set (slurmd puts it in its own environment, which slurmstepd, the plugin
 * and every task inherit; on a cluster of several slurmd on one host it is not the host name),
 * else the host name, else "?"; at most len - 1 characters. Returns buf. */
const char *dlt_node_name(char *buf, size_t len);

#endif
