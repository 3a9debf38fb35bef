/* SPDX-License-Identifier: Apache-2.0 */
/* nccl_topo_xml: the topology struct as the XML NCCL reads through NCCL_TOPO_FILE.
 * NCCL's parser is strict: no prolog, spaces only, quoted values, <=255-byte strings. */
#ifndef DLT_NCCL_TOPO_XML_H
#define DLT_NCCL_TOPO_XML_H

#include <stddef.h>

#include "topology.h"

/* Writes the XML into buf. Returns its length, or -ENOSPC when buf is too small. */
int dlt_nccl_topo_xml(const dlt_topology *t, char *buf, size_t buflen);

#endif
