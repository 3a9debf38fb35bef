/* SPDX-License-Identifier: Apache-2.0 */
/* grad_reducer_nccl: the GPU path of the gradient reducer. The flat gradient buffer is cut into
 * buckets from the top (grad_buckets.h); as backward reports a bucket final, the bucket is summed
 * with ncclAllReduce on a communication stream that waits for it on the backend's stream (an
 * event), so the reduction overlaps the rest of backward. When backward is over the backend's
 * stream waits for every reduction (another event), so the optimizer reads summed gradients.
 * Also recorded into a CUDA graph: the events fork and join the capture. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include "common/cuda_check.h"
#include "common/status.h"
#include "common/tunables.h"
#include "trainer/backend/cuda_backend.h"
#include "trainer/comm/grad_buckets.h"
#include "trainer/comm/grad_reducer.h"
#include "trainer/comm/nccl_call.h"

typedef struct {
    ncclComm_t nccl;
    cudaStream_t compute, cs; /* the backend's stream; ours */
    dlt_grad_buckets bk;
    cudaEvent_t *bucket_ready, comm_done, results_ready;
    void *lowp;               /* fp16/bf16 copy of the gradients (--allreduce-lowp), else NULL */
    ncclDataType_t lowp_type; /* the backend's 16-bit type (dlt_backend_lowp) */
    float lowp_premul;        /* 1/world: the cast averages (dlt_grad_lowp_plan) */
} nccl_path;

static int _launch_bucket(dlt_grad_reducer *r, int i)
{
    dlt_err *err = r->comm->err;
    nccl_path *p = r->impl;
    const dlt_grad_bucket *b = &p->bk.b[i];
    size_t count = b->hi - b->lo;
    float *g = r->grads + b->lo;
    /* The bucket's gradients were written on the compute stream: the reduction waits for them. */
    DLT_TRY(err, DLT_CUDA_CHECK(err, cudaEventRecord(p->bucket_ready[i], p->compute)));
    DLT_TRY(err, DLT_CUDA_CHECK(err, cudaStreamWaitEvent(p->cs, p->bucket_ready[i], 0)));
    if (p->lowp) {
        void *lp = (char *)p->lowp + b->lo * 2;
        DLT_TRY(err, DLT_CUDA_CHECK(err, dlt_cuda_grads_to_lowp(r->be, g, lp, count, p->lowp_premul, p->cs)));
        DLT_TRY(err, DLT_NCCL_CHECK(err, p->nccl, ncclAllReduce(lp, lp, count, p->lowp_type, ncclSum, p->nccl, p->cs)));
        DLT_TRY(err, DLT_CUDA_CHECK(err, dlt_cuda_grads_from_lowp(r->be, lp, g, count, p->cs)));
    } else {
        DLT_TRY(err, DLT_NCCL_CHECK(err, p->nccl, ncclAllReduce(g, g, count, ncclFloat32, ncclSum, p->nccl, p->cs)));
    }
    return 0;
}

static int _ready(dlt_grad_reducer *r, size_t lo)
{
    nccl_path *p = r->impl;
    int first = p->bk.launched, k = dlt_grad_buckets_take(&p->bk, lo), rc;
    for (int i = first; i < first + k; i++)
        if ((rc = _launch_bucket(r, i)) != 0)
            return rc;
    return 0;
}

static int _done(dlt_grad_reducer *r)
{
    dlt_err *err = r->comm->err;
    nccl_path *p = r->impl;
    int rc = _ready(r, 0);
    dlt_grad_buckets_reset(&p->bk);
    if (rc)
        return rc;
    /* The optimizer (compute stream) reads the gradients only after every reduction. */
    DLT_TRY(err, DLT_CUDA_CHECK(err, cudaEventRecord(p->comm_done, p->cs)));
    DLT_TRY(err, DLT_CUDA_CHECK(err, cudaStreamWaitEvent(p->compute, p->comm_done, 0)));
    return 0;
}

/* Nothing to wait for: _done joined every reduction to the compute stream (see
 * dlt_grad_reducer_finish on later host collectives). */
static int _finish(dlt_grad_reducer *r)
{
    (void)r;
    return 0;
}

/* The results' sum on the communication stream, after every bucket (NCCL needs one order of
 * collectives on a communicator on every rank: buckets, then this, always), between two events so
 * the compute stream's sgd_step and results read see the sum. One rank: nothing to sum. */
