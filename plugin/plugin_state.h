/* SPDX-License-Identifier: Apache-2.0 */
/* plugin_state: what the plugin knows about the current step, passed to every side.
 * One instance per process (srun or slurmstepd), filled from site args and --dl-train. */
#ifndef DLT_PLUGIN_STATE_H
#define DLT_PLUGIN_STATE_H

#include <sys/types.h>

#include "options.h"
#include "rank_env.h"
#include "step_end.h"
#include "topology.h"

typedef struct {
    dlt_site_conf site;
    dlt_user_opts opts;
    int opts_error;       /* --dl-train value was refused */
    int active;           /* this slurmstepd runs a job step the plugin set up */
    int explicit_request; /* the user gave --dl-train (not only enable=always) */
    int step_error;       /* per-step setup failed; reported from task_init */
    int step_ending;      /* a task was killed and the step is being ended */
    dlt_step_end end;     /* a step end pending (a task that failed before it joined) */
    /* The plugstack line's arguments were refused: only --dl-train steps fail, with site_msg. */
    int site_error;
    int site_ac; /* that line's arguments, as Slurm passed them (to find the line: error path only) */
    char *const *site_av;
    dlt_err site_err;    /* the refusal */
    char site_msg[2048]; /* the refusal with the file, line and fix; "" until worked out */
    dlt_err err;         /* the first refusal or setup failure, with its words */
    int have_topology;   /* node discovery ran */
    int have_nvml;       /* NVML was found (GPU driver present) */
    dlt_topology topo;
    char gpus_why[DLT_ERR_MAX];  /* what the node decided of gpus= and why ("" the user's or site's choice) */
    char topo_dir[DLT_PATH_MAX]; /* site topo_dir with %n expanded */
    char step_dir[DLT_PATH_MAX]; /* step-private directory, "" when none was made */
    int step_lock;               /* with step_dir: its lock, held for the step (step_dir.h) */
    char topo_file[DLT_PATH_MAX];
    /* The rank contract's step-wide part (rank_env.h), worked out once per step as root. */
    char master_node[DLT_PATH_MAX]; /* rank 0's node (first of SLURM_STEP_NODELIST), "" unknown */
    char master_addr[DLT_PATH_MAX]; /* what MASTER_ADDR gets, "" none (master_why says why) */
    char master_why[DLT_ERR_MAX];
    int master_port, port_reserved;      /* MASTER_PORT (0: none) and whether Slurm reserved it */
    char env_record[DLT_ENV_RECORD_MAX]; /* what the plugin set in this task (DLT_SET) */
} dlt_plugin_state;

#endif
