/* SPDX-License-Identifier: Apache-2.0 */
/* stepd_side: the remote (slurmstepd) context: once per step and once per task.
 * Runs as root; reads only Slurm's own step data and the site configuration. */
#ifndef DLT_STEPD_SIDE_H
#define DLT_STEPD_SIDE_H

#include <slurm/spank.h>

#include "plugin_state.h"

int dlt_stepd_step_setup(spank_t sp, dlt_plugin_state *st);
int dlt_stepd_task_setup(spank_t sp, dlt_plugin_state *st);
void dlt_stepd_step_cleanup(spank_t sp, dlt_plugin_state *st);
/* A task of a multi-task step killed by a signal ends the whole step at once (kill-on-bad-exit). */
void dlt_stepd_task_exit(spank_t sp, dlt_plugin_state *st);

#endif
