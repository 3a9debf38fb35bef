/* SPDX-License-Identifier: Apache-2.0 */
/* binding: pure functions from a topology, the step's GPUs and a local rank to the task's GPU,
 * CPU set and NIC. No I/O: unit tests drive them with fixture topologies. */
#ifndef DLT_BINDING_H
#define DLT_BINDING_H

#include <stddef.h>

#include "common/status.h"
#include "options.h"
#include "topology.h"

/* The step's GPUs on this node, in Slurm's order. */
typedef struct {
    int n;
    int topo[DLT_MAX_GPUS];      /* index into dlt_topology.gpus */
    char label[DLT_MAX_GPUS][8]; /* the task's CUDA_VISIBLE_DEVICES entry for it */
    int order[DLT_MAX_GPUS];     /* NVLink-aware order: positions into topo/label */
} dlt_step_gpus;

typedef struct {
    int gpu_pos;         /* position in dlt_step_gpus (-1: no GPU) */
    int gpu;             /* index into dlt_topology.gpus */
    dlt_cpuset cpus;     /* CPUs to bind to */
    int cpus_numa_local; /* 1: the GPU's local CPUs within the allowed set; 0: fell back to allowed */
    int nic;             /* index into dlt_topology.nics, -1 none */
    dlt_distance nic_distance;
} dlt_binding;

/* Maps Slurm's view to topology GPUs. cuda_visible: the task's CUDA_VISIBLE_DEVICES as Slurm set
 * it; step_gpus: SLURM_STEP_GPUS (gres.conf positions; may be NULL, then cuda_visible is used).
 * Position i of the gres list is the GPU with /dev/nvidia minor i when one exists (gres.conf
 * File=/dev/nvidia[0-N]), else the i-th GPU in PCI order. */
int dlt_step_gpus_resolve(const dlt_topology *t, const char *cuda_visible, const char *step_gpus, dlt_step_gpus *out,
                          dlt_err *err);

/* The order local ranks take GPUs in: a greedy ring that follows the most NVLinks (ties: PCI
 * distance, then Slurm's order), so neighbouring ranks share links. */
void dlt_step_gpus_order(const dlt_topology *t, dlt_step_gpus *s);

/* nic_name: "" for the nearest NIC, else the HCA or interface to use (error if absent). */
int dlt_binding_choose(const dlt_topology *t, const dlt_step_gpus *s, int local_rank, const dlt_cpuset *allowed,
                       const char *nic_name, dlt_binding *out, dlt_err *err);

/* CUDA_VISIBLE_DEVICES for the task: only its GPU (gpus=task: all_step_gpus 0), or all step GPUs
 * with its own first (gpus=step: device 0 is still the task's GPU, CUDA IPC/P2P to peers works). */
int dlt_binding_cuda_visible(const dlt_step_gpus *s, const dlt_binding *b, int all_step_gpus, char *buf, size_t buflen);

/* A CPU task's CPUs (no GPU to be near): task local_rank of local_count on the node takes NUMA node
 * local_rank * nnuma / local_count (the node's tasks spread evenly over its NUMA nodes), as far as
 * allowed holds its CPUs. Returns that NUMA node and *out its CPUs within allowed, or -1 and *out =
 * allowed (one NUMA node or none known, or none of its CPUs allowed). */
int dlt_binding_numa_cpus(const dlt_topology *t, int local_rank, int local_count, const dlt_cpuset *allowed,
                          dlt_cpuset *out);

/* Whether partition is one of a comma list (cpu_partitions=): 1 yes, 0 no (either empty: no). */
int dlt_partition_listed(const char *list, const char *partition);

/* What a step runs as on this node. The user's gpus= is kept; without one, gpus=none is the
 * default in the site's cpu_partitions, and for a step without GPUs on a node with none
 * (node_gpus 0: no NVML, or NVML counting none); a step without GPUs on a node with some is
 * refused (a forgotten --gpus-per-node). partition: the job's (NULL or "" unknown); step_has_gpus:
 * Slurm gave the step GPUs here; have_nvml: the driver's NVML was found. Returns 0 with *out and
 * why (what was decided and why, "" when the user's or the site's choice stands), or -EINVAL with
 * why saying what was wrong and the fix. */
int dlt_gpus_decide(const dlt_user_opts *opts, const dlt_site_conf *site, const char *partition, int step_has_gpus,
                    int have_nvml, int node_gpus, dlt_gpus_mode *out, char *why, size_t len);

#endif
