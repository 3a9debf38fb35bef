/* SPDX-License-Identifier: Apache-2.0 */
/* nccl_topo_xml: the topology struct as the XML NCCL reads through NCCL_TOPO_FILE. */
#include "nccl_topo_xml.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
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

/* GT/s of one of NCCL's link speed strings ("16.0 GT/s PCIe"). */
static double _gts(const char *speed)
{
    return atof(speed);
}

/* An optional PCI identity attribute, written only when sysfs gave it. */
static void _emit_opt(_out *o, const char *key, const char *val)
{
    if (val && *val)
        _emit(o, 0, " %s=\"%s\"", key, val);
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

/* The NUMA node of the CPU NCCL attaches a top function of its tree to: the function's own numa_node
 * (ncclTopoGetXmlFromSys reads it from the function it climbs from), else its root port's. */
static int _numa_of(const dlt_topology *t, int idx)
{
    int nnuma = t->nnuma > 0 ? t->nnuma : 1, root = idx;
    if (t->pci[idx].numa >= 0)
        return t->pci[idx].numa < nnuma ? t->pci[idx].numa : 0;
    for (int hops = 0; t->pci[root].parent >= 0 && hops < DLT_MAX_PCI; hops++)
        root = t->pci[root].parent;
    return _root_numa(t, root);
}

/* The tree NCCL builds for itself (NCCL 2.30.7, src/graph/xml.cc, ncclTopoGetXmlFromSys, the "Go up
 * one level" loop), which the file must be: from a GPU or NIC, NCCL rewinds two path components at a
 * time and attaches the function to the PCI function two levels up (a PCIe switch's upstream port when
 * the function sits on one of its downstream ports), or to the CPU of its NUMA node when the function
 * or its port hangs on the root complex. A downstream port or a root port is therefore never a <pci>
 * of NCCL's own: written, it made every path through a switch cross two PCI nodes, which NCCL types
 * PXB (src/graph/paths.cc, ncclTopoSetPaths: "Differentiate between one and multiple PCI switches"),
 * where NCCL's own tree has the GPU and the NIC one PIX hop under the upstream port; under
 * NCCL_NET_GDR_LEVEL=PIX that cost GPUDirect RDMA and half the channels of a two-node ring. This
 * returns that parent: an index into t->pci, or -1 for the CPU. */
static int _nccl_parent(const dlt_topology *t, int idx)
{
    int up = t->pci[idx].parent;
    return up < 0 ? -1 : t->pci[up].parent;
}

/* Which functions NCCL's tree has (keep[i]): a GPU's or NIC's, and those NCCL climbs to from them. A
 * bridge with neither below it is not in NCCL's tree (it starts only from the GPUs and the NICs of the
 * net plugin), nor a function NCCL finds otherwise (an NVSwitch: through NVML's NVLinks). */
static void _nccl_keeps(const dlt_topology *t, unsigned char keep[DLT_MAX_PCI])
{
    memset(keep, 0, DLT_MAX_PCI);
    for (int i = 0; i < t->ngpus + t->nnics; i++) {
        int x = i < t->ngpus ? t->gpus[i].pci : t->nics[i - t->ngpus].pci;
        for (int hops = 0; x >= 0 && x < t->npci && !keep[x] && hops < DLT_MAX_PCI; hops++, x = _nccl_parent(t, x))
            keep[x] = 1;
    }
}

/* The next function (by bus id, the order NCCL keeps a parent's subs in: ncclTopoGetXmlFromSys, "Keep
 * PCI sub devices ordered by PCI Bus ID") after busid "after" ("" for the first) that NCCL keeps under
 * parent (-1: the CPU, then only those of NUMA node numa); -1 when none. */
static int _nccl_next_child(const dlt_topology *t, const unsigned char *keep, int parent, int numa, const char *after)
{
    int best = -1;
    for (int c = 0; c < t->npci; c++) {
        if (!keep[c] || _nccl_parent(t, c) != parent || strcmp(t->pci[c].busid, after) <= 0)
            continue;
        if (parent < 0 && _numa_of(t, c) != numa)
            continue;
        if (best < 0 || strcmp(t->pci[c].busid, t->pci[best].busid) < 0)
            best = c;
    }
    return best;
}

/* One PCI function of NCCL's tree and what hangs below it. Written, and why (NCCL 2.28.9 / 2.30.7,
 * src/graph/xml.cc and topo.cc): busid, class, link_speed and link_width are required on every
 * <pci> (ncclTopoAddPci fails on a missing one), and NCCL fills a node itself only on the way up
 * from its own GPU (ncclTopoGetXmlFromSys), never for a NIC's branch, whose values must therefore
 * be here; the link is the slower of the function and its upstream port, as NCCL reads it
 * (max_link_speed and ../max_link_speed: the port in sysfs, whether or not NCCL keeps it). vendor,
 * device and the subsystem ids are copied when sysfs had them (NCCL reads them verbatim), else left
 * out, never a made-up value; on a switch NCCL reads them to flatten a Broadcom PEX switch that shows
 * itself as two levels (topo.cc, ncclTopoFlattenBcmSwitches: parent and sub-switch matched by these
 * ids), which it does on the file's tree as on its own. A GPU is an empty <gpu/>: its dev, sm, gdr
 * and NVLinks are NCCL's own (ncclTopoGetXmlFromGpu fills them only where the file leaves them out,
 * and finds NVLinks only for a <gpu> without <nvlink>; a written gdr="1" would skip its GPUDirect
 * RDMA check and fail at connection set-up on a node without nvidia-peermem or DMA-BUF; a written dev
 * is slurmstepd's NVML index, not a container's). A NIC is its <net name>: speed, port, guid,
 * maxconn, latency and gdr come from NCCL's net plugin (ncclTopoPopulateNics, the same on every rank);
 * a written guid="0x0" made every Ethernet NIC one device to NCCL's search. Below the function: the
 * functions NCCL keeps under it (_nccl_parent), never its downstream ports. */
static void _emit_pci(const dlt_topology *t, const unsigned char *keep, _out *o, int idx, int indent, int depth)
{
    const dlt_pci *p = &t->pci[idx];
    const char *speed = _or(p->link_speed, "8.0 GT/s PCIe");
    int width = p->link_width > 0 ? p->link_width : 16;
    int g = _gpu_at(t, idx), n = _nic_at(t, idx);
    int first = depth < 16 ? _nccl_next_child(t, keep, idx, 0, "") : -1;
    int has_children = g >= 0 || n >= 0 || first >= 0;
    if (p->parent >= 0) { /* the upstream port's limits, as NCCL's min(device, ../) */
        const dlt_pci *up = &t->pci[p->parent];
        if (up->link_speed[0] && _gts(up->link_speed) < _gts(speed))
            speed = up->link_speed;
        if (up->link_width > 0 && up->link_width < width)
            width = up->link_width;
    }
    _emit(o, indent, "<pci busid=\"%s\" class=\"%s\"", p->busid, _or(p->cls, "0x060400"));
    _emit_opt(o, "vendor", p->vendor);
    _emit_opt(o, "device", p->device);
    _emit_opt(o, "subsystem_vendor", p->subsys_vendor);
    _emit_opt(o, "subsystem_device", p->subsys_device);
    _emit(o, 0, " link_speed=\"%s\" link_width=\"%d\"%s\n", speed, width, has_children ? ">" : "/>");
    if (!has_children)
        return;
    if (g >= 0)
        _emit(o, indent + 1, "<gpu/>\n");
    if (n >= 0) {
        const dlt_nic *nic = &t->nics[n];
        _emit(o, indent + 1, "<nic>\n");
        _emit(o, indent + 2, "<net name=\"%s\"/>\n", nic->is_ib ? nic->name : _or(nic->netdev, nic->name));
        _emit(o, indent + 1, "</nic>\n");
    }
    for (int c = first; c >= 0; c = _nccl_next_child(t, keep, idx, 0, t->pci[c].busid))
        _emit_pci(t, keep, o, c, indent + 1, depth + 1);
    _emit(o, indent, "</pci>\n");
}

/* NCCL's name for the architecture (kvDictCpuArch: x86_64, arm64, ppc64; it matches by prefix,
 * so uname's "aarch64" would be no architecture at all), or NULL for one it does not model. */
static const char *_nccl_arch(const char *machine)
{
    if (!strcmp(machine, "x86_64") || !strcmp(machine, "i686") || !strcmp(machine, "i386"))
        return "x86_64";
    if (!strcmp(machine, "aarch64") || !strcmp(machine, "arm64"))
        return "arm64";
    if (!strncmp(machine, "ppc64", 5))
        return "ppc64";
    return NULL;
}

/* NCCL's familyid is CPUID's family + (extended family << 4) (ncclTopoGetXmlFromCpu); Linux's "cpu
 * family" adds the extended family to the base family 15 instead (AMD Zen: 23, NCCL 143). */
static int _nccl_familyid(int linux_family)
{
    return linux_family >= 15 ? 15 + ((linux_family - 15) << 4) : linux_family;
}

int dlt_nccl_topo_xml(const dlt_topology *t, char *buf, size_t buflen)
{
    _out o = {buf, 0, buflen, 0};
    int nnuma = t->nnuma > 0 ? t->nnuma : 1, ncpus = 0;
    unsigned char keep[DLT_MAX_PCI];
    const char *arch = _nccl_arch(_or(t->arch, "x86_64"));
    if (!buf || !buflen)
        return -EINVAL;
    /* Every <cpu> must name its architecture, and on x86 its vendor (ncclTopoAddCpu); NCCL fills
     * them itself only for the CPU above its own GPU, so a CPU with NICs alone would fail. */
    if (!arch)
        return -ENOTSUP;
    if (!strcmp(arch, "x86_64") && !t->cpu_vendor[0])
        return -ENODATA;
    for (int n = 0; n < t->nnuma; n++)
        for (int c = DLT_MAX_CPUS - 1; c >= 0; c--)
            if ((t->numa_cpus[n].bits[c / 64] >> (c % 64)) & 1u) {
                if (c + 1 > ncpus)
                    ncpus = c + 1;
                break;
            }
    _nccl_keeps(t, keep);
    _emit(&o, 0, "<system version=\"1\">\n");
    for (int numa = 0; numa < nnuma; numa++) {
        char mask[DLT_MAX_CPUS / 4 + DLT_MAX_CPUS / 32 + 1] = "";
        int top = _nccl_next_child(t, keep, -1, numa, "");
        if (top < 0)
            continue; /* no GPU and no NIC on that node */
        if (numa < t->nnuma && dlt_cpuset_count(&t->numa_cpus[numa]) > 0)
            dlt_cpuset_format_mask(&t->numa_cpus[numa], ncpus, mask, sizeof(mask));
        /* affinity: the node's CPUs (NCCL reads nodeN/cpumap), left out when unknown rather than
         * written empty; vendor, familyid and modelid are read by NCCL on x86 only */
        _emit(&o, 1, "<cpu numaid=\"%d\"", numa);
        _emit_opt(&o, "affinity", mask);
        _emit(&o, 0, " arch=\"%s\"", arch);
        if (!strcmp(arch, "x86_64"))
            _emit(&o, 0, " vendor=\"%s\" familyid=\"%d\" modelid=\"%d\"", t->cpu_vendor, _nccl_familyid(t->cpu_family),
                  t->cpu_model);
        _emit(&o, 0, ">\n");
        for (int c = top; c >= 0; c = _nccl_next_child(t, keep, -1, numa, t->pci[c].busid))
            _emit_pci(t, keep, &o, c, 2, 0);
        _emit(&o, 1, "</cpu>\n");
    }
    _emit(&o, 0, "</system>\n");
    if (o.overflow)
        return -ENOSPC;
    return (int)o.len;
}
