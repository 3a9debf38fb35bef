/* SPDX-License-Identifier: Apache-2.0 */
/* fake_nccl: a stand-in for libnccl with NCCL's ABI for the calls the trainer's NCCL call path
 * makes (ncclCommGetAsyncError, ncclGetErrorString, ncclGetLastError, ncclCommAbort,
 * ncclCommDestroy), scripted by the test: how many polls an operation stays ncclInProgress, what
 * it ends in, and the last-error text. No GPU, no network. */
#include <nccl.h>
#include <string.h>

#include "tests/fake_nccl/fake_nccl.h"

static struct {
    int polls_left;     /* ncclCommGetAsyncError answers ncclInProgress this many more times */
    ncclResult_t final; /* then this */
    char last[256];
    int polls, aborts, destroys;
} g_fake;

void fake_nccl_script(int in_progress_polls, ncclResult_t final, const char *last_error)
{
    memset(&g_fake, 0, sizeof(g_fake));
    g_fake.polls_left = in_progress_polls;
    g_fake.final = final;
    if (last_error)
        strncpy(g_fake.last, last_error, sizeof(g_fake.last) - 1);
}

int fake_nccl_polls(void)
{
    return g_fake.polls;
}

int fake_nccl_aborts(void)
{
    return g_fake.aborts;
}

int fake_nccl_destroys(void)
{
    return g_fake.destroys;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError)
{
    (void)comm;
    g_fake.polls++;
    if (g_fake.polls_left > 0) {
        g_fake.polls_left--;
        *asyncError = ncclInProgress;
    } else {
        *asyncError = g_fake.final;
    }
    return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t result)
{
    switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
    }
}

const char *ncclGetLastError(ncclComm_t comm)
{
    (void)comm;
    return g_fake.last;
}

ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    (void)comm;
    g_fake.aborts++;
    return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    (void)comm;
    g_fake.destroys++;
    return ncclSuccess;
}
