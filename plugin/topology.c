/* SPDX-License-Identifier: Apache-2.0 */
/* topology: node discovery into a plain struct (NVML for GPUs and NVLinks, sysfs for the rest). */
#include "topology.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#define READ_MAX 4096

const char *dlt_distance_name(dlt_distance d)
{
    static const char *names[] = {"X", "NV", "PIX", "PXB", "PHB", "NODE", "SYS"};
    return (d >= DLT_DIST_SELF && d <= DLT_DIST_SYS) ? names[d] : "?";
}

/* ------------------------------------------------------------------ cpusets */

int dlt_cpuset_parse(const char *text, dlt_cpuset *set)
{
    const char *p = text;
    memset(set, 0, sizeof(*set));
    if (!text)
        return -1;
    while (*p && *p != '\n') {
        char *end;
        long lo, hi;
        if (!isdigit((unsigned char)*p))
            return -1;
        lo = strtol(p, &end, 10);
        hi = lo;
        p = end;
        if (*p == '-') {
            p++;
            if (!isdigit((unsigned char)*p))
                return -1;
            hi = strtol(p, &end, 10);
            p = end;
        }
        if (lo < 0 || hi < lo || hi >= DLT_MAX_CPUS)
            return -1;
        for (long c = lo; c <= hi; c++)
            set->bits[c / 64] |= 1ull << (c % 64);
        if (*p == ',')
            p++;
        else if (*p && *p != '\n')
            return -1;
    }
    return 0;
}

static int _cpu_isset(const dlt_cpuset *s, int c)
{
    return (s->bits[c / 64] >> (c % 64)) & 1u;
}

int dlt_cpuset_count(const dlt_cpuset *set)
{
    int n = 0;
    for (int w = 0; w < DLT_CPU_WORDS; w++)
        n += __builtin_popcountll(set->bits[w]);
    return n;
}

void dlt_cpuset_and(dlt_cpuset *dst, const dlt_cpuset *a, const dlt_cpuset *b)
{
    for (int w = 0; w < DLT_CPU_WORDS; w++)
        dst->bits[w] = a->bits[w] & b->bits[w];
}

int dlt_cpuset_format(const dlt_cpuset *set, char *buf, size_t buflen)
{
    size_t used = 0;
    if (!buflen)
        return -1;
    buf[0] = '\0';
    for (int c = 0; c < DLT_MAX_CPUS; c++) {
        int end = c, w;
        if (!_cpu_isset(set, c))
            continue;
        while (end + 1 < DLT_MAX_CPUS && _cpu_isset(set, end + 1))
            end++;
        w = end > c ? snprintf(buf + used, buflen - used, "%s%d-%d", used ? "," : "", c, end)
                    : snprintf(buf + used, buflen - used, "%s%d", used ? "," : "", c);
        if (w < 0 || (size_t)w >= buflen - used)
            return -1;
        used += (size_t)w;
        c = end;
    }
    return 0;
}

int dlt_cpuset_format_mask(const dlt_cpuset *set, int ncpus, char *buf, size_t buflen)
{
    /* 32-bit words, most significant first, comma separated: the kernel's cpumap format. */
    int words = ncpus <= 0 ? 1 : (ncpus + 31) / 32;
    size_t used = 0;
    if (words > DLT_MAX_CPUS / 32)
        words = DLT_MAX_CPUS / 32;
    for (int w = words - 1; w >= 0; w--) {
        uint32_t v = (uint32_t)(set->bits[w / 2] >> (32 * (w % 2)));
        int n = snprintf(buf + used, buflen - used, "%s%08x", used ? "," : "", v);
        if (n < 0 || (size_t)n >= buflen - used)
            return -1;
        used += (size_t)n;
    }
    return 0;
}

/* ------------------------------------------------------------------ small helpers */

static int _is_bdf(const char *s)
{
    char norm[DLT_BUSID_LEN];
    return strlen(s) == 12 && dlt_pci_busid_normalize(s, norm, DLT_BUSID_LEN) == 0 && strcmp(norm, s) == 0;
}

