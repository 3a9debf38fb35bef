/* launch: PMIx bootstrap, then the host communicator. */
#include "config.h"

#include "trainer/cli/launch.h"

#include <stdio.h>

int dlt_cli_launch(const char *comm_kind, double timeout_s, dltpmix_ctx **px, dlt_comm **comm)
{
    dltpmix_options popts = {.timeout_s = timeout_s, .allow_singleton = 1};
    char err[1024];
    *px = NULL;
    *comm = NULL;
    if (dltpmix_init(px, &popts, err, sizeof(err)) != 0) {
        fprintf(stderr, "dltrain: %s\n", err);
        return 1;
    }
    if (dlt_comm_create(comm, comm_kind, dltpmix_get_info(*px), err, sizeof(err)) != 0) {
        fprintf(stderr, "dltrain: rank %d: %s\n", dltpmix_get_info(*px)->rank, err);
        dltpmix_finalize(*px);
        *px = NULL;
        return 1;
    }
    return 0;
}

void dlt_cli_finish(dltpmix_ctx *px, dlt_comm *comm)
{
    dlt_comm_destroy(comm);
    dltpmix_finalize(px);
}
