/* SPDX-License-Identifier: Apache-2.0 */
/* dltrain-topo: drives the plugin's discovery, binding and NCCL XML code outside Slurm, on a fixture
 * (fake NVML + sysfs tree) or the real node, for the tests and for site administrators checking
 * what the plugin will do on a node.
 *   dltrain-topo NVML_LIB SYSFS_ROOT xml|matrix
 *   dltrain-topo NVML_LIB SYSFS_ROOT bind CUDA_VISIBLE_DEVICES SLURM_STEP_GPUS LOCAL_RANK ALLOWED_CPUS [NIC] */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/node_name.h"
#include "plugin/binding.h"
#include "plugin/nccl_topo_xml.h"
#include "plugin/nvml_loader.h"
#include "plugin/topo_report.h"
#include "plugin/topology.h"

static const char g_usage[] =
    "usage: dltrain-topo NVML_LIB SYSFS_ROOT matrix\n"
    "       dltrain-topo NVML_LIB SYSFS_ROOT xml\n"
    "       dltrain-topo NVML_LIB SYSFS_ROOT bind CUDA_VISIBLE_DEVICES SLURM_STEP_GPUS LOCAL_RANK ALLOWED_CPUS [NIC]\n"
    "\n"
    "What the dltrain SPANK plugin discovers and chooses on this node, outside Slurm (any user):\n"
    "  matrix  the GPUs, NICs and NUMA nodes and their distances (as --dl-train=verbose shows)\n"
    "  xml     the NCCL topology file the plugin writes (NCCL_TOPO_FILE)\n"
    "  bind    one task's GPU, CPUs and NIC for the step's GPUs and its local rank\n"
    "NVML_LIB: normally libnvidia-ml.so.1 (the plugin's nvml_lib=); SYSFS_ROOT: normally / (sysfs_root=).\n"
    "Example: dltrain-topo libnvidia-ml.so.1 / matrix     See dltrain-topo(8).\n";

int main(int argc, char **argv)
{
    static dlt_topology topo;
    static char out[1 << 18];
    dlt_nvml nvml;
    dlt_err err = DLT_ERR_INIT;
    int rc;

    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        fputs(g_usage, stdout);
        return 0;
    }
    if (argc < 4) {
        fputs(g_usage, stderr);
        return 2;
    }
    memset(&topo, 0, sizeof(topo));
    rc = dlt_nvml_open(&nvml, argv[1], &err);
    if (rc == 0) {
        rc = dlt_topo_add_nvml_gpus(&topo, &nvml, &err);
        dlt_nvml_close(&nvml);
        if (rc) {
            fprintf(stderr, "dltrain-topo: %s\n", err.msg);
            return 1;
        }
    } else {
        fprintf(stderr, "dltrain-topo: %s (continuing without GPUs)\n", err.msg);
        dlt_err_clear(&err); /* said; not this run's failure */
    }
    if (dlt_topo_load_sysfs(&topo, argv[2], &err)) {
        fprintf(stderr, "dltrain-topo: %s\n", err.msg);
        return 1;
    }
    if (!strcmp(argv[3], "xml")) {
        rc = dlt_nccl_topo_xml(&topo, out, sizeof(out));
        if (rc < 0)
            return 1;
        fputs(out, stdout);
        return 0;
    }
    if (!strcmp(argv[3], "matrix")) {
        /* the node's own name for the node's own tree, else the tree's path (a fixture) */
        char name[256];
        if (!strcmp(argv[2], "/"))
            dlt_node_name(name, sizeof(name));
        else
            snprintf(name, sizeof(name), "%s", argv[2]);
        rc = dlt_topo_matrix(&topo, name, out, sizeof(out));
        if (rc < 0)
            return 1;
        fputs(out, stdout);
        return 0;
    }
    if (!strcmp(argv[3], "bind") && argc >= 8) {
        dlt_step_gpus s;
        dlt_binding b;
        dlt_cpuset allowed;
        char cpus[256], vis[128], hca[64], ifn[64];
        if (dlt_step_gpus_resolve(&topo, argv[4], argv[5], &s, &err) || dlt_cpuset_parse(argv[7], &allowed) ||
            dlt_binding_choose(&topo, &s, atoi(argv[6]), &allowed, argc > 8 ? argv[8] : "", &b, &err)) {
            fprintf(stderr, "dltrain-topo: %s\n", err.msg);
            return 1;
        }
        dlt_cpuset_format(&b.cpus, cpus, sizeof(cpus));
        if (b.gpu_pos < 0 || dlt_binding_cuda_visible(&s, &b, 0, vis, sizeof(vis)))
            snprintf(vis, sizeof(vis), "-");
        dlt_binding_nccl_nic(&topo, &b, hca, sizeof(hca), ifn, sizeof(ifn));
        printf("gpu=%s pci=%s cpus=%s numa_local=%d nic=%s dist=%s hca=%s ifname=%s order=", vis,
               b.gpu >= 0 ? topo.gpus[b.gpu].busid : "-", cpus, b.cpus_numa_local,
               b.nic >= 0 ? topo.nics[b.nic].name : "-", dlt_distance_name(b.nic_distance), hca[0] ? hca : "-",
               ifn[0] ? ifn : "-");
        for (int k = 0; k < s.n; k++)
            printf("%s%s", k ? "," : "", s.label[s.order[k]]);
        printf("\n");
        return 0;
    }
    fprintf(stderr, "dltrain-topo: unknown command %s\n", argv[3]);
    return 2;
}
