/* SPDX-License-Identifier: Apache-2.0 */
/* nccl_topo_xml: the topology struct as the XML NCCL reads through NCCL_TOPO_FILE. */
#include "nccl_topo_xml.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    char *buf;
    size_t len, cap;
    int overflow;
} _out;

static void _emit(_out *o, int indent, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void _emit(_out *o, int indent, const char *fmt, ...)
{
    va_list ap;
    int n;
    if (o->overflow)
        return;
    for (int i = 0; i < indent; i++) {
        if (o->len + 2 >= o->cap) {
            o->overflow = 1;
            return;
        }
        o->buf[o->len++] = ' ';
        o->buf[o->len++] = ' ';
    }
    va_start(ap, fmt);
    n = vsnprintf(o->buf + o->len, o->cap - o->len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= o->cap - o->len) {
        o->overflow = 1;
        return;
    }
    o->len += (size_t)n;
}

static int _gpu_at(const dlt_topology *t, int pci)
{
    for (int i = 0; i < t->ngpus; i++)
        if (t->gpus[i].pci == pci)
            return i;
    return -1;
}

static int _nic_at(const dlt_topology *t, int pci)
{
    for (int i = 0; i < t->nnics; i++)
        if (t->nics[i].pci == pci)
            return i;
    return -1;
}

static const char *_or(const char *s, const char *dflt)
{
    return (s && *s) ? s : dflt;
}

static void _emit_pci(const dlt_topology *t, _out *o, int idx, int indent, int depth)
{
    const dlt_pci *p = &t->pci[idx];
    int g = _gpu_at(t, idx), n = _nic_at(t, idx);
    int has_children = g >= 0 || n >= 0;
    for (int c = 0; c < t->npci && !has_children; c++)
        has_children = t->pci[c].parent == idx;
    _emit(o, indent,
          "<pci busid=\"%s\" class=\"%s\" vendor=\"%s\" device=\"%s\" subsystem_vendor=\"%s\" "
          "subsystem_device=\"%s\" link_speed=\"%s\" link_width=\"%d\"%s\n",
          p->busid, _or(p->cls, "0x060400"), _or(p->vendor, "0xffff"), _or(p->device, "0xffff"),
          _or(p->subsys_vendor, "0xffff"), _or(p->subsys_device, "0xffff"), p->link_speed, p->link_width,
          has_children ? ">" : "/>");
    if (!has_children)
        return;
    if (g >= 0) {
        const dlt_gpu *gpu = &t->gpus[g];
        int links = gpu->nvlink_to_switch + gpu->nvlink_to_cpu;
        for (int j = 0; j < t->ngpus; j++)
            links += gpu->nvlink_to_gpu[j];
        _emit(o, indent + 1, "<gpu dev=\"%d\" sm=\"%d\" gdr=\"1\"%s\n", g, gpu->sm, links ? ">" : "/>");
        for (int j = 0; j < t->ngpus; j++)
            if (gpu->nvlink_to_gpu[j])
                _emit(o, indent + 2, "<nvlink target=\"%s\" count=\"%d\" tclass=\"0x030200\"/>\n", t->gpus[j].busid,
                      gpu->nvlink_to_gpu[j]);
        if (gpu->nvlink_to_switch)
            _emit(o, indent + 2, "<nvlink target=\"%s\" count=\"%d\" tclass=\"0x068000\"/>\n", gpu->switch_busid,
                  gpu->nvlink_to_switch);
        if (links)
            _emit(o, indent + 1, "</gpu>\n");
    }
    if (n >= 0) {
        const dlt_nic *nic = &t->nics[n];
        _emit(o, indent + 1, "<nic>\n");
        _emit(o, indent + 2,
              "<net name=\"%s\" dev=\"%d\" speed=\"%d\" port=\"%d\" guid=\"%s\" maxconn=\"%d\" gdr=\"%d\"/>\n",
              nic->is_ib ? nic->name : _or(nic->netdev, nic->name), n, nic->speed_mbps > 0 ? nic->speed_mbps : 10000,
              nic->port, _or(nic->guid, "0x0"), nic->is_ib ? 131072 : 65536, nic->is_ib ? 1 : 0);
        _emit(o, indent + 1, "</nic>\n");
    }
    if (depth < 16)
        for (int c = 0; c < t->npci; c++)
            if (t->pci[c].parent == idx)
                _emit_pci(t, o, c, indent + 1, depth + 1);
    _emit(o, indent, "</pci>\n");
}

/* The NUMA node a root port belongs to: its own, else its first known descendant's, else 0;
 * one the node does not list falls back to 0 so no device is dropped from the file. */
static int _root_numa(const dlt_topology *t, int root)
{
    int nnuma = t->nnuma > 0 ? t->nnuma : 1;
    if (t->pci[root].numa >= 0)
        return t->pci[root].numa < nnuma ? t->pci[root].numa : 0;
    for (int c = 0; c < t->npci; c++) {
        int up = c, hops = 0;
        while (t->pci[up].parent >= 0 && hops++ < DLT_MAX_PCI)
            up = t->pci[up].parent;
        if (up == root && t->pci[c].numa >= 0)
            return t->pci[c].numa < nnuma ? t->pci[c].numa : 0;
    }
    return 0;
}

int dlt_nccl_topo_xml(const dlt_topology *t, char *buf, size_t buflen)
{
    _out o = {buf, 0, buflen, 0};
    int nnuma = t->nnuma > 0 ? t->nnuma : 1, ncpus = 0;
    if (!buf || !buflen)
        return -EINVAL;
    for (int n = 0; n < t->nnuma; n++)
        for (int c = DLT_MAX_CPUS - 1; c >= 0; c--)
            if ((t->numa_cpus[n].bits[c / 64] >> (c % 64)) & 1u) {
                if (c + 1 > ncpus)
                    ncpus = c + 1;
                break;
            }
    _emit(&o, 0, "<system version=\"1\">\n");
    for (int numa = 0; numa < nnuma; numa++) {
        char mask[DLT_MAX_CPUS / 4 + DLT_MAX_CPUS / 32 + 1] = "";
        int any = 0;
        for (int r = 0; r < t->npci; r++)
            any |= t->pci[r].parent < 0 && _root_numa(t, r) == numa;
        if (!any)
            continue;
        if (numa < t->nnuma)
            dlt_cpuset_format_mask(&t->numa_cpus[numa], ncpus, mask, sizeof(mask));
        _emit(&o, 1, "<cpu numaid=\"%d\" affinity=\"%s\" arch=\"%s\" vendor=\"%s\" familyid=\"%d\" modelid=\"%d\">\n",
              numa, mask[0] ? mask : "00000000", _or(t->arch, "x86_64"), _or(t->cpu_vendor, "GenuineIntel"),
              t->cpu_family, t->cpu_model);
        for (int r = 0; r < t->npci; r++)
            if (t->pci[r].parent < 0 && _root_numa(t, r) == numa)
                _emit_pci(t, &o, r, 2, 0);
        _emit(&o, 1, "</cpu>\n");
    }
    _emit(&o, 0, "</system>\n");
    if (o.overflow)
        return -ENOSPC;
    return (int)o.len;
}
