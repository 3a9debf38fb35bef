/* SPDX-License-Identifier: Apache-2.0 */
/* comm: the choice of communicator. */
#include "config.h"

#include "trainer/comm/comm.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "trainer/backend/cuda_module.h"

size_t dlt_dtype_size(dlt_dtype type)
{
    switch (type) {
    case DLT_DTYPE_F32: return 4;
    case DLT_DTYPE_F64: return 8;
    case DLT_DTYPE_I64: return 8;
    }
    return 0;
}

const char *dlt_comm_resolve(const dlt_comm_request *req, int ranks, char *err, size_t errlen)
{
    const char *kind = req->kind ? req->kind : "auto";
    if (!strcmp(kind, "auto"))
        return ranks <= 1 ? "single" : req->gpu ? "nccl" : "mpi";
    if (!strcmp(kind, "single")) {
        if (ranks > 1) {
            snprintf(err, errlen, "communicator 'single' cannot serve %d ranks (use auto or mpi)", ranks);
            return NULL;
        }
        return kind;
    }
    if (!strcmp(kind, "mpi") || !strcmp(kind, "nccl"))
        return kind;
    snprintf(err, errlen, "unknown communicator '%s' (auto|single|mpi|nccl)", kind);
    return NULL;
}

int dlt_comm_open(dlt_comm **out, const dlt_comm_request *req, dltpmix_ctx *px, char *err, size_t errlen)
{
    const dltpmix_info *info = dltpmix_get_info(px);
    const char *kind = dlt_comm_resolve(req, info->size, err, errlen);
    int rc;
    *out = NULL;
    if (!kind)
        return -EINVAL;
    if (!strcmp(kind, "single"))
        rc = dlt_comm_single_create(out, err, errlen);
    else if (!strcmp(kind, "nccl")) {
        const dlt_cuda_module *m = dlt_cuda_module_get(err, errlen);
        rc = m ? m->comm_create(out, px, req->cuda_device, err, errlen) : -ENOTSUP;
    } else {
#ifdef DLT_HAVE_MPI
        rc = dlt_comm_mpi_create(out, info, err, errlen);
#else
        snprintf(err, errlen, "%d ranks need the MPI host communicator, but dltrain was built without MPI "
                 "(install libopenmpi-dev and rebuild)", info->size);
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
