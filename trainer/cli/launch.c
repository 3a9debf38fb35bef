/* SPDX-License-Identifier: Apache-2.0 */
/* launch: PMIx bootstrap, the rank's GPU, then the communicator. */
#include "config.h"

#include "trainer/cli/launch.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/backend/device_choice.h"
#include "trainer/common/status.h"

int dlt_cli_check_gpus(dltpmix_ctx *px, const char *gpu, char *err, size_t errlen)
{
    const dltpmix_info *info = dltpmix_get_info(px);
    dlt_device_claim mine, *all;
    int rc;
    if (info->size < 2)
        return 0;
    memset(&mine, 0, sizeof(mine));
    mine.rank = info->rank;
    snprintf(mine.host, sizeof(mine.host), "%.63s", info->hostname);
    snprintf(mine.gpu, sizeof(mine.gpu), "%.63s", gpu);
    if (!(all = calloc((size_t)info->size, sizeof(*all))))
        return dlt_fail(err, errlen, -ENOMEM, "out of memory");
    if (dltpmix_allgather(px, &mine, sizeof(mine), all) != 0)
        rc = dlt_fail(err, errlen, -EIO, "%s", dltpmix_error(px));
    else
        rc = dlt_device_check_distinct(all, info->size, err, errlen);
    free(all);
    return rc;
}

/* The device of this rank among the GPUs it sees, checked against the other ranks'. */
static int _choose_gpu(dltpmix_ctx *px, dlt_comm_request *req, dlt_backend_config *backend, char *err,
                       size_t errlen)
{
    const dltpmix_info *info = dltpmix_get_info(px);
    int visible = dlt_backend_gpu_count(), dev, rc;
    char id[64];
    if ((rc = dlt_device_choose(backend->device, getenv("DLT_LOCAL_GPU") != NULL, info->local_rank, visible, &dev,
                                err, errlen)) != 0)
        return rc;
    backend->device = dev;
    req->cuda_device = dev;
    if (visible <= 0)
        return 0; /* the backend says there is no GPU */
    dlt_backend_gpu_id(dev, id, sizeof(id));
    return dlt_cli_check_gpus(px, id, err, errlen);
}

int dlt_cli_launch(dlt_comm_request *req, dlt_backend_config *backend, double timeout_s, dltpmix_ctx **px,
                   dlt_comm **comm, char *err, size_t errlen)
{
    dltpmix_options popts = {.timeout_s = timeout_s, .allow_singleton = 1};
    *px = NULL;
    *comm = NULL;
    if (dltpmix_init(px, &popts, err, errlen) != 0) {
        fprintf(stderr, "dltrain: %s\n", err);
        return 1;
    }
    if ((req->gpu && _choose_gpu(*px, req, backend, err, errlen) != 0) ||
        dlt_comm_open(comm, req, *px, err, errlen) != 0) {
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
