/* SPDX-License-Identifier: Apache-2.0 */
/* allreduce_nccl: the sweep's device side: device buffers all-reduced in place by NCCL on the
 * trainer's communicator, as the gradient buckets are (no host staging in the timing). */
#include "config.h"

#include "trainer/check/allreduce_check.h"

#include <cuda_runtime.h>
#include <errno.h>
#include <nccl.h>
#include <stdio.h>

#include "common/clock.h"
#include "common/cuda_check.h"
#include "common/status.h"
#include "trainer/comm/nccl_call.h"

static int _run(dlt_comm *c, ncclComm_t nc, cudaStream_t s, float *d, const float *src, float *dst, size_t count,
                int iters, double *seconds)
{
    double t0;
    if (src)
        DLT_TRY(c->err,
                DLT_CUDA_CHECK(c->err, cudaMemcpyAsync(d, src, count * sizeof(float), cudaMemcpyHostToDevice, s)));
    DLT_TRY(c->err, DLT_CUDA_CHECK(c->err, cudaStreamSynchronize(s)));
    t0 = dlt_now();
    for (int i = 0; i < iters; i++)
        DLT_TRY(c->err, DLT_NCCL_CHECK(c->err, nc, ncclAllReduce(d, d, count, ncclFloat32, ncclSum, nc, s)));
    if (dlt_cuda_stream_wait(s, &c->peers, c->err) != 0)
        return -EIO;
    *seconds = dlt_now() - t0;
    if (dst)
        DLT_TRY(c->err, DLT_CUDA_CHECK(c->err, cudaMemcpy(dst, d, count * sizeof(float), cudaMemcpyDeviceToHost)));
    return 0;
}

int dlt_ar_nccl_run(dlt_comm *c, const float *src, float *dst, size_t count, int iters, double *seconds)
{
    ncclComm_t nc = c->ops->nccl(c);
    cudaStream_t s = NULL;
    float *d = NULL;
    int rc;
    if (cudaMalloc((void **)&d, count * sizeof(float)) != cudaSuccess)
        return dlt_fail(c->err, -ENOMEM, "all-reduce check: no device memory for %zu bytes", count * sizeof(float));
    if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) {
        cudaFree(d);
        return dlt_fail(c->err, -EIO, "all-reduce check: cannot create a CUDA stream");
    }
    /* A timing run without src works on whatever the buffer holds: zeros are enough to time. */
    if (!src && cudaMemset(d, 0, count * sizeof(float)) != cudaSuccess)
        rc = dlt_fail(c->err, -EIO, "all-reduce check: cudaMemset failed");
    else
        rc = _run(c, nc, s, d, src, dst, count, iters, seconds);
    cudaStreamSynchronize(s);
    cudaStreamDestroy(s);
    cudaFree(d);
    return rc;
}
