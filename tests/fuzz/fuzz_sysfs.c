/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: the sysfs reader on trees built from the input: device files with arbitrary
 * contents (numa_node, local_cpulist, class, link speed, IB rate/guid, interface names) and
 * symlinks that may point outside the root. The result must be a sane topology. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plugin/nccl_topo_xml.h"
#include "plugin/topology.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char g_root[256];

static void _write(const char *rel, const char *buf, size_t n)
{
    char path[1024];
    FILE *f;
    snprintf(path, sizeof(path), "%s/%s", g_root, rel);
    f = fopen(path, "w");
    if (f) {
        fwrite(buf, 1, n, f);
        fclose(f);
    }
}

static void _mkdirs(const char *rel)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", g_root, rel);
    for (char *p = path + strlen(g_root) + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(path, 0755);
            *p = '/';
        }
    mkdir(path, 0755);
}

/* Splits the input into fields at '|' (bounded). */
static size_t _field(const uint8_t **p, size_t *n, char *out, size_t outlen)
{
    size_t k = 0;
    while (*n && **p != '|') {
        if (k + 1 < outlen)
            out[k++] = (char)**p;
        (*p)++, (*n)--;
    }
    if (*n)
        (*p)++, (*n)--;
    out[k] = '\0';
    return k;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static dlt_topology t;
    static char xml[1 << 18];
    char f[8][128], cmd[512];
    dlt_err err = DLT_ERR_INIT;
    const uint8_t *p = data;
    size_t n = size;
    if (!g_root[0]) {
        snprintf(g_root, sizeof(g_root), "/tmp/dlt-fuzz-sysfs-%d", (int)getpid());
    }
    snprintf(cmd, sizeof(cmd), "rm -rf %s", g_root);
    if (system(cmd) != 0)
        return 0;
    for (int i = 0; i < 8; i++)
        _field(&p, &n, f[i], sizeof(f[i]));
    /* One GPU under a bridge, an IB HCA, a network interface whose name comes from the input. */
    _mkdirs("sys/devices/pci0000:00/0000:00:02.0/0000:03:00.0");
    _mkdirs("sys/bus/pci/devices");
    symlink("../../../devices/pci0000:00/0000:00:02.0/0000:03:00.0",
            (snprintf(cmd, sizeof(cmd), "%s/sys/bus/pci/devices/0000:03:00.0", g_root), cmd));
    _write("sys/devices/pci0000:00/0000:00:02.0/0000:03:00.0/numa_node", f[0], strlen(f[0]));
    _write("sys/devices/pci0000:00/0000:00:02.0/0000:03:00.0/local_cpulist", f[1], strlen(f[1]));
    _write("sys/devices/pci0000:00/0000:00:02.0/0000:03:00.0/class", f[2], strlen(f[2]));
    _write("sys/devices/pci0000:00/0000:00:02.0/max_link_speed", f[3], strlen(f[3]));
    _mkdirs("sys/class/infiniband/mlx5_0/ports/1");
    symlink("../../../devices/pci0000:00/0000:00:02.0/0000:03:00.0",
            (snprintf(cmd, sizeof(cmd), "%s/sys/class/infiniband/mlx5_0/device", g_root), cmd));
    _write("sys/class/infiniband/mlx5_0/ports/1/rate", f[4], strlen(f[4]));
    _write("sys/class/infiniband/mlx5_0/node_guid", f[5], strlen(f[5]));
    if (f[6][0] && !strchr(f[6], '/') && strcmp(f[6], ".") && strcmp(f[6], "..")) {
        snprintf(cmd, sizeof(cmd), "sys/class/net/%s", f[6]);
        _mkdirs(cmd);
        /* The device link may escape the root: it must then be ignored. */
        snprintf(cmd, sizeof(cmd), "%s/sys/class/net/%s/device", g_root, f[6]);
        symlink(f[7][0] == 'x' ? "/etc" : "../../../devices/pci0000:00/0000:00:02.0", cmd);
    }
    _mkdirs("sys/devices/system/node/node0");
    _write("sys/devices/system/node/node0/cpulist", f[1], strlen(f[1]));
    memset(&t, 0, sizeof(t));
    t.ngpus = 1;
    snprintf(t.gpus[0].busid, sizeof(t.gpus[0].busid), "0000:03:00.0");
    if (dlt_topo_load_sysfs(&t, g_root, &err) == 0) {
        if (t.npci > DLT_MAX_PCI || t.nnics > DLT_MAX_NICS || t.gpus[0].numa < -1 || t.gpus[0].numa >= DLT_MAX_NUMA)
            abort();
        for (int k = 0; k < t.nnics; k++)
            if (t.nics[k].pci < -1 || t.nics[k].pci >= t.npci || strchr(t.nics[k].name, '/'))
                abort();
        (void)dlt_nccl_topo_xml(&t, xml, sizeof(xml));
        if (strchr(xml, '\t'))
            abort();
    }
    return 0;
}
