/* SPDX-License-Identifier: Apache-2.0 */
/* topo_hwloc_bench: the plugin's sysfs reader (plugin/topology.c) against hwloc on one node tree:
 * load time of each (median of REPS), hwloc from an XML export of the same tree, and what each
 * sees (NUMA nodes and distances, caches, PCI functions, NICs). Prints the ratios hwloc / plugin.
 * Usage: topo_hwloc_bench ROOT [REPS]   (ROOT: "/" for this machine, or a mktopo.py fixture) */
#include "config.h"

#include <errno.h>
#include <hwloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plugin/topology.h"

static double _now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int _cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double _median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), _cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* A topology as the plugin would ask hwloc for it: the machine plus PCI functions and OS devices
 * (NICs, HCAs), from the tree at root (HWLOC_FSROOT) or from xml. 0 or -1 with why printed. */
static int _hwloc_load(hwloc_topology_t *topo, const char *root, const char *xml)
{
    int rc;
    if (hwloc_topology_init(topo) != 0) {
        fprintf(stderr, "topo_hwloc_bench: hwloc_topology_init: %s\n", strerror(errno));
        return -1;
    }
    hwloc_topology_set_io_types_filter(*topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    rc = xml ? hwloc_topology_set_xml(*topo, xml) : 0;
    if (rc == 0)
        rc = hwloc_topology_load(*topo);
    if (rc != 0) {
        fprintf(stderr, "topo_hwloc_bench: hwloc load of %s: %s\n", xml ? xml : root, strerror(errno));
        hwloc_topology_destroy(*topo);
        return -1;
    }
    return 0;
}

static void _hwloc_report(hwloc_topology_t topo)
{
    static const hwloc_obj_type_t caches[] = {HWLOC_OBJ_L1CACHE, HWLOC_OBJ_L2CACHE, HWLOC_OBJ_L3CACHE};
    struct hwloc_distances_s *d[4];
    unsigned nd = 4;
    hwloc_obj_t o = NULL;
    printf("hwloc:  %d packages, %d cores, %d PUs, %d NUMA nodes, %d PCI functions, caches L1d/L2/L3 %d/%d/%d\n",
           hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE), hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE),
           hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU), hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE),
           hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PCI_DEVICE), hwloc_get_nbobjs_by_type(topo, caches[0]),
           hwloc_get_nbobjs_by_type(topo, caches[1]), hwloc_get_nbobjs_by_type(topo, caches[2]));
    printf("hwloc:  OS devices:");
    while ((o = hwloc_get_next_osdev(topo, o)) != NULL) {
        hwloc_obj_t pci = o->parent; /* the PCI function it belongs to, when hwloc knows it */
        const char *kind = o->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK       ? "net"
                           : o->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS ? "ib"
                           : o->attr->osdev.type == HWLOC_OBJ_OSDEV_BLOCK       ? "block"
                           : o->attr->osdev.type == HWLOC_OBJ_OSDEV_GPU         ? "gpu"
                                                                                : "other";
        if (pci && pci->type == HWLOC_OBJ_PCI_DEVICE)
            printf(" %s(%s, %04x:%02x:%02x.%x)", o->name, kind, pci->attr->pcidev.domain, pci->attr->pcidev.bus,
                   pci->attr->pcidev.dev, pci->attr->pcidev.func);
        else
            printf(" %s(%s, no PCI)", o->name, kind);
    }
    printf("\n");
    if (hwloc_distances_get_by_type(topo, HWLOC_OBJ_NUMANODE, &nd, d, HWLOC_DISTANCES_KIND_FROM_OS, 0) == 0 && nd > 0) {
        printf("hwloc:  NUMA distances (%u x %u):", d[0]->nbobjs, d[0]->nbobjs);
        for (unsigned i = 0; i < d[0]->nbobjs * d[0]->nbobjs; i++)
            printf(" %llu", (unsigned long long)d[0]->values[i]);
        printf("\n");
        for (unsigned i = 0; i < nd; i++)
            hwloc_distances_release(topo, d[i]);
    } else {
        printf("hwloc:  no NUMA distances\n");
    }
}

