/* SPDX-License-Identifier: Apache-2.0 */
/* nccl_check: NCCL communicator from dltpmix_nccl_comm_init, then an all-reduce whose result is
 * checked exactly (each rank contributes rank+1) and timed (algbw/busbw as nccl-tests report). */
#include "config.h"

#include <cuda_runtime.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "pmix/dltpmix.h"
#include "trainer/backend/device_choice.h"
#include "trainer/comm/nccl_call.h"
#include "trainer/common/clock.h"

#define CHECK_CUDA(x)                                                                                        \
    do {                                                                                                     \
        cudaError_t e_ = (x);                                                                                \
        if (e_ != cudaSuccess) {                                                                             \
            fprintf(stderr, "nccl_check: %s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));   \
            return 1;                                                                                        \
        }                                                                                                    \
    } while (0)
/* The trainer's one NCCL call path (nccl_call.h): errors with NCCL's own text. */
#define CHECK_NCCL(x)                                                                                        \
    do {                                                                                                     \
        char e_[512];                                                                                        \
        if (dlt_nccl_settle(comm, (x), #x, __FILE__, __LINE__, DLT_NCCL_SETTLE_TIMEOUT_S, e_, sizeof(e_))) { \
            fprintf(stderr, "nccl_check: %s\n", e_);                                                         \
            return 1;                                                                                        \
        }                                                                                                    \
    } while (0)

int main(void)
{
    const size_t n = (size_t)64 << 20; /* 64 Mi floats = 256 MiB */
    const int iters = 20;
    dltpmix_ctx *px = NULL;
    ncclComm_t comm = NULL;
    const dltpmix_info *in;
    char err[1024];
    int ndev = 0, dev;
    float *buf, *host;
    cudaStream_t s;
    double t0, dt, expect, bytes;
    size_t bad = 0;

    if (dltpmix_init(&px, NULL, err, sizeof(err))) {
        fprintf(stderr, "nccl_check: %s\n", err);
        return 1;
    }
    in = dltpmix_get_info(px);
    CHECK_CUDA(cudaGetDeviceCount(&ndev));
    /* The trainer's rule: the plugin's GPU, else the local rank modulo the visible GPUs. */
    if (dlt_device_choose(-1, getenv("DLT_LOCAL_GPU") != NULL, in->local_rank, ndev, &dev, err, sizeof(err))) {
        fprintf(stderr, "nccl_check: %s\n", err);
        return 1;
    }
    t0 = dlt_now();
    if (dltpmix_nccl_comm_init(px, dev, (struct ncclComm **)&comm)) {
        fprintf(stderr, "nccl_check: %s\n", dltpmix_error(px));
        return 1;
    }
    if (in->rank == 0)
        printf("nccl_check: communicator of %d ranks in %.3f s\n", in->size, dlt_now() - t0);
    CHECK_CUDA(cudaStreamCreate(&s));
    CHECK_CUDA(cudaMalloc((void **)&buf, n * sizeof(float)));
    host = malloc(n * sizeof(float));
    if (!host)
        return 1;
    for (size_t i = 0; i < n; i++)
        host[i] = (float)(in->rank + 1);
    CHECK_CUDA(cudaMemcpy(buf, host, n * sizeof(float), cudaMemcpyHostToDevice));
    CHECK_NCCL(ncclAllReduce(buf, buf, n, ncclFloat, ncclSum, comm, s));
    CHECK_CUDA(cudaStreamSynchronize(s));
    CHECK_CUDA(cudaMemcpy(host, buf, n * sizeof(float), cudaMemcpyDeviceToHost));
    expect = (double)in->size * (in->size + 1) / 2;
    for (size_t i = 0; i < n; i++)
        bad += host[i] != (float)expect;
    t0 = dlt_now();
    for (int i = 0; i < iters; i++)
        CHECK_NCCL(ncclAllReduce(buf, buf, n, ncclFloat, ncclSum, comm, s));
    CHECK_CUDA(cudaStreamSynchronize(s));
    dt = (dlt_now() - t0) / iters;
    bytes = (double)n * sizeof(float);
    if (in->rank == 0)
        printf("nccl_check: all-reduce %s (%zu wrong values); %.0f MiB in %.3f ms: algbw %.1f GB/s busbw %.1f GB/s\n",
               bad ? "WRONG" : "correct", bad, bytes / (1 << 20), dt * 1e3, bytes / dt / 1e9,
               bytes / dt / 1e9 * 2.0 * (in->size - 1) / in->size);
    dlt_nccl_release(comm);
    cudaFree(buf);
    free(host);
    dltpmix_finalize(px);
    return bad ? 1 : 0;
}