/* Reads at most READ_MAX-1 bytes of root/rel, strips trailing whitespace. */
static int _read_file(const char *root, const char *rel, char *buf, size_t buflen)
{
    char path[PATH_MAX];
    FILE *f;
    size_t n;
    if (snprintf(path, sizeof(path), "%s/%s", root, rel) >= (int)sizeof(path))
        return -1;
    f = fopen(path, "re");
    if (!f)
        return -1;
    n = fread(buf, 1, buflen - 1, f);
    fclose(f);
    buf[n] = '\0';
    while (n > 0 && isspace((unsigned char)buf[n - 1]))
        buf[--n] = '\0';
    return 0;
}

static int _read_int(const char *root, const char *rel, int dflt)
{
    char buf[64];
    char *end;
    long v;
    if (_read_file(root, rel, buf, sizeof(buf)) != 0)
        return dflt;
    v = strtol(buf, &end, 0);
    return (end == buf || v < INT_MIN || v > INT_MAX) ? dflt : (int)v;
}

static int _read_int_at(const char *root, const char *dir, const char *name, int dflt)
{
    char rel[PATH_MAX];
    if (snprintf(rel, sizeof(rel), "%s/%s", dir, name) >= (int)sizeof(rel))
        return dflt;
    return _read_int(root, rel, dflt);
}

static void _copy_attr(const char *root, const char *dir, const char *name, char *out, size_t outlen)
{
    char rel[PATH_MAX], buf[64];
    out[0] = '\0';
    if (snprintf(rel, sizeof(rel), "%s/%s", dir, name) >= (int)sizeof(rel))
        return;
    if (_read_file(root, rel, buf, sizeof(buf)) == 0 && strlen(buf) < outlen) {
        for (char *c = buf; *c; c++)
            if (!isprint((unsigned char)*c) || *c == '"' || *c == '<' || *c == '>' || *c == '&')
                return; /* never copy anything that could break the XML */
        snprintf(out, outlen, "%s", buf);
    }
}

/* NCCL accepts only its fixed list of link speed strings. */
static void _normalize_link_speed(const char *in, char *out, size_t outlen)
{
    static const struct {
        const char *prefix;
        const char *nccl;
    } map[] = {{"2.5", "2.5 GT/s PCIe"},   {"5", "5.0 GT/s PCIe"},    {"5.0", "5.0 GT/s PCIe"},
               {"8", "8.0 GT/s PCIe"},     {"8.0", "8.0 GT/s PCIe"},  {"16", "16.0 GT/s PCIe"},
               {"16.0", "16.0 GT/s PCIe"}, {"32", "32.0 GT/s PCIe"},  {"32.0", "32.0 GT/s PCIe"},
               {"64", "64.0 GT/s PCIe"},   {"64.0", "64.0 GT/s PCIe"}};
    char num[16];
    size_t n = strcspn(in, " ");
    /* Unknown or unreadable: NCCL's own fallback is Gen3. */
    snprintf(out, outlen, "%s", "8.0 GT/s PCIe");
    if (n == 0 || n >= sizeof(num))
        return;
    memcpy(num, in, n);
    num[n] = '\0';
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        if (!strcmp(num, map[i].prefix)) {
            snprintf(out, outlen, "%s", map[i].nccl);
            return;
        }
}

/* ------------------------------------------------------------------ NVML */

