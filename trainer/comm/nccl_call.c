/* SPDX-License-Identifier: Apache-2.0 */
/* nccl_call: settling NCCL results, peer checks, release. */
#include "config.h"

#include "trainer/comm/nccl_call.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <time.h>

#include "trainer/common/clock.h"

static int _nccl_fail(ncclComm_t comm, ncclResult_t r, const char *call, const char *file, int line, char *err,
                      size_t errlen)
{
    const char *last = ncclGetLastError(comm);
    if (err && errlen)
        snprintf(err, errlen, "%s:%d: %s: %s (%s)", file, line, call, ncclGetErrorString(r),
                 last && *last ? last : "no detail; NCCL_DEBUG=INFO shows more");
    return -EIO;
}

int dlt_nccl_settle(ncclComm_t comm, ncclResult_t r, const char *call, const char *file, int line, double timeout_s,
                    char *err, size_t errlen)
{
    double end;
    if (r == ncclSuccess)
        return 0;
    if (r != ncclInProgress)
        return _nccl_fail(comm, r, call, file, line, err, errlen);
    end = dlt_now() + timeout_s;
    for (unsigned spin = 0;; spin++) {
        ncclResult_t state = ncclSuccess, q = ncclCommGetAsyncError(comm, &state);
        if (q != ncclSuccess)
            return _nccl_fail(comm, q, "ncclCommGetAsyncError", file, line, err, errlen);
        if (state == ncclSuccess)
            return 0;
        if (state != ncclInProgress)
            return _nccl_fail(comm, state, call, file, line, err, errlen);
        if (dlt_now() > end) {
            if (err && errlen)
                snprintf(err, errlen, "%s:%d: %s: still in progress after %.0f s (a peer lost?)", file, line, call,
                         timeout_s);
            return -ETIMEDOUT;
        }
        if (spin < 64) {
            sched_yield();
        } else {
            struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
        }
    }
}

int dlt_nccl_peer_check(void *comm, char *err, size_t errlen)
{
    ncclResult_t ar = ncclSuccess;
    /* The communicator belongs to the comm layer, which aborts it as the run ends. */
    if (comm && ncclCommGetAsyncError((ncclComm_t)comm, &ar) == ncclSuccess && ar != ncclSuccess &&
        ar != ncclInProgress) {
        const char *last = ncclGetLastError((ncclComm_t)comm);
        snprintf(err, errlen, "NCCL failed while the GPU worked (a peer lost?): %s (%s)", ncclGetErrorString(ar),
                 last ? last : "");
        return -EIO;
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
