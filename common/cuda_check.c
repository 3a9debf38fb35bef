/* SPDX-License-Identifier: Apache-2.0 */
/* cuda_check: error text of the CUDA libraries, device selection, interruptible stream waits,
 * buffers that only grow. */
#include "config.h"

#include "common/cuda_check.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/env_contract.h"
#include "common/poll.h"

int dlt_cuda_fail(dlt_err *err, const char *file, int line, const char *call, const char *msg)
{
    return dlt_fail(err, -EIO, "%s:%d: %s: %s", file, line, call, msg);
}

int dlt_cuda_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); /* clear the sticky "no device" status */
        return 0;
    }
    return n;
}

int dlt_cuda_select_device(int requested, int *device, dlt_err *err)
{
    int n = dlt_cuda_device_count(), d = requested < 0 ? 0 : requested;
    cudaError_t e;
    if (n == 0) {
        return dlt_fail(err, -ENODEV,
                        "the CUDA runtime sees no GPU (driver missing, or CUDA_VISIBLE_DEVICES='%s' hides "
                        "them): run with --backend cpu or on a GPU node (srun --gpus-per-node=N)",
                        getenv(DLT_ENV_CUDA_VISIBLE_DEVICES) ? getenv(DLT_ENV_CUDA_VISIBLE_DEVICES) : "");
    }
    if (d >= n) {
        return dlt_fail(err, -ENODEV, "--device %d: this task sees %d GPU(s) (0..%d)", d, n, n - 1);
    }
    if ((e = cudaSetDevice(d)) != cudaSuccess) {
        return dlt_fail(err, -EIO, "cudaSetDevice(%d): %s", d, cudaGetErrorString(e));
    }
    *device = d;
    return 0;
}

/* What one poll of a stream or an event asks. */
typedef struct {
    cudaStream_t stream;
    cudaEvent_t event;           /* NULL: the stream */
    const dlt_peer_check *peers; /* asked between polls; NULL: none */
    dlt_err *err;
} cuda_wait;

/* 1 when the stream or event is done, 0 not yet, -EIO on a CUDA error or a failed check. */
static int _done(void *arg)
{
    cuda_wait *w = arg;
    cudaError_t e = w->event ? cudaEventQuery(w->event) : cudaStreamQuery(w->stream);
    if (e == cudaSuccess)
        return 1;
    if (e != cudaErrorNotReady) {
        return dlt_fail(w->err, -EIO, "waiting for the GPU: %s", cudaGetErrorString(e));
    }
    (void)cudaGetLastError(); /* "not ready" is not an error: do not leave it for the next launch */
    if (dlt_peer_lost(w->peers, w->err) != 0)
        return -EIO;
    return 0;
}

int dlt_cuda_stream_wait(cudaStream_t stream, const dlt_peer_check *peers, dlt_err *err)
{
    cuda_wait w = {stream, NULL, peers, err};
    return dlt_poll(_done, &w, 0);
}

int dlt_cuda_event_wait(cudaEvent_t event, const dlt_peer_check *peers, dlt_err *err)
{
    cuda_wait w = {NULL, event, peers, err};
    return dlt_poll(_done, &w, 0);
}

int dlt_cuda_grow(void **dev, void **pin, size_t *size, size_t need, cudaStream_t stream, const dlt_peer_check *peers,
                  dlt_err *err)
{
    cudaError_t e;
    int rc;
    if (need <= *size)
        return 0;
    if ((rc = dlt_cuda_stream_wait(stream, peers, err)) != 0)
        return rc;
    cudaFree(*dev);
    *dev = NULL;
    if (pin) {
        cudaFreeHost(*pin);
        *pin = NULL;
    }
    *size = 0;
    if ((e = cudaMalloc(dev, need)) != cudaSuccess) {
        *dev = NULL;
        return dlt_cuda_fail(err, __FILE__, __LINE__, "cudaMalloc", cudaGetErrorString(e));
    }
    if (pin && (e = cudaMallocHost(pin, need)) != cudaSuccess) {
        cudaFree(*dev);
        *dev = *pin = NULL;
        return dlt_cuda_fail(err, __FILE__, __LINE__, "cudaMallocHost", cudaGetErrorString(e));
    }
    *size = need;
    return 0;
}
