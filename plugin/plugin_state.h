/* plugin_state: what the plugin knows about the current step, passed to every side.
 * One instance per process (srun or slurmstepd), filled from site args and --dl-train. */
#ifndef DLT_PLUGIN_STATE_H
#define DLT_PLUGIN_STATE_H

#include "options.h"

typedef struct {
    dlt_site_conf site;
    dlt_user_opts opts;
    int opts_error;           /* --dl-train value was refused */
    int step_error;           /* per-step setup failed; reported from task_init */
    char err[DLT_ERR_MAX];
    char step_dir[DLT_PATH_MAX]; /* step-private directory, "" when none was made */
} dlt_plugin_state;

#endif
