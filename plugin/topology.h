/* SPDX-License-Identifier: Apache-2.0 */
/* topology: what a node has, as a plain struct: GPUs (from NVML), the PCI tree above them and the
 * NICs, NUMA nodes and CPUs (from sysfs). Discovery fills it; binding and the XML writer read it. */
#ifndef DLT_TOPOLOGY_H
#define DLT_TOPOLOGY_H

#include <stddef.h>
#include <stdint.h>

#include "common/pci_busid.h"

#include "common/status.h"
#include "nvml_loader.h"

#define DLT_MAX_GPUS 16
#define DLT_MAX_NICS 16
#define DLT_MAX_PCI 128
#define DLT_MAX_NUMA 16
#define DLT_MAX_CPUS 1024
#define DLT_CPU_WORDS (DLT_MAX_CPUS / 64)
#define DLT_BUSID_LEN 16 /* "0000:1a:00.0" + NUL, rounded */

typedef struct {
    uint64_t bits[DLT_CPU_WORDS];
} dlt_cpuset;

/* One PCI function: a bridge/switch port, a GPU, a NIC or an NVSwitch. */
typedef struct {
    char busid[DLT_BUSID_LEN]; /* lowercase dddd:bb:dd.f */
    int parent;                /* index in dlt_topology.pci, -1 at a root port */
    int numa;                  /* NUMA node of the root complex, -1 unknown */
    char root[24];             /* "pci0000:00": the host bridge it hangs from */
    char cls[12];              /* "0x060400" */
    char vendor[8], device[8], subsys_vendor[8], subsys_device[8];
    char link_speed[24]; /* one of NCCL's strings, e.g. "8.0 GT/s PCIe" */
    int link_width;
} dlt_pci;

typedef enum { DLT_LINK_GPU = 0, DLT_LINK_NVSWITCH = 1, DLT_LINK_CPU = 2 } dlt_link_kind;

typedef struct {
    int nvml_index;
    int minor; /* /dev/nvidiaN */
    char name[64];
    int sm; /* compute capability x 10 */
    char busid[DLT_BUSID_LEN];
    int pci; /* index in dlt_topology.pci, -1 if sysfs did not know it */
    int numa;
    dlt_cpuset local_cpus;
    int nvlink_to_gpu[DLT_MAX_GPUS]; /* active links to each other GPU of the node */
    int nvlink_to_switch;            /* links to NVSwitches */
    int nvlink_to_cpu;               /* links to the CPU (IBM NPU) */
    char switch_busid[DLT_BUSID_LEN];
    int p2p_ok[DLT_MAX_GPUS]; /* NVML P2P read capability, 1 ok, 0 no, -1 unknown */
} dlt_gpu;

typedef struct {
    char name[32];   /* HCA (mlx5_0) or interface (eth0) */
    char netdev[32]; /* interface name usable for NCCL_SOCKET_IFNAME ("" if none) */
    int is_ib;       /* InfiniBand/RoCE HCA */
    int port;
    int speed_mbps;
    char guid[24];
    int up;
    char busid[DLT_BUSID_LEN];
    int pci;
    int numa;
} dlt_nic;

typedef struct {
    int ngpus;
    dlt_gpu gpus[DLT_MAX_GPUS];
    int nnics;
    dlt_nic nics[DLT_MAX_NICS];
    int npci;
    dlt_pci pci[DLT_MAX_PCI];
    int nnuma;
    dlt_cpuset numa_cpus[DLT_MAX_NUMA];
    char cpu_vendor[32];
    int cpu_family, cpu_model;
    char arch[16];
} dlt_topology;

/* PCI distance classes, as nvidia-smi topo -m names them, nearest first. */
typedef enum {
    DLT_DIST_SELF = 0,
    DLT_DIST_NVLINK = 1,
    DLT_DIST_PIX = 2,  /* same PCIe switch port */
    DLT_DIST_PXB = 3,  /* several PCIe bridges, no host bridge */
    DLT_DIST_PHB = 4,  /* through one host bridge */
    DLT_DIST_NODE = 5, /* across host bridges of one NUMA node */
    DLT_DIST_SYS = 6,  /* across NUMA nodes */
} dlt_distance;

const char *dlt_distance_name(dlt_distance d);

/* GPUs and their NVLinks from NVML. */
int dlt_topo_add_nvml_gpus(dlt_topology *t, const dlt_nvml *nvml, dlt_err *err);

/* The rest from a sysfs tree rooted at root ("" or "/" for the real one): PCI paths, NUMA and
 * local CPUs of the GPUs, NICs, NUMA CPU lists, CPU vendor/model. Bounded reads only. */
int dlt_topo_load_sysfs(dlt_topology *t, const char *root, dlt_err *err);

/* Distance between two PCI devices of t (indices into t->pci; -1 means unknown -> SYS). */
dlt_distance dlt_topo_pci_distance(const dlt_topology *t, int a, int b);
dlt_distance dlt_topo_gpu_distance(const dlt_topology *t, int ga, int gb);

/* CPU list text ("0-3,8") <-> set. Parsing refuses garbage. */
int dlt_cpuset_parse(const char *text, dlt_cpuset *set);
int dlt_cpuset_format(const dlt_cpuset *set, char *buf, size_t buflen);
int dlt_cpuset_count(const dlt_cpuset *set);
void dlt_cpuset_and(dlt_cpuset *dst, const dlt_cpuset *a, const dlt_cpuset *b);
/* Hex mask as in sysfs cpumap ("ffffffff,00000000"), which NCCL's cpu affinity attribute uses. */
int dlt_cpuset_format_mask(const dlt_cpuset *set, int ncpus, char *buf, size_t buflen);

#endif
