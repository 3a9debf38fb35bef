/* dltpmix_nccl: an NCCL communicator bootstrapped through PMIx, with a bounded wait.
 * ncclGetUniqueId runs in rank 0 of the application (its listener lives in this process). */
#include "config.h"

#include <cuda_runtime.h>
#include <nccl.h>
#include <time.h>
#include <unistd.h>

#include "dltpmix.h"
#include "dltpmix_internal.h"
#include "trainer/common/clock.h"

#define CUDA_TRY(ctx, call)                                                                                  \
    do {                                                                                                     \
        cudaError_t e_ = (call);                                                                             \
        if (e_ != cudaSuccess)                                                                               \
            return dltpmix_set_error((ctx), DLTPMIX_ERR_NCCL, "dltpmix: %s:%d: %s failed: %s", __FILE__,     \
                                     __LINE__, #call, cudaGetErrorString(e_));                               \
    } while (0)

#define NCCL_TRY(ctx, call)                                                                                  \
    do {                                                                                                     \
        ncclResult_t r_ = (call);                                                                            \
        if (r_ != ncclSuccess && r_ != ncclInProgress)                                                       \
            return dltpmix_set_error((ctx), DLTPMIX_ERR_NCCL, "dltpmix: %s:%d: %s failed: %s (%s)", __FILE__, \
                                     __LINE__, #call, ncclGetErrorString(r_), ncclGetLastError(NULL));       \
    } while (0)

int dltpmix_have_nccl(void)
{
    return 1;
}

int dltpmix_nccl_comm_init(dltpmix_ctx *ctx, int cuda_device, struct ncclComm **out)
{
    ncclUniqueId id;
    ncclComm_t comm = NULL;
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    ncclResult_t state = ncclInProgress;
    double start;
    int rc;

    if (!ctx || !out)
        return ctx ? dltpmix_set_error(ctx, DLTPMIX_ERR_ARG, "dltpmix_nccl_comm_init: NULL argument")
                   : DLTPMIX_ERR_ARG;
    *out = NULL;
    CUDA_TRY(ctx, cudaSetDevice(cuda_device));
    if (ctx->info.rank == 0)
        NCCL_TRY(ctx, ncclGetUniqueId(&id));
    rc = dltpmix_bcast(ctx, 0, &id, sizeof(id));
    if (rc != 0)
        return rc;
    /* Non-blocking init so a rank that never joins ends in an abort, not a hang. */
    config.blocking = 0;
    NCCL_TRY(ctx, ncclCommInitRankConfig(&comm, ctx->info.size, id, ctx->info.rank, &config));
    start = dlt_now();
    while (state == ncclInProgress) {
        if (ncclCommGetAsyncError(comm, &state) != ncclSuccess)
            state = ncclInternalError;
        if (state == ncclInProgress) {
            if (dlt_now() - start > ctx->timeout_s) {
                ncclCommAbort(comm);
                return dltpmix_set_error(ctx, DLTPMIX_ERR_TIMEOUT,
                                         "dltpmix: ncclCommInitRank on rank %d (device %d) did not finish in %.0f s; "
                                         "communicator aborted (check NCCL_SOCKET_IFNAME; NCCL_DEBUG=INFO shows why)",
                                         ctx->info.rank, cuda_device, ctx->timeout_s);
            }
            usleep(1000);
        }
    }
    if (state != ncclSuccess) {
        const char *last = ncclGetLastError(comm);
        ncclCommAbort(comm);
        return dltpmix_set_error(ctx, DLTPMIX_ERR_NCCL, "dltpmix: ncclCommInitRank on rank %d failed: %s (%s)",
                                 ctx->info.rank, ncclGetErrorString(state), last ? last : "");
    }
    *out = comm;
    return 0;
}