int dlt_topo_add_nvml_gpus(dlt_topology *t, const dlt_nvml *nvml, dlt_err *err)
{
    unsigned int count = 0;
    dlt_nvmlDevice_t dev[DLT_MAX_GPUS];
    dlt_nvmlReturn_t rc;

    rc = nvml->DeviceGetCount_v2(&count);
    if (rc != DLT_NVML_SUCCESS) {
        return dlt_fail(err, -EIO, "nvmlDeviceGetCount failed: %s", nvml->ErrorString(rc));
    }
    if (count > DLT_MAX_GPUS) {
        return dlt_fail(err, -E2BIG, "node has %u GPUs; this build handles at most %d", count, DLT_MAX_GPUS);
    }
    t->ngpus = 0;
    for (unsigned i = 0; i < count; i++) {
        dlt_gpu *g = &t->gpus[i];
        dlt_nvmlPciInfo_t pci;
        unsigned minor = 0;
        int major = 0, minor_cc = 0;
        memset(g, 0, sizeof(*g));
        g->nvml_index = (int)i;
        g->pci = -1;
        g->numa = -1;
        rc = nvml->DeviceGetHandleByIndex_v2(i, &dev[i]);
        if (rc == DLT_NVML_SUCCESS)
            rc = nvml->DeviceGetPciInfo_v3(dev[i], &pci);
        if (rc != DLT_NVML_SUCCESS) {
            return dlt_fail(err, -EIO, "NVML: GPU %u: %s", i, nvml->ErrorString(rc));
        }
        pci.busId[sizeof(pci.busId) - 1] = '\0';
        if (dlt_pci_busid_normalize(pci.busId, g->busid, DLT_BUSID_LEN) != 0) {
            return dlt_fail(err, -EIO, "NVML: GPU %u has an unparsable PCI bus id '%.32s'", i, pci.busId);
        }
        g->minor = nvml->DeviceGetMinorNumber(dev[i], &minor) == DLT_NVML_SUCCESS ? (int)minor : -1;
        if (nvml->DeviceGetName(dev[i], g->name, sizeof(g->name)) != DLT_NVML_SUCCESS)
            snprintf(g->name, sizeof(g->name), "GPU");
        g->name[sizeof(g->name) - 1] = '\0';
        for (char *c = g->name; *c; c++)
            if (!isprint((unsigned char)*c) || *c == '"' || *c == '<' || *c == '&')
                *c = '_';
        if (nvml->DeviceGetCudaComputeCapability(dev[i], &major, &minor_cc) == DLT_NVML_SUCCESS)
            g->sm = major * 10 + minor_cc;
        t->ngpus++;
    }
    /* NVLinks: a second pass, now that every GPU's bus id is known. */
    for (int i = 0; i < t->ngpus; i++) {
        dlt_gpu *g = &t->gpus[i];
        for (unsigned link = 0; link < DLT_NVML_NVLINK_MAX_LINKS; link++) {
            int active = 0, type = -1, peer = -1;
            dlt_nvmlPciInfo_t rpci;
            char rbus[DLT_BUSID_LEN];
            if (nvml->DeviceGetNvLinkState(dev[i], link, &active) != DLT_NVML_SUCCESS || !active)
                continue;
            if (nvml->DeviceGetNvLinkRemotePciInfo_v2(dev[i], link, &rpci) != DLT_NVML_SUCCESS)
                continue;
            rpci.busId[sizeof(rpci.busId) - 1] = '\0';
            if (dlt_pci_busid_normalize(rpci.busId, rbus, DLT_BUSID_LEN) != 0)
                continue;
            for (int j = 0; j < t->ngpus; j++)
                if (j != i && !strcmp(t->gpus[j].busid, rbus))
                    peer = j;
            if (peer < 0 && nvml->DeviceGetNvLinkRemoteDeviceType)
                (void)nvml->DeviceGetNvLinkRemoteDeviceType(dev[i], link, &type);
            if (peer >= 0) {
                g->nvlink_to_gpu[peer]++;
            } else if (type == DLT_NVML_NVLINK_DEVICE_TYPE_IBMNPU) {
                g->nvlink_to_cpu++;
            } else {
                /* Not a GPU of this node: an NVSwitch (type SWITCH, or unknown on old drivers). */
                g->nvlink_to_switch++;
                if (!g->switch_busid[0])
                    snprintf(g->switch_busid, sizeof(g->switch_busid), "%s", rbus);
            }
        }
        for (int j = 0; j < t->ngpus; j++) {
            int status = -1;
            g->p2p_ok[j] = -1;
            if (j == i || !nvml->DeviceGetP2PStatus)
                continue;
            if (nvml->DeviceGetP2PStatus(dev[i], dev[j], DLT_NVML_P2P_CAPS_INDEX_READ, &status) == DLT_NVML_SUCCESS)
                g->p2p_ok[j] = status == DLT_NVML_P2P_STATUS_OK;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------ sysfs */

static int _find_pci(const dlt_topology *t, const char *busid)
{
    for (int i = 0; i < t->npci; i++)
        if (!strcmp(t->pci[i].busid, busid))
            return i;
    return -1;
}

/* Adds the PCI function at sysfs path devpath (relative to root, "sys/devices/pci0000:00/...")
 * and all bridges above it. Returns its index or -1. */
static int _add_pci_chain(dlt_topology *t, const char *root, const char *devpath)
{
    char path[PATH_MAX], rel[PATH_MAX], *save = NULL, *tok;
    char hostbridge[24] = "";
    int parent = -1, idx = -1;
    size_t rel_len = 0;

    if (snprintf(path, sizeof(path), "%s", devpath) >= (int)sizeof(path))
        return -1;
    if (strncmp(path, "sys/devices/", 12) != 0)
        return -1;
    rel[0] = '\0';
    for (tok = strtok_r(path, "/", &save); tok; tok = strtok_r(NULL, "/", &save)) {
        int w = snprintf(rel + rel_len, sizeof(rel) - rel_len, "%s%s", rel_len ? "/" : "", tok);
        if (w < 0 || (size_t)w >= sizeof(rel) - rel_len)
            return -1;
        rel_len += (size_t)w;
        if (!strncmp(tok, "pci", 3) && strlen(tok) < sizeof(hostbridge)) {
            snprintf(hostbridge, sizeof(hostbridge), "%s", tok);
            parent = -1;
            continue;
        }
        if (!hostbridge[0] || !_is_bdf(tok))
            continue; /* sys, devices, or a non-PCI node above the host bridge */
        idx = _find_pci(t, tok);
        if (idx < 0) {
            dlt_pci *p;
            char speed[32];
            if (t->npci >= DLT_MAX_PCI)
                return -1;
            idx = t->npci++;
            p = &t->pci[idx];
            memset(p, 0, sizeof(*p));
            snprintf(p->busid, sizeof(p->busid), "%s", tok);
            snprintf(p->root, sizeof(p->root), "%s", hostbridge);
            p->parent = parent;
            _copy_attr(root, rel, "class", p->cls, sizeof(p->cls));
            _copy_attr(root, rel, "vendor", p->vendor, sizeof(p->vendor));
            _copy_attr(root, rel, "device", p->device, sizeof(p->device));
            _copy_attr(root, rel, "subsystem_vendor", p->subsys_vendor, sizeof(p->subsys_vendor));
            _copy_attr(root, rel, "subsystem_device", p->subsys_device, sizeof(p->subsys_device));
            _copy_attr(root, rel, "max_link_speed", speed, sizeof(speed));
            _normalize_link_speed(speed, p->link_speed, sizeof(p->link_speed));
            p->link_width = _read_int_at(root, rel, "max_link_width", 16);
            if (p->link_width <= 0 || p->link_width > 32)
                p->link_width = 16;
            p->numa = _read_int_at(root, rel, "numa_node", -1);
            if (p->numa < -1 || p->numa >= DLT_MAX_NUMA)
                p->numa = -1;
            if (!p->cls[0])
                snprintf(p->cls, sizeof(p->cls), "0x060400");
        }
        parent = idx;
    }
    return idx;
}

/* Resolves root/<link> to a path relative to root ("sys/devices/..."); -1 when it leaves root. */
static int _resolve_rel(const char *root_real, const char *root, const char *link, char *out, size_t outlen)
{
    char path[PATH_MAX], real[PATH_MAX];
    size_t n = strlen(root_real);
    if (snprintf(path, sizeof(path), "%s/%s", root, link) >= (int)sizeof(path))
        return -1;
    if (!realpath(path, real))
        return -1;
    if (strcmp(root_real, "/") == 0)
        n = 0;
    else if (strncmp(real, root_real, n) != 0 || real[n] != '/')
        return -1;
    return snprintf(out, outlen, "%s", real + n + 1) < (int)outlen ? 0 : -1;
}

static void _load_gpus_sysfs(dlt_topology *t, const char *root, const char *root_real)
{
    for (int i = 0; i < t->ngpus; i++) {
        dlt_gpu *g = &t->gpus[i];
        char link[128], rel[PATH_MAX], file[PATH_MAX + 32], cpus[READ_MAX];
        snprintf(link, sizeof(link), "sys/bus/pci/devices/%s", g->busid);
        g->pci = -1;
        g->numa = -1;
        memset(&g->local_cpus, 0, sizeof(g->local_cpus));
        if (_resolve_rel(root_real, root, link, rel, sizeof(rel)) != 0)
            continue;
        g->pci = _add_pci_chain(t, root, rel);
        g->numa = _read_int_at(root, rel, "numa_node", -1);
        if (g->numa < -1 || g->numa >= DLT_MAX_NUMA)
            g->numa = -1;
        snprintf(file, sizeof(file), "%s/local_cpulist", rel);
        if (_read_file(root, file, cpus, sizeof(cpus)) == 0)
            (void)dlt_cpuset_parse(cpus, &g->local_cpus);
    }
}

static int _valid_ifname(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n >= 32 || s[0] == '.')
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '-' && s[i] != '.' && s[i] != ':')
            return 0;
    return 1;
}

static dlt_nic *_new_nic(dlt_topology *t, const char *root, const char *root_real, const char *name,
                         const char *devlink)
{
    dlt_nic *n;
    char rel[PATH_MAX];
    const char *base;
    if (t->nnics >= DLT_MAX_NICS || !_valid_ifname(name))
        return NULL;
    if (_resolve_rel(root_real, root, devlink, rel, sizeof(rel)) != 0)
        return NULL; /* virtual: no PCI device behind it */
    base = strrchr(rel, '/');
    base = base ? base + 1 : rel;
    /* A device on a bus of its own below a PCI function (virtio-net: .../0000:00:03.0/virtio2, the
     * usual NIC of a cloud VM) is that function's: its distances and NUMA node are the function's. */
    for (int up = 0; up < 2 && !_is_bdf(base) && base != rel; up++) {
        rel[base - rel - 1] = '\0';
        base = strrchr(rel, '/');
        base = base ? base + 1 : rel;
    }
    if (!_is_bdf(base))
        return NULL;
    for (int i = 0; i < t->nnics; i++)
        if (!strcmp(t->nics[i].busid, base))
            return NULL; /* an HCA's own netdev, already listed */
    n = &t->nics[t->nnics];
    memset(n, 0, sizeof(*n));
    snprintf(n->name, sizeof(n->name), "%.31s", name);
    snprintf(n->busid, sizeof(n->busid), "%.15s", base);
    n->pci = _add_pci_chain(t, root, rel);
    n->numa = _read_int_at(root, rel, "numa_node", -1);
    if (n->numa < -1 || n->numa >= DLT_MAX_NUMA)
        n->numa = -1;
    n->port = 1;
    t->nnics++;
    return n;
}

static void _load_ib(dlt_topology *t, const char *root, const char *root_real)
{
    char dirpath[PATH_MAX];
    DIR *d;
    struct dirent *e;
    snprintf(dirpath, sizeof(dirpath), "%s/sys/class/infiniband", root);
    d = opendir(dirpath);
    if (!d)
        return;
    while ((e = readdir(d)) != NULL) {
        char link[PATH_MAX], file[PATH_MAX], buf[128], netdir[PATH_MAX];
        dlt_nic *n;
        DIR *nd;
        struct dirent *ne;
        if (e->d_name[0] == '.' || strlen(e->d_name) >= 32)
            continue;
        snprintf(link, sizeof(link), "sys/class/infiniband/%s/device", e->d_name);
        n = _new_nic(t, root, root_real, e->d_name, link);
        if (!n)
            continue;
        n->is_ib = 1;
        snprintf(file, sizeof(file), "sys/class/infiniband/%s/ports/1/rate", e->d_name);
        if (_read_file(root, file, buf, sizeof(buf)) == 0)
            n->speed_mbps = atoi(buf) * 1000; /* "100 Gb/sec (4X EDR)" */
        snprintf(file, sizeof(file), "sys/class/infiniband/%s/ports/1/state", e->d_name);
        n->up = _read_file(root, file, buf, sizeof(buf)) == 0 && strstr(buf, "ACTIVE") != NULL;
        snprintf(file, sizeof(file), "sys/class/infiniband/%s/node_guid", e->d_name);
        if (_read_file(root, file, buf, sizeof(buf)) == 0) {
            size_t k = 0;
            k += (size_t)snprintf(n->guid, sizeof(n->guid), "0x");
            for (char *c = buf; *c && k + 1 < sizeof(n->guid); c++)
                if (isxdigit((unsigned char)*c))
                    n->guid[k++] = (char)tolower((unsigned char)*c);
            n->guid[k] = '\0';
        }
        snprintf(netdir, sizeof(netdir), "%s/sys/class/infiniband/%s/device/net", root, e->d_name);
        nd = opendir(netdir);
        if (nd) {
            while ((ne = readdir(nd)) != NULL)
                if (ne->d_name[0] != '.' && _valid_ifname(ne->d_name) &&
                    (!n->netdev[0] || strcmp(ne->d_name, n->netdev) < 0))
                    snprintf(n->netdev, sizeof(n->netdev), "%.31s", ne->d_name);
            closedir(nd);
        }
    }
    closedir(d);
}

static void _load_net(dlt_topology *t, const char *root, const char *root_real)
{
    char dirpath[PATH_MAX];
    DIR *d;
    struct dirent *e;
    snprintf(dirpath, sizeof(dirpath), "%s/sys/class/net", root);
    d = opendir(dirpath);
    if (!d)
        return;
    while ((e = readdir(d)) != NULL) {
        char link[PATH_MAX], file[PATH_MAX], buf[64];
        dlt_nic *n;
        if (e->d_name[0] == '.' || !strcmp(e->d_name, "lo") || strlen(e->d_name) >= 32)
            continue;
        snprintf(link, sizeof(link), "sys/class/net/%s/device", e->d_name);
        n = _new_nic(t, root, root_real, e->d_name, link);
        if (!n)
            continue;
        snprintf(n->netdev, sizeof(n->netdev), "%.31s", e->d_name);
        snprintf(file, sizeof(file), "sys/class/net/%s/speed", e->d_name);
        n->speed_mbps = _read_int(root, file, 0);
        if (n->speed_mbps < 0)
            n->speed_mbps = 0;
        snprintf(file, sizeof(file), "sys/class/net/%s/operstate", e->d_name);
        n->up = _read_file(root, file, buf, sizeof(buf)) == 0 && !strcmp(buf, "up");
    }
    closedir(d);
}

static void _load_numa(dlt_topology *t, const char *root)
{
    t->nnuma = 0;
    for (int n = 0; n < DLT_MAX_NUMA; n++) {
        char file[96], buf[READ_MAX];
        snprintf(file, sizeof(file), "sys/devices/system/node/node%d/cpulist", n);
        if (_read_file(root, file, buf, sizeof(buf)) != 0)
            break;
        if (dlt_cpuset_parse(buf, &t->numa_cpus[n]) != 0)
            memset(&t->numa_cpus[n], 0, sizeof(t->numa_cpus[n]));
        t->nnuma = n + 1;
    }
}

static void _load_cpuinfo(dlt_topology *t, const char *root)
{
    char path[PATH_MAX], line[512];
    FILE *f;
    struct utsname u;
    snprintf(t->arch, sizeof(t->arch), "%.15s", uname(&u) == 0 ? u.machine : "x86_64");
    snprintf(path, sizeof(path), "%s/proc/cpuinfo", root);
    f = fopen(path, "re");
    if (!f)
        return;
    for (int lines = 0; lines < 64 && fgets(line, sizeof(line), f); lines++) {
        char *colon = strchr(line, ':');
        char *val;
        if (!colon)
            continue;
        colon[strcspn(colon, "\n")] = '\0';
        if (!strncmp(line, "vendor_id", 9)) {
            /* CPUID's vendor string as it is ("vendor_id\t: %s"): NCCL compares it whole, and
             * Zhaoxin's is "  Shanghai  "; one that could break the XML is no vendor at all */
            val = colon[1] == ' ' ? colon + 2 : colon + 1;
            snprintf(t->cpu_vendor, sizeof(t->cpu_vendor), "%.31s", val);
            for (const char *c = t->cpu_vendor; *c; c++)
                if (!isprint((unsigned char)*c) || *c == '"' || *c == '<' || *c == '>' || *c == '&') {
                    t->cpu_vendor[0] = '\0';
                    break;
                }
            continue;
        }
        val = colon + 1;
        while (*val == ' ' || *val == '\t')
            val++;
        if (!strncmp(line, "cpu family", 10))
            t->cpu_family = atoi(val);
        else if (!strncmp(line, "model", 5) && strncmp(line, "model name", 10))
            t->cpu_model = atoi(val);
    }
    fclose(f);
}

int dlt_topo_load_sysfs(dlt_topology *t, const char *root, dlt_err *err)
{
    char root_real[PATH_MAX];
    const char *r = (root && *root) ? root : "/";
    if (!realpath(r, root_real)) {
        return dlt_fail(err, -errno, "sysfs root %s: %s", r, strerror(errno));
    }
    if (!strcmp(r, "/"))
        r = "";
    t->npci = 0;
    t->nnics = 0;
    _load_gpus_sysfs(t, r, root_real);
    _load_ib(t, r, root_real);
    _load_net(t, r, root_real);
    /* readdir order is arbitrary: sort so NIC indices (and the XML) are the same on every run. */
    for (int i = 1; i < t->nnics; i++)
        for (int j = i;
             j > 0 && (t->nics[j - 1].is_ib < t->nics[j].is_ib ||
                       (t->nics[j - 1].is_ib == t->nics[j].is_ib && strcmp(t->nics[j - 1].name, t->nics[j].name) > 0));
             j--) {
            dlt_nic tmp = t->nics[j];
            t->nics[j] = t->nics[j - 1];
            t->nics[j - 1] = tmp;
        }
    _load_numa(t, r);
    _load_cpuinfo(t, r);
    /* A GPU without local_cpulist: its NUMA node's CPUs. */
    for (int i = 0; i < t->ngpus; i++) {
        dlt_gpu *g = &t->gpus[i];
        if (dlt_cpuset_count(&g->local_cpus) == 0 && g->numa >= 0 && g->numa < t->nnuma)
            g->local_cpus = t->numa_cpus[g->numa];
    }
    return 0;
}

/* ------------------------------------------------------------------ distances */

static int _depth_chain(const dlt_topology *t, int idx, int chain[], int max)
{
    int n = 0;
    while (idx >= 0 && n < max) {
        chain[n++] = idx;
        idx = t->pci[idx].parent;
    }
    return n; /* chain[0] is the device itself, chain[n-1] the root port */
}

dlt_distance dlt_topo_pci_distance(const dlt_topology *t, int a, int b)
{
    int ca[DLT_MAX_PCI], cb[DLT_MAX_PCI], na, nb, common = -1, ia = 0, ib = 0;
    if (a < 0 || b < 0 || a >= t->npci || b >= t->npci)
        return DLT_DIST_SYS;
    if (a == b)
        return DLT_DIST_SELF;
    na = _depth_chain(t, a, ca, DLT_MAX_PCI);
    nb = _depth_chain(t, b, cb, DLT_MAX_PCI);
    /* Lowest common ancestor: walk both chains from the root. */
    for (int i = na - 1, j = nb - 1; i >= 0 && j >= 0 && ca[i] == cb[j]; i--, j--) {
        common = ca[i];
        ia = i;
        ib = j;
    }
    if (common >= 0) {
        /* ia/ib: how many links below the common bridge each side is. One bridge between: PIX. */
        /* Device -> downstream port -> switch upstream port is one switch: PIX, as nvidia-smi. */
        return (ia <= 2 && ib <= 2) ? DLT_DIST_PIX : DLT_DIST_PXB;
    }
    if (!strcmp(t->pci[a].root, t->pci[b].root))
        return DLT_DIST_PHB;
    if (t->pci[ca[na - 1]].numa >= 0 && t->pci[ca[na - 1]].numa == t->pci[cb[nb - 1]].numa)
        return DLT_DIST_NODE;
    return DLT_DIST_SYS;
}

dlt_distance dlt_topo_gpu_distance(const dlt_topology *t, int ga, int gb)
{
    if (ga == gb)
        return DLT_DIST_SELF;
    if (t->gpus[ga].nvlink_to_gpu[gb] > 0 || (t->gpus[ga].nvlink_to_switch > 0 && t->gpus[gb].nvlink_to_switch > 0))
        return DLT_DIST_NVLINK;
    return dlt_topo_pci_distance(t, t->gpus[ga].pci, t->gpus[gb].pci);
}
