/* comm: choice of the host communicator. */
#include "config.h"

#include "trainer/comm/comm.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

size_t dlt_dtype_size(dlt_dtype type)
{
    switch (type) {
    case DLT_DTYPE_F32: return 4;
    case DLT_DTYPE_F64: return 8;
    case DLT_DTYPE_I64: return 8;
    }
    return 0;
}

int dlt_comm_create(dlt_comm **out, const char *kind, const dltpmix_info *pmix, char *err, size_t errlen)
{
    int want_mpi;
    *out = NULL;
    if (!kind || !strcmp(kind, "auto"))
        want_mpi = pmix && pmix->size > 1;
    else if (!strcmp(kind, "single"))
        want_mpi = 0;
    else if (!strcmp(kind, "mpi"))
        want_mpi = 1;
    else {
        snprintf(err, errlen, "unknown communicator '%s' (auto|single|mpi)", kind);
        return -EINVAL;
    }
    if (!want_mpi) {
        if (pmix && pmix->size > 1) {
            snprintf(err, errlen, "communicator 'single' cannot serve %d ranks (use auto or mpi)", pmix->size);
            return -EINVAL;
        }
        return dlt_comm_single_create(out, err, errlen);
    }
#ifdef DLT_HAVE_MPI
    return dlt_comm_mpi_create(out, pmix, err, errlen);
#else
    snprintf(err, errlen, "%d ranks need the MPI host communicator, but dltrain was built without MPI "
             "(install libopenmpi-dev and rebuild)", pmix ? pmix->size : 0);
    return -ENOTSUP;
#endif
}

void dlt_comm_destroy(dlt_comm *c)
{
    if (c)
        c->ops->destroy(c);
}
