/* SPDX-License-Identifier: Apache-2.0 */
/* cuda_check: the CUDA-side helpers every GPU module shares: one check per library (CUDA runtime,
 * cuDNN, cuBLAS; NCCL's is in trainer/comm/nccl_call.h) that turns the library's result into a
 * status, filling an error with file:line, the call and the library's own error string (used
 * inside status.h's DLT_TRY or DLT_TRY_GOTO), device selection, a host wait that
 * can be interrupted by a failed peer, and buffers that only grow. Built only with the CUDA
 * backend. */
#ifndef DLT_CUDA_CHECK_H
#define DLT_CUDA_CHECK_H

#include <stddef.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "common/cudnn_status.h"
#include "common/peer_check.h"
#include "common/status.h"

/* Writes "file:line: call: msg" into err and returns -EIO. */
int dlt_cuda_fail(dlt_err *err, const char *file, int line, const char *call, const char *msg);

/* Each is 0, or -EIO with err filled, for the call's result. A kernel launcher of ours returns a
 * cudaError_t as int: DLT_CUDA_CHECK takes it too. */
static inline int dlt_cuda_check_at(dlt_err *err, cudaError_t e, const char *file, int line, const char *call)
{
    return e == cudaSuccess ? 0 : dlt_cuda_fail(err, file, line, call, cudaGetErrorString(e));
}
static inline int dlt_cudnn_check_at(dlt_err *err, cudnnStatus_t s, const char *file, int line, const char *call)
{
    return dlt_cudnn_ok(s) ? 0 : dlt_cuda_fail(err, file, line, call, cudnnGetErrorString(s));
}
static inline int dlt_cublas_check_at(dlt_err *err, cublasStatus_t s, const char *file, int line, const char *call)
{
    return s == CUBLAS_STATUS_SUCCESS ? 0 : dlt_cuda_fail(err, file, line, call, cublasGetStatusString(s));
}
#define DLT_CUDA_CHECK(err, call) dlt_cuda_check_at((err), (cudaError_t)(call), __FILE__, __LINE__, #call)
#define DLT_CUDNN_CHECK(err, call) dlt_cudnn_check_at((err), (call), __FILE__, __LINE__, #call)
#define DLT_CUBLAS_CHECK(err, call) dlt_cublas_check_at((err), (call), __FILE__, __LINE__, #call)
/* GPUs the CUDA runtime sees (0 without a driver or device). */
int dlt_cuda_device_count(void);
/* Makes `requested` (-1: 0) the calling thread's device; *device gets it. */
int dlt_cuda_select_device(int requested, int *device, dlt_err *err);

/* Waits for a stream by polling, so that between polls `peers` (may be NULL) can end the wait with
 * an error, e.g. NCCL's asynchronous error state of a lost peer, instead of a hang. */
int dlt_cuda_stream_wait(cudaStream_t stream, const dlt_peer_check *peers, dlt_err *err);
/* The same for one event (the work queued before it was recorded). */
int dlt_cuda_event_wait(cudaEvent_t event, const dlt_peer_check *peers, dlt_err *err);

/* A buffer that only grows (a workspace, a scratch, a staging pair): makes *dev, and *pin when pin
 * is not NULL (pinned host memory of the same size), hold at least `need` bytes; *size is what
 * they hold. Growing first waits for `stream` (as dlt_cuda_stream_wait: work queued there may
 * still use the old buffers), then frees and allocates anew: the contents are not kept. On
 * failure both are NULL, *size is 0 and err says which allocation failed. */
int dlt_cuda_grow(void **dev, void **pin, size_t *size, size_t need, cudaStream_t stream, const dlt_peer_check *peers,
                  dlt_err *err);

#endif
