/* SPDX-License-Identifier: Apache-2.0 */
/* topo_report: the node topology as a text matrix like `nvidia-smi topo -m`. */
#include "topo_report.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    char *buf;
    size_t len, cap;
    int overflow;
} _out;

static void _put(_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void _put(_out *o, const char *fmt, ...)
{
    va_list ap;
    int n;
    if (o->overflow)
        return;
    va_start(ap, fmt);
    n = vsnprintf(o->buf + o->len, o->cap - o->len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= o->cap - o->len)
        o->overflow = 1;
    else
        o->len += (size_t)n;
}

int dlt_topo_matrix(const dlt_topology *t, const char *node_name, char *buf, size_t buflen)
{
    _out o = {buf, 0, buflen, 0};
    char cpus[256], cell[16];
    if (!buflen)
        return -EINVAL;
    buf[0] = '\0';
    _put(&o, "dltrain: topology of %s: %d GPU(s), %d NIC(s), %d NUMA node(s)\n", node_name, t->ngpus, t->nnics,
         t->nnuma);
    _put(&o, "dltrain: %-8s", "");
    for (int j = 0; j < t->ngpus; j++)
        _put(&o, " %-6s", (snprintf(cell, sizeof(cell), "GPU%d", j), cell));
    for (int k = 0; k < t->nnics; k++)
        _put(&o, " %-8s", t->nics[k].name);
    _put(&o, " %-14s %s\n", "CPU Affinity", "NUMA");
    for (int i = 0; i < t->ngpus; i++) {
        const dlt_gpu *g = &t->gpus[i];
        _put(&o, "dltrain: GPU%-5d", i);
        for (int j = 0; j < t->ngpus; j++) {
            dlt_distance d = dlt_topo_gpu_distance(t, i, j);
            if (d == DLT_DIST_NVLINK && g->nvlink_to_gpu[j])
                snprintf(cell, sizeof(cell), "NV%d", g->nvlink_to_gpu[j]);
            else if (d == DLT_DIST_NVLINK)
                snprintf(cell, sizeof(cell), "NV%d", g->nvlink_to_switch);
            else
                snprintf(cell, sizeof(cell), "%s", dlt_distance_name(d));
            _put(&o, " %-6s", cell);
        }
        for (int k = 0; k < t->nnics; k++)
            _put(&o, " %-8s", dlt_distance_name(dlt_topo_pci_distance(t, g->pci, t->nics[k].pci)));
        if (dlt_cpuset_format(&g->local_cpus, cpus, sizeof(cpus)) != 0 || !cpus[0])
            snprintf(cpus, sizeof(cpus), "?");
        _put(&o, " %-14s %d\n", cpus, g->numa);
    }
    for (int i = 0; i < t->ngpus; i++)
        _put(&o, "dltrain: GPU%d = %s %s sm_%d minor %d\n", i, t->gpus[i].busid, t->gpus[i].name, t->gpus[i].sm,
             t->gpus[i].minor);
    for (int k = 0; k < t->nnics; k++)
        _put(&o, "dltrain: %s = %s %s %s%s %d Mb/s numa %d%s\n", t->nics[k].name, t->nics[k].busid,
             t->nics[k].is_ib ? "InfiniBand" : "Ethernet", t->nics[k].netdev[0] ? "netdev " : "", t->nics[k].netdev,
             t->nics[k].speed_mbps, t->nics[k].numa, t->nics[k].up ? "" : " (down)");
    _put(&o, "dltrain: legend: X self, NV# NVLink count, PIX one PCIe switch, PXB several switches, "
             "PHB host bridge, NODE within a NUMA node, SYS across NUMA nodes\n");
    return o.overflow ? -ENOSPC : (int)o.len;
}
