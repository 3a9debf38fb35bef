/* SPDX-License-Identifier: Apache-2.0 */
/* device_choice: which of the GPUs a task sees it trains on, and the refusal of two ranks of one
 * node on one GPU (NCCL would fail with "Duplicate GPU detected" or hang). Pure functions. */
#ifndef DLT_DEVICE_CHOICE_H
#define DLT_DEVICE_CHOICE_H

#include "common/status.h"
#include <stddef.h>

/* Entries of a CUDA_VISIBLE_DEVICES value ("0,1,3" -> 3; "" -> 0); -1 when cvd is NULL. */
int dlt_device_visible_count(const char *cvd);
/* The n-th entry (0-based) of a CUDA_VISIBLE_DEVICES value into out; -1 when there is none. */
int dlt_device_visible_entry(const char *cvd, int n, char *out, size_t outlen);

/* The device index (among the visible) a task uses: --device when given (requested >= 0, checked
 * against visible); else 0 when the plugin bound the task (its GPU is device 0, with gpus=task
 * and gpus=step alike); else the local rank modulo the visible devices (torchrun's rule; the
 * global rank modulo GPUs per node is wrong under cyclic distribution). visible <= 0: unknown,
 * the choice is requested or 0. */
int dlt_device_choose(int requested, int plugin_bound, int local_rank, int visible, int *device, dlt_err *err);

/* What one rank trains on: its host and the GPU's identity (PCI bus id, or a visible-device
 * entry when no driver is there to ask). */
typedef struct {
    int rank;
    char host[64];
    char gpu[64];
} dlt_device_claim;

/* 0 when no two ranks on one host claim one GPU; else -EBUSY with err naming both ranks, the
 * host, the GPU and the fix. */
int dlt_device_check_distinct(const dlt_device_claim *all, int n, dlt_err *err);

/* Whether ranks may share a GPU: NCCL_MULTI_RANK_GPU_ENABLE=1 (value, NULL when unset) asks NCCL
 * 2.30 and later to accept several ranks of one communicator on one GPU (NCCL src/init.cc, the
 * same-GPU check), as the one-GPU device check's two ranks do; then the distinct check's refusal
 * is waived, said, not applied. */
int dlt_device_sharing_allowed(const char *nccl_multi_rank_gpu_enable);

/* The plugin's GPU (DLT_GPU_PCI, bound; NULL or "" when no plugin bound the task) against the
 * one the trainer opened (the CUDA runtime's bus id of the chosen device; NULL when the runtime
 * gave none): 0 the same GPU, 1 nothing to compare, -ENODEV a different GPU (Slurm's index order
 * and PCI order can differ; a --device or a CUDA_VISIBLE_DEVICES changed after the plugin), -EINVAL
 * an id that is no PCI bus id; err names both ids and the fix. */
int dlt_device_pci_check(const char *bound, const char *opened, int device, dlt_err *err);

#endif
