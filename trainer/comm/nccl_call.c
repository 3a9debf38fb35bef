/* SPDX-License-Identifier: Apache-2.0 */
/* nccl_call: settling NCCL results, peer checks, release. */
#include "config.h"

#include "trainer/comm/nccl_call.h"

#include <errno.h>
#include <stdio.h>

#include "common/poll.h"

static int _nccl_fail(ncclComm_t comm, ncclResult_t r, const char *call, const char *file, int line, dlt_err *err)
{
    const char *last = ncclGetLastError(comm);
    return dlt_fail(err, -EIO, "%s:%d: %s: %s (%s)", file, line, call, ncclGetErrorString(r),
                    last && *last ? last : "no detail; NCCL_DEBUG=INFO shows more");
}

/* What one poll of an operation in progress asks; r is what ended it. */
typedef struct {
    ncclComm_t comm;
    ncclResult_t r;
    const char *call;
} nccl_wait;

/* 1 when the operation left ncclInProgress (w->r says how), 0 while it has not. */
static int _settled(void *arg)
{
    nccl_wait *w = arg;
    ncclResult_t state = ncclSuccess, q = ncclCommGetAsyncError(w->comm, &state);
    if (q != ncclSuccess) {
        w->r = q;
        w->call = "ncclCommGetAsyncError";
        return 1;
    }
    w->r = state;
    return state != ncclInProgress;
}

int dlt_nccl_settle(ncclComm_t comm, ncclResult_t r, const char *call, const char *file, int line, double timeout_s,
                    dlt_err *err)
{
    nccl_wait w = {comm, r, call};
    if (r == ncclSuccess)
        return 0;
    if (r != ncclInProgress)
        return _nccl_fail(comm, r, call, file, line, err);
    if (dlt_poll(_settled, &w, timeout_s) != 0) {
        return dlt_fail(err, -ETIMEDOUT, "%s:%d: %s: still in progress after %.0f s (a peer lost?)", file, line, call,
                        timeout_s);
    }
    return w.r == ncclSuccess ? 0 : _nccl_fail(comm, w.r, w.call, file, line, err);
}

int dlt_nccl_peer_check(void *comm, dlt_err *err)
{
    ncclResult_t ar = ncclSuccess;
    /* The communicator belongs to the comm layer, which aborts it as the run ends. */
    if (comm && ncclCommGetAsyncError((ncclComm_t)comm, &ar) == ncclSuccess && ar != ncclSuccess &&
        ar != ncclInProgress) {
        const char *last = ncclGetLastError((ncclComm_t)comm);
        return dlt_fail(err, -EIO, "NCCL failed while the GPU worked (a peer lost?): %s (%s)", ncclGetErrorString(ar),
                        last ? last : "");
    }
    return 0;
}

ncclResult_t dlt_nccl_release(ncclComm_t comm)
{
    ncclResult_t ar = ncclSuccess;
    if (!comm)
        return ncclSuccess;
    if (ncclCommGetAsyncError(comm, &ar) != ncclSuccess || (ar != ncclSuccess && ar != ncclInProgress))
        return ncclCommAbort(comm);
    return ncclCommDestroy(comm);
}
