/* SPDX-License-Identifier: Apache-2.0 */
/* cmd_check: `dltrain check`: the job's health check (trainer/check/check.h) under srun --mpi=pmix
 * or alone; exit status healthy 0, degraded 3, broken 4 (1: could not run, 2: usage). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/exit_status.h"
#include "trainer/check/check.h"
#include "trainer/cli/commands.h"
#include "trainer/cli/launch.h"
#include "trainer/cli/opt_table.h"

int dlt_cmd_check(int argc, char **argv)
{
    dlt_cli_opts o;
    unsigned char seen[DLT_OPT_MAX] = {0};
    dlt_check_config cfg;
    dltpmix_ctx *px = NULL;
    dlt_comm *comm = NULL;
    dlt_err err = DLT_ERR_INIT;
    int rc, next;

    memset(&o, 0, sizeof(o));
    dlt_check_defaults(&o.check);
    dlt_backend_config_defaults(&o.train.backend);
    o.comm = "auto";
    if ((rc = dlt_opt_parse_command(DLT_CMD_CHECK, "check", argc, argv, 1, &o, seen, &next, 1)) >= 0)
        return rc;
    cfg = o.check;
    cfg.max_bytes_given = seen[dlt_opt_find(DLT_CMD_CHECK, "max-bytes")];
    cfg.progress = 1;
    if (cfg.min_bytes > cfg.max_bytes) {
        fprintf(stderr, "dltrain: --min-bytes %zu is above --max-bytes %zu\n", cfg.min_bytes, cfg.max_bytes);
        return DLT_EXIT_USAGE;
    }
    {
        dlt_comm_request req = {o.comm, dlt_backend_is_gpu(&o.train.backend), o.train.backend.device};
        if ((rc = dlt_cli_launch(&req, &o.train.backend, o.timeout, NULL, &px, &comm, &err)) != 0)
            return rc;
    }
    cfg.gpu = dlt_backend_is_gpu(&o.train.backend);
    cfg.device = o.train.backend.device;
    cfg.precision = o.train.backend.precision;
    rc = dlt_check_run(&cfg, px, comm, stdout, &err);
    if (rc == 1)
        dlt_rank_say(comm->rank, "%s", err.msg);
    dlt_cli_finish(px, comm);
    return rc;
}
