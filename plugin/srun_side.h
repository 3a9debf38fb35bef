/* SPDX-License-Identifier: Apache-2.0 */
/* srun_side: the local (srun) context: refuse a step that cannot work before anything runs.
 * Reads srun's own environment only; never used in slurmstepd. */
#ifndef DLT_SRUN_SIDE_H
#define DLT_SRUN_SIDE_H

#include <slurm/spank.h>

#include "plugin_state.h"

int dlt_srun_validate(spank_t sp, dlt_plugin_state *st);
/* srun --container (Slurm's own OCI containers) with --dl-train: refused where this Slurm release
 * would start the tasks without their environment (oci_container.h). 0, or -1 said. */
int dlt_srun_container_check(spank_t sp);

#endif
