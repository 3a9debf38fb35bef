/* SPDX-License-Identifier: Apache-2.0 */
/* cuda_check: error text of the CUDA libraries, device selection, interruptible stream waits. */
#include "config.h"

#include "trainer/common/cuda_check.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int dlt_cuda_fail(char *err, size_t errlen, const char *file, int line, const char *call, const char *msg)
{
    if (err && errlen)
        snprintf(err, errlen, "%s:%d: %s: %s", file, line, call, msg);
    return -EIO;
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

int dlt_cuda_select_device(int requested, int *device, char *err, size_t errlen)
{
    int n = dlt_cuda_device_count(), d = requested < 0 ? 0 : requested;
    cudaError_t e;
    if (n == 0) {
        snprintf(err, errlen, "the CUDA runtime sees no GPU (driver missing, or CUDA_VISIBLE_DEVICES='%s' hides "
                 "them): run with --backend cpu or on a GPU node (srun --gpus-per-node=N)",
                 getenv("CUDA_VISIBLE_DEVICES") ? getenv("CUDA_VISIBLE_DEVICES") : "");
        return -ENODEV;
    }
    if (d >= n) {
        snprintf(err, errlen, "--device %d: this task sees %d GPU(s) (0..%d)", d, n, n - 1);
        return -ENODEV;
    }
    if ((e = cudaSetDevice(d)) != cudaSuccess) {
        snprintf(err, errlen, "cudaSetDevice(%d): %s", d, cudaGetErrorString(e));
        return -EIO;
    }
    *device = d;
    return 0;
}

/* Polls a stream (event NULL) or an event until done, asking peers between polls. */
static int _poll(cudaStream_t stream, cudaEvent_t event, const dlt_peer_check *peers, char *err, size_t errlen)
{
    for (unsigned spin = 0;; spin++) {
        cudaError_t e = event ? cudaEventQuery(event) : cudaStreamQuery(stream);
        if (e == cudaSuccess)
            return 0;
        if (e != cudaErrorNotReady) {
            snprintf(err, errlen, "waiting for the GPU: %s", cudaGetErrorString(e));
            return -EIO;
        }
        (void)cudaGetLastError(); /* "not ready" is not an error: do not leave it for the next launch */
        if (dlt_peer_lost(peers, err, errlen) != 0)
            return -EIO;
        if (spin < 64) {
            sched_yield();
        } else {
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
        }
    }
}

int dlt_cuda_stream_wait(cudaStream_t stream, const dlt_peer_check *peers, char *err, size_t errlen)
{
    return _poll(stream, NULL, peers, err, errlen);
}

int dlt_cuda_event_wait(cudaEvent_t event, const dlt_peer_check *peers, char *err, size_t errlen)
{
    return _poll(NULL, event, peers, err, errlen);
}
