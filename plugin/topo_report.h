/* SPDX-License-Identifier: Apache-2.0 */
/* topo_report: the node topology as a text matrix like `nvidia-smi topo -m` (NVLink counts,
 * PCIe distance classes, NIC distances, CPU affinity, NUMA node), for --dl-train=verbose. */
#ifndef DLT_TOPO_REPORT_H
#define DLT_TOPO_REPORT_H

#include <stddef.h>

#include "topology.h"

/* Returns the text length, or -ENOSPC. */
int dlt_topo_matrix(const dlt_topology *t, const char *node_name, char *buf, size_t buflen);

#endif