static void _plugin_report(const dlt_topology *t)
{
    printf("plugin: %d NUMA nodes, %d PCI functions, %d NICs:", t->nnuma, t->npci, t->nnics);
    for (int i = 0; i < t->nnics; i++)
        printf(" %s(%s, %s, numa %d)", t->nics[i].name, t->nics[i].is_ib ? "ib" : "net",
               t->nics[i].busid[0] ? t->nics[i].busid : "no PCI", t->nics[i].numa);
    printf("; no NUMA distances, no caches (not read)\n");
}

int main(int argc, char **argv)
{
    const char *root = argc > 1 ? argv[1] : "/";
    int reps = argc > 2 ? atoi(argv[2]) : 21;
    static dlt_topology t;
    hwloc_topology_t topo;
    char *xml = NULL;
    int xmllen = 0;
    double *tp, *th, *tx, mp, mh, mx;
    if (argc > 3 || reps < 1 || reps > 10000) {
        fprintf(stderr, "usage: topo_hwloc_bench ROOT [REPS 1..10000]\n");
        return 2;
    }
    if (strcmp(root, "/") != 0 && setenv("HWLOC_FSROOT", root, 1) != 0) {
        fprintf(stderr, "topo_hwloc_bench: setenv HWLOC_FSROOT: %s\n", strerror(errno));
        return 1;
    }
    tp = calloc((size_t)reps, sizeof(double));
    th = calloc((size_t)reps, sizeof(double));
    tx = calloc((size_t)reps, sizeof(double));
    if (!tp || !th || !tx) {
        fprintf(stderr, "topo_hwloc_bench: out of memory\n");
        return 1;
    }
    for (int i = 0; i < reps; i++) {
        dlt_err err = DLT_ERR_INIT;
        double t0 = _now();
        memset(&t, 0, sizeof(t));
        if (dlt_topo_load_sysfs(&t, root, &err) != 0) {
            fprintf(stderr, "topo_hwloc_bench: plugin reader on %s: %s\n", root, err.msg);
            return 1;
        }
        tp[i] = _now() - t0;
    }
    for (int i = 0; i < reps; i++) {
        double t0 = _now();
        if (_hwloc_load(&topo, root, NULL) != 0)
            return 1;
        th[i] = _now() - t0;
        if (i == reps - 1) {
            if (hwloc_topology_export_xmlbuffer(topo, &xml, &xmllen, 0) != 0) {
                fprintf(stderr, "topo_hwloc_bench: XML export: %s\n", strerror(errno));
                return 1;
            }
            _plugin_report(&t);
            _hwloc_report(topo);
        }
        if (i < reps - 1)
            hwloc_topology_destroy(topo); /* the last one holds the XML buffer until the end */
    }
    for (int i = 0; i < reps; i++) {
        hwloc_topology_t x;
        double t0 = _now();
        if (hwloc_topology_init(&x) != 0 || hwloc_topology_set_io_types_filter(x, HWLOC_TYPE_FILTER_KEEP_IMPORTANT) ||
            hwloc_topology_set_xmlbuffer(x, xml, xmllen) != 0 || hwloc_topology_load(x) != 0) {
            fprintf(stderr, "topo_hwloc_bench: XML load: %s\n", strerror(errno));
            return 1;
        }
        tx[i] = _now() - t0;
        hwloc_topology_destroy(x);
    }
    mp = _median(tp, reps);
    mh = _median(th, reps);
    mx = _median(tx, reps);
    printf("load %s, median of %d: plugin sysfs reader %.3f ms, hwloc %.3f ms (x%.1f), hwloc from its XML "
           "export (%d bytes) %.3f ms (x%.1f)\n",
           root, reps, mp * 1e3, mh * 1e3, mh / mp, xmllen, mx * 1e3, mx / mp);
    hwloc_free_xmlbuffer(topo, xml);
    hwloc_topology_destroy(topo);
    free(tp);
    free(th);
    free(tx);
    return 0;
}
