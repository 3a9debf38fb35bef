/* SPDX-License-Identifier: Apache-2.0 */
/* stepd_side: the remote (slurmstepd) context: once per step and once per task.
 * Runs as root; reads only Slurm's own step data and the site configuration. */
#ifndef DLT_STEPD_SIDE_H
#define DLT_STEPD_SIDE_H

#include <slurm/spank.h>

#include "plugin_state.h"

int dlt_stepd_step_setup(spank_t sp, dlt_plugin_state *st);
int dlt_stepd_task_setup(spank_t sp, dlt_plugin_state *st);
/* In every task of every step: the variables an outer step's task set (DLT_SET, DLT_STEP of another
 * step, inherited by a step started from inside that task) are unset where they still hold the
 * outer step's values, before this step sets its own; rank 0 says which. */
void dlt_stepd_task_clear_inherited(spank_t sp);
void dlt_stepd_step_cleanup(spank_t sp, dlt_plugin_state *st);
/* A task of a multi-task step killed by a signal ends the whole step at once (kill-on-bad-exit); one
 * that fails before it joined the PMIx bootstrap ends it a grace later (stepd_side.c). */
void dlt_stepd_task_exit(spank_t sp, dlt_plugin_state *st);

#endif
