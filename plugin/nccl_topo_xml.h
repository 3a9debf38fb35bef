/* SPDX-License-Identifier: Apache-2.0 */
/* nccl_topo_xml: the topology struct as the XML NCCL reads through NCCL_TOPO_FILE.
 * NCCL's parser is strict: no prolog, spaces only, quoted values, <=255-byte strings. */
#ifndef DLT_NCCL_TOPO_XML_H
#define DLT_NCCL_TOPO_XML_H

#include <stddef.h>

#include "topology.h"

/* Writes the XML into buf: only what NCCL cannot find out itself or where the node knows better
 * (the PCI tree with its links, where the GPUs and NICs hang, the CPUs; nccl_topo_xml.c says why
 * for each attribute). Returns its length, -ENOSPC when buf is too small, -ENOTSUP for an
 * architecture NCCL does not model, -ENODATA on x86 without the CPU vendor (NCCL requires it on
 * every <cpu>): then no file is better than a wrong one. */
int dlt_nccl_topo_xml(const dlt_topology *t, char *buf, size_t buflen);

#endif
