/* SPDX-License-Identifier: Apache-2.0 */
/* nccl_call: the one path of every NCCL call in the trainer. A call's result is settled here:
 * success; ncclInProgress waited out as NCCL's documentation prescribes for non-blocking
 * communicators (poll ncclCommGetAsyncError until the operation has left that state; nothing
 * else may touch the communicator, or depend on the operation, before); any error reported with
 * the call, NCCL's error string and NCCL's last error text. Our communicators are blocking
 * (pmix/dltpmix_nccl.c says why), so the wait is a guard that costs nothing. Needs only nccl.h. */
#ifndef DLT_NCCL_CALL_H
#define DLT_NCCL_CALL_H

#include <stddef.h>

#include "common/status.h"
#include <nccl.h>

/* How long an operation may stay ncclInProgress before it is an error. */
#define DLT_NCCL_SETTLE_TIMEOUT_S 300.0

/* 0, or -EIO (-ETIMEDOUT while still in progress after timeout_s) with err filled. */
int dlt_nccl_settle(ncclComm_t comm, ncclResult_t r, const char *call, const char *file, int line, double timeout_s,
                    dlt_err *err);

/* The call's status through dlt_nccl_settle (0, or nonzero with err filled), for DLT_TRY. */
#define DLT_NCCL_CHECK(err, comm, call)                                                                                \
    dlt_nccl_settle((comm), (call), #call, __FILE__, __LINE__, DLT_NCCL_SETTLE_TIMEOUT_S, (err))

/* A peer check for waits on the GPU: nonzero (err filled) when NCCL reports an asynchronous error
 * on comm (a ncclComm_t), e.g. a lost peer. */
int dlt_nccl_peer_check(void *comm, dlt_err *err);

/* Ends comm's outstanding work: abort after an asynchronous error (destroy could wait forever on
 * a lost peer), else destroy. Returns what NCCL returned. */
ncclResult_t dlt_nccl_release(ncclComm_t comm);

#endif
