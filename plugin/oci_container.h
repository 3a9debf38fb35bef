/* SPDX-License-Identifier: Apache-2.0 */
/* oci_container: Slurm's own OCI containers (srun --container=BUNDLE, oci.conf) and --dl-train.
 * Slurm 22.05 writes the bundle's config.json once per step, before any task exists and before
 * SPANK runs, from the launch environment: the task inside gets no SLURM_PROCID, no
 * CUDA_VISIBLE_DEVICES and nothing a plugin sets in task_init, and more than one task per node is
 * refused (slurmstepd container.c, _modify_config). From 23.02 each task's config.json is written
 * just before exec, after task_init, from the task's own environment (container_run). So a
 * --dl-train step in such a container can keep its contract from 23.02 on only. */
#ifndef DLT_OCI_CONTAINER_H
#define DLT_OCI_CONTAINER_H

#include <stddef.h>

/* Whether srun's command line (NUL-separated words, n bytes, as /proc/self/cmdline) asks for an
 * OCI container: a word that is exactly --container, or starts with --container= (pyxis's
 * --container-image and its other --container-* options are not). */
int dlt_oci_container_asked(const char *cmdline, size_t n);

/* Whether Slurm major.minor (22, 5) runs each containerized task with its own environment. */
int dlt_oci_task_env(int major, int minor);

/* The refusal of --dl-train with --container on Slurm major.minor: why, and what to do instead. */
void dlt_oci_refusal(char *msg, size_t len, int major, int minor);

#endif
