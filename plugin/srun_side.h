/* SPDX-License-Identifier: Apache-2.0 */
/* srun_side: the local (srun) context: refuse a step that cannot work before anything runs.
 * Reads srun's own environment only; never used in slurmstepd. */
#ifndef DLT_SRUN_SIDE_H
#define DLT_SRUN_SIDE_H

#include <slurm/spank.h>

#include "plugin_state.h"

int dlt_srun_validate(spank_t sp, dlt_plugin_state *st);

#endif
