/* SPDX-License-Identifier: Apache-2.0 */
/* env_contract: the names of the environment variables the plugin sets in each task and the
 * programs read (dltrain, PyTorch's env://, NCCL): one list for both sides, so a name cannot be
 * spelled two ways. What each means: spank_dltrain(8), ENVIRONMENT. */
#ifndef DLT_ENV_CONTRACT_H
#define DLT_ENV_CONTRACT_H

/* what the plugin did, for dltrain and for the user */
#define DLT_ENV_LOCAL_GPU "DLT_LOCAL_GPU"               /* the task's GPU, an index into the step's */
#define DLT_ENV_LOCAL_RANK "DLT_LOCAL_RANK"             /* the task's rank on its node */
#define DLT_ENV_GPU_PCI "DLT_GPU_PCI"                   /* that GPU's PCI bus id */
#define DLT_ENV_CPUS "DLT_CPUS"                         /* the CPUs the task was bound to */
#define DLT_ENV_NIC "DLT_NIC"                           /* the NIC nearest the GPU */
#define DLT_ENV_OPTS "DLT_OPTS"                         /* the --dl-train options in force */
#define DLT_ENV_MASTER_PORT_FROM "DLT_MASTER_PORT_FROM" /* reserved or derived */
#define DLT_ENV_SET "DLT_SET"                           /* the names it set, each with its value's hash */
#define DLT_ENV_STEP "DLT_STEP"                         /* the step (JOB.STEP) it set them for */
/* A file libdltpmix makes once the task has joined the PMIx bootstrap: a task of a multi-task step
 * that fails before it made it is one its peers would wait for, so the plugin ends the step.
 * Always DLT_JOIN_MARK_PREFIX "UID-JOB.STEP.RANK" (libdltpmix makes nothing else). */
#define DLT_ENV_JOIN_MARK "DLT_JOIN_MARK"
#define DLT_JOIN_MARK_PREFIX "/dev/shm/dltrain-joined-"

/* torch.distributed's env:// rendezvous */
#define DLT_ENV_RANK "RANK"
#define DLT_ENV_WORLD_SIZE "WORLD_SIZE"
#define DLT_ENV_LOCAL_RANK_TORCH "LOCAL_RANK"
#define DLT_ENV_LOCAL_WORLD_SIZE "LOCAL_WORLD_SIZE"
#define DLT_ENV_GROUP_RANK "GROUP_RANK"
#define DLT_ENV_MASTER_ADDR "MASTER_ADDR"
#define DLT_ENV_MASTER_PORT "MASTER_PORT"

/* NCCL and CUDA */
#define DLT_ENV_NCCL_TOPO_FILE "NCCL_TOPO_FILE"
#define DLT_ENV_NCCL_IB_HCA "NCCL_IB_HCA"
#define DLT_ENV_NCCL_SOCKET_IFNAME "NCCL_SOCKET_IFNAME"
#define DLT_ENV_CUDA_VISIBLE_DEVICES "CUDA_VISIBLE_DEVICES"

#endif
