/* launch: PMIx bootstrap, then the communicator. */
#include "config.h"

#include "trainer/cli/launch.h"

#include <stdio.h>
#include <string.h>

int dlt_cli_launch(const dlt_comm_request *req, double timeout_s, dltpmix_ctx **px, dlt_comm **comm, char *err,
                   size_t errlen)
{
    dltpmix_options popts = {.timeout_s = timeout_s, .allow_singleton = 1};
    *px = NULL;
    *comm = NULL;
    if (dltpmix_init(px, &popts, err, errlen) != 0) {
        fprintf(stderr, "dltrain: %s\n", err);
        return 1;
    }
    if (dlt_comm_open(comm, req, *px, err, errlen) != 0) {
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
