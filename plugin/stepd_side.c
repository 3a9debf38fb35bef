/* stepd_side: the remote (slurmstepd) context: once per step and once per task. */
#include "stepd_side.h"

#include <stdint.h>
#include <stdio.h>

int dlt_stepd_step_setup(spank_t sp, dlt_plugin_state *st)
{
    (void)sp;
    st->step_error = 0;
    return 0;
}

int dlt_stepd_task_setup(spank_t sp, dlt_plugin_state *st)
{
    char buf[256];
    int local_id = 0;
    spank_err_t rc;

    if (st->step_error) {
        slurm_error("dltrain: %s", st->err);
        return -1;
    }
    rc = spank_get_item(sp, S_TASK_ID, &local_id);
    if (rc != ESPANK_SUCCESS) {
        slurm_error("dltrain: cannot read the local task id: %s", spank_strerror(rc));
        return -1;
    }
    if (dlt_user_opts_format(&st->opts, buf, sizeof(buf)) == 0)
        spank_setenv(sp, "DLT_OPTS", buf, 1);
    snprintf(buf, sizeof(buf), "%d", local_id);
    spank_setenv(sp, "DLT_LOCAL_RANK", buf, 1);
    return 0;
}

void dlt_stepd_step_cleanup(spank_t sp, dlt_plugin_state *st)
{
    (void)sp;
    (void)st;
}
