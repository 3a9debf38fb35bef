/* SPDX-License-Identifier: Apache-2.0 */
/* comm: the choice of communicator. */
#include "config.h"

#include "trainer/comm/comm.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "trainer/backend/cuda_module.h"

const char *dlt_comm_resolve(const dlt_comm_request *req, int ranks, dlt_err *err)
{
    const char *kind = req->kind ? req->kind : "auto";
    if (!strcmp(kind, "auto"))
        return ranks <= 1 ? "single" : req->gpu ? "nccl" : "mpi";
    if (!strcmp(kind, "single")) {
        if (ranks > 1) {
            dlt_fail(err, -EINVAL, "communicator 'single' cannot serve %d ranks (use auto or mpi)", ranks);
            return NULL;
        }
        return kind;
    }
    if (!strcmp(kind, "mpi") || !strcmp(kind, "nccl"))
        return kind;
    dlt_fail(err, -EINVAL, "unknown communicator '%s' (auto|single|mpi|nccl)", kind);
    return NULL;
}

int dlt_comm_open(dlt_comm **out, const dlt_comm_request *req, dltpmix_ctx *px, dlt_err *err)
{
    const dltpmix_info *info = dltpmix_get_info(px);
    const char *kind = dlt_comm_resolve(req, info->size, err);
    int rc;
    *out = NULL;
    if (!kind)
        return -EINVAL;
    if (!strcmp(kind, "single"))
        rc = dlt_comm_single_create(out, err);
    else if (!strcmp(kind, "nccl")) {
        const dlt_cuda_module *m = dlt_cuda_module_get(err);
        rc = m ? m->comm_create(out, px, req->cuda_device, err) : -ENOTSUP;
    } else {
#ifdef DLT_HAVE_MPI
        rc = dlt_comm_mpi_create(out, px, err);
#else
        dlt_fail(err, -ENOTSUP,
                 "%d ranks need the MPI host communicator, but dltrain was built without MPI "
                 "(install libopenmpi-dev and rebuild)",
                 info->size);
        rc = -ENOTSUP;
#endif
    }
    return rc;
}

void dlt_comm_destroy(dlt_comm *c)
{
    if (c)
        c->ops->destroy(c);
}
