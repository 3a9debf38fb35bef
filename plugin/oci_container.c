/* SPDX-License-Identifier: Apache-2.0 */
/* oci_container: Slurm's own OCI containers and --dl-train (oci_container.h). */
#include "oci_container.h"

#include <stdio.h>
#include <string.h>

int dlt_oci_container_asked(const char *cmdline, size_t n)
{
    for (size_t off = 0; off < n; off += strnlen(cmdline + off, n - off) + 1) {
        const char *a = cmdline + off;
        size_t len = strnlen(a, n - off);
        if ((len == 11 && !memcmp(a, "--container", 11)) || (len > 12 && !memcmp(a, "--container=", 12)))
            return 1;
    }
    return 0;
}

int dlt_oci_task_env(int major, int minor)
{
    return major > 23 || (major == 23 && minor >= 2);
}

void dlt_oci_refusal(char *msg, size_t len, int major, int minor)
{
    snprintf(msg, len,
             "--dl-train cannot run in Slurm %d.%02d's own OCI containers (--container): this release starts "
             "the container with the step's launch environment, written before the tasks exist, so no task "
             "inside would get its SLURM_PROCID, CUDA_VISIBLE_DEVICES, RANK or NCCL_TOPO_FILE, and it allows one "
             "task per node. Start the container as the task's command instead (srun --dl-train ch-run -b "
             "TOPO_DIR IMAGE -- CMD, apptainer exec --bind TOPO_DIR IMAGE CMD, or pyxis's --container-image), or "
             "use Slurm 23.02 or later, which gives each task its own environment; see spank_dltrain(8), "
             "CONTAINERS",
             major, minor);
}