static int _agree(dlt_grad_reducer *r, double *results, int count)
{
    dlt_err *err = r->comm->err;
    nccl_path *p = r->impl;
    if (r->comm->size < 2)
        return 0;
    DLT_TRY(err, DLT_CUDA_CHECK(err, cudaEventRecord(p->results_ready, p->compute)));
    DLT_TRY(err, DLT_CUDA_CHECK(err, cudaStreamWaitEvent(p->cs, p->results_ready, 0)));
    DLT_TRY(err, DLT_NCCL_CHECK(err, p->nccl,
                                ncclAllReduce(results, results, (size_t)count, ncclFloat64, ncclSum, p->nccl, p->cs)));
    DLT_TRY(err, DLT_CUDA_CHECK(err, cudaEventRecord(p->comm_done, p->cs)));
    DLT_TRY(err, DLT_CUDA_CHECK(err, cudaStreamWaitEvent(p->compute, p->comm_done, 0)));
    return 0;
}

static void _destroy(dlt_grad_reducer *r)
{
    nccl_path *p = r->impl;
    if (!p)
        return;
    if (p->cs)
        cudaStreamSynchronize(p->cs);
    for (int i = 0; p->bucket_ready && i < p->bk.n; i++)
        if (p->bucket_ready[i])
            cudaEventDestroy(p->bucket_ready[i]);
    free(p->bucket_ready);
    if (p->comm_done)
        cudaEventDestroy(p->comm_done);
    if (p->results_ready)
        cudaEventDestroy(p->results_ready);
    cudaFree(p->lowp);
    if (p->cs)
        cudaStreamDestroy(p->cs);
    dlt_grad_buckets_free(&p->bk);
    free(p);
}

static const dlt_grad_reducer_ops g_nccl = {"nccl-buckets", 1, _ready, _done, _finish, _agree, _destroy};

int dlt_grad_reducer_nccl_create(dlt_grad_reducer *r, const dlt_grad_reducer_config *cfg, dlt_err *err)
{
    nccl_path *p = calloc(1, sizeof(*p));
    size_t cap, bottom;
    dlt_precision prec = dlt_backend_lowp(r->be);
    int rc;
    if (!p)
        return dlt_fail(err, -ENOMEM, "out of memory");
    r->impl = p;
    r->ops = &g_nccl;
    p->nccl = (ncclComm_t)r->comm->ops->nccl(r->comm);
    p->compute = (cudaStream_t)r->be->stream;
    dlt_grad_bucket_sizes(cfg, &cap, &bottom);
    if ((rc = dlt_grad_buckets_plan(&p->bk, r->n, cap, bottom, DLT_BUCKET_ALIGN_ELEMS)) != 0)
        return dlt_fail(err, rc, "gradient buckets: cannot plan %zu values", r->n);
    if (!(p->bucket_ready = calloc((size_t)p->bk.n, sizeof(cudaEvent_t))))
        return dlt_fail(err, -ENOMEM, "out of memory");
    for (int i = 0; i < p->bk.n; i++)
        DLT_TRY(err, DLT_CUDA_CHECK(err, cudaEventCreateWithFlags(&p->bucket_ready[i], cudaEventDisableTiming)));
    DLT_TRY(err, DLT_CUDA_CHECK(err, cudaEventCreateWithFlags(&p->comm_done, cudaEventDisableTiming)));
    DLT_TRY(err, DLT_CUDA_CHECK(err, cudaEventCreateWithFlags(&p->results_ready, cudaEventDisableTiming)));
    /* The reductions' stream at the device's highest priority, so a bucket's all-reduce is not
     * queued behind the rest of backward's kernels (Apex's DDP and the MLPerf ResNet
     * implementations give communication a high-priority stream likewise). */
    {
        int least = 0, greatest = 0;
        DLT_TRY(err, DLT_CUDA_CHECK(err, cudaDeviceGetStreamPriorityRange(&least, &greatest)));
        DLT_TRY(err, DLT_CUDA_CHECK(err, cudaStreamCreateWithPriority(&p->cs, cudaStreamNonBlocking, greatest)));
    }
    if (cfg && cfg->lowp && prec != DLT_PREC_FP32) {
        p->lowp_type = prec == DLT_PREC_BF16 ? ncclBfloat16 : ncclFloat16;
        dlt_grad_lowp_plan(r->comm->size, &p->lowp_premul, &r->divisor);
        if (cudaMalloc(&p->lowp, r->n * 2) != cudaSuccess)
            return dlt_fail(err, -ENOMEM, "out of device memory for the %s gradient copy (drop --allreduce-lowp)",
                            dlt_precision_name(prec));
    }
    return 0;
}
