/* launch: PMIx bootstrap, then the host communicator. */
#include "config.h"

#include "trainer/cli/launch.h"

#include <stdio.h>
#include <string.h>

int dlt_cli_launch(const char *comm_kind, int cuda_device, double timeout_s, dltpmix_ctx **px, dlt_comm **comm)
{
    dltpmix_options popts = {.timeout_s = timeout_s, .allow_singleton = 1};
    char err[1024];
    int rc;
    *px = NULL;
    *comm = NULL;
    if (dltpmix_init(px, &popts, err, sizeof(err)) != 0) {
        fprintf(stderr, "dltrain: %s\n", err);
        return 1;
    }
    if (!strcmp(comm_kind, "auto-gpu"))
        comm_kind = dltpmix_get_info(*px)->size > 1 ? "nccl" : "auto";
    if (!strcmp(comm_kind, "nccl")) {
#ifdef DLT_HAVE_CUDA_BACKEND
        rc = dlt_comm_nccl_create(comm, *px, cuda_device, err, sizeof(err));
#else
        (void)cuda_device;
        snprintf(err, sizeof(err), "--comm nccl: this dltrain was built without the CUDA backend");
        rc = -1;
#endif
    } else {
        rc = dlt_comm_create(comm, comm_kind, dltpmix_get_info(*px), err, sizeof(err));
    }
    if (rc != 0) {
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
