/* SPDX-License-Identifier: Apache-2.0 */
/* nccl_check: NCCL communicator from dltpmix_nccl_comm_init, then all-reduces whose results are
 * checked exactly and one timed (algbw/busbw as nccl-tests report). The exact checks run over
 * sizes that cross the trainer's bucket boundaries (DLT_DEFAULT_BUCKET_MIB, aligned to
 * DLT_BUCKET_ALIGN_ELEMS) and NCCL's small/large protocol switches, in float, double and half
 * (the --allreduce-lowp type), with integer values whose sums are exact in each type: every
 * element of every rank differs, so a wrong offset, a dropped rank or a doubled one shows. With
 * one rank NCCL copies instead of reducing (device/onerank.cu): only several ranks (the device
 * check runs two on one GPU, NCCL >= 2.30 with NCCL_MULTI_RANK_GPU_ENABLE=1) prove the sum.
 * Prints the NCCL version it loaded. */
#include "config.h"

#include <cuda_runtime.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "common/clock.h"
#include "common/tunables.h"
#include "pmix/dltpmix.h"
#include "trainer/backend/device_choice.h"
#include "trainer/comm/nccl_call.h"

#define CHECK_CUDA(x)                                                                                                  \
    do {                                                                                                               \
        cudaError_t e_ = (x);                                                                                          \
        if (e_ != cudaSuccess) {                                                                                       \
            fprintf(stderr, "nccl_check: %s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));             \
            return 1;                                                                                                  \
        }                                                                                                              \
    } while (0)
/* The trainer's one NCCL call path (nccl_call.h): errors with NCCL's own text. */
#define CHECK_NCCL(x)                                                                                                  \
    do {                                                                                                               \
        dlt_err e_ = DLT_ERR_INIT;                                                                                     \
        if (dlt_nccl_settle(comm, (x), #x, __FILE__, __LINE__, DLT_NCCL_SETTLE_TIMEOUT_S, &e_)) {                      \
            fprintf(stderr, "nccl_check: %s\n", e_.msg);                                                               \
            return 1;                                                                                                  \
        }                                                                                                              \
    } while (0)

/* Rank r's value at i, and the sum over size ranks: integers exact in every checked type. */
static double _val(size_t i, int r, int half)
{
    return half ? (double)(i % 7 + 1 + (size_t)r) : (double)(i % 1021 + 1) + 2048.0 * r;
}

static double _sum(size_t i, int size, int half)
{
    double s = 0;
    for (int r = 0; r < size; r++)
        s += _val(i, r, half);
    return s;
}

/* One exact all-reduce of n elements of type t: 0 when every element is the sum. */
static int _exact(ncclComm_t comm, cudaStream_t s, const dltpmix_info *in, size_t n, ncclDataType_t t, size_t *bad)
{
    int half = t == ncclFloat16;
    size_t es = t == ncclFloat64 ? 8 : t == ncclFloat32 ? 4 : 2;
    void *d = NULL, *h = malloc(n * es + 1);
    if (!h)
        return 1;
    for (size_t i = 0; i < n; i++) {
        double v = _val(i, in->rank, half);
        if (t == ncclFloat64)
            ((double *)h)[i] = v;
        else if (t == ncclFloat32)
            ((float *)h)[i] = (float)v;
        else
            ((_Float16 *)h)[i] = (_Float16)v;
    }
    CHECK_CUDA(cudaMalloc(&d, n * es + 1));
    CHECK_CUDA(cudaMemcpy(d, h, n * es, cudaMemcpyHostToDevice));
    CHECK_NCCL(ncclAllReduce(d, d, n, t, ncclSum, comm, s));
    CHECK_CUDA(cudaStreamSynchronize(s));
    CHECK_CUDA(cudaMemcpy(h, d, n * es, cudaMemcpyDeviceToHost));
    *bad = 0;
    for (size_t i = 0; i < n; i++) {
        double got = t == ncclFloat64   ? ((double *)h)[i]
                     : t == ncclFloat32 ? (double)((float *)h)[i]
                                        : (double)((_Float16 *)h)[i];
        *bad += got != _sum(i, in->size, half);
    }
    cudaFree(d);
    free(h);
    return 0;
}

int main(void)
{
    const size_t n = (size_t)64 << 20; /* 64 Mi floats = 256 MiB */
    const int iters = 20;
    dltpmix_ctx *px = NULL;
    ncclComm_t comm = NULL;
    const dltpmix_info *in;
    dlt_err err = DLT_ERR_INIT;
    int ndev = 0, dev;
    float *buf, *host;
    cudaStream_t s;
    double t0, dt, expect, bytes;
    size_t bad = 0;

    if (dltpmix_init(&px, NULL, err.msg, sizeof(err.msg))) {
        fprintf(stderr, "nccl_check: %s\n", err.msg);
        return 1;
    }
    in = dltpmix_get_info(px);
    CHECK_CUDA(cudaGetDeviceCount(&ndev));
    /* The trainer's rule: the plugin's GPU, else the local rank modulo the visible GPUs. */
    if (dlt_device_choose(-1, getenv("DLT_LOCAL_GPU") != NULL, in->local_rank, ndev, &dev, dlt_err_fresh(&err))) {
        fprintf(stderr, "nccl_check: %s\n", err.msg);
        return 1;
    }
    t0 = dlt_now();
    if (dltpmix_nccl_comm_init(px, dev, (struct ncclComm **)&comm)) {
        fprintf(stderr, "nccl_check: %s\n", dltpmix_error(px));
        return 1;
    }
    {
        int v = 0;
        ncclGetVersion(&v);
        if (in->rank == 0)
            printf("nccl_check: communicator of %d ranks in %.3f s (NCCL %d.%d.%d, GPU %d%s)\n", in->size,
                   dlt_now() - t0, v / 10000, v / 100 % 100, v % 100, dev,
                   getenv("NCCL_MULTI_RANK_GPU_ENABLE") ? ", NCCL_MULTI_RANK_GPU_ENABLE set" : "");
    }
    CHECK_CUDA(cudaStreamCreate(&s));
    {
        /* Bucket-sized runs (the trainer's default cap, 64-element aligned) and their neighbours,
         * NCCL's small sizes, and odd counts that leave a partial vector. */
        const size_t bucket = (size_t)(DLT_DEFAULT_BUCKET_MIB * 1048576.0 / sizeof(float)) / DLT_BUCKET_ALIGN_ELEMS *
                              DLT_BUCKET_ALIGN_ELEMS;
        const size_t sizes[] = {1,    7,     63,         64,     65,         1023,
                                4097, 65537, bucket - 1, bucket, bucket + 1, 2 * bucket + DLT_BUCKET_ALIGN_ELEMS + 3};
        const size_t nsizes = sizeof(sizes) / sizeof(sizes[0]);
        const struct {
            ncclDataType_t t;
            const char *name;
        } types[] = {{ncclFloat32, "float"}, {ncclFloat64, "double"}, {ncclFloat16, "half"}};
        for (size_t k = 0; k < sizeof(types) / sizeof(types[0]); k++)
            for (size_t j = 0; j < nsizes; j++) {
                size_t wrong = 0;
                if (_exact(comm, s, in, sizes[j], types[k].t, &wrong) != 0)
                    return 1;
                bad += wrong;
                if (wrong && in->rank == 0)
                    printf("nccl_check: WRONG: %s all-reduce of %zu elements over %d ranks: %zu wrong sums\n",
                           types[k].name, sizes[j], in->size, wrong);
            }
        if (in->rank == 0)
            printf("nccl_check: exact sums over %d ranks: %zu sizes (1 .. %zu, across %zu-element buckets) x float, "
                   "double, half: %s\n",
                   in->size, nsizes, sizes[nsizes - 1], bucket, bad ? "WRONG" : "all exact");
    }
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
        bad += host[i] != (float)expect; /* after the exact checks: bad counts both */
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
