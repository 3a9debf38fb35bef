/* SPDX-License-Identifier: Apache-2.0 */
/* grad_reducer: sums the flat gradient buffer over the ranks. Backward tells it which gradients
 * are final (ready) and when it is over (done); finish completes the sum. Behind it: nothing for
 * one rank; on the CPU, buckets summed by the host communicator's non-blocking all-reduce while
 * backward goes on (one blocking sum where the communicator has none); a GPU without NCCL, one
 * sum staged through host memory; NCCL buckets on the GPU that overlap the rest of backward
 * (grad_reducer_nccl.c). The buckets' layout is grad_buckets.h's. */
#ifndef DLT_GRAD_REDUCER_H
#define DLT_GRAD_REDUCER_H

#include <stddef.h>

#include "common/status.h"
#include "trainer/backend/backend.h"
#include "trainer/comm/comm.h"
#include "trainer/comm/grad_listener.h"

typedef struct dlt_grad_reducer_config {
    double bucket_mib; /* bucket size cap (--bucket-mib); <= 0: DLT_DEFAULT_BUCKET_MIB */
    double bottom_mib; /* the bottom bucket (--bottom-bucket-mib, at most the cap); <= 0: DLT_BOTTOM_BUCKET_MIB */
    int lowp;          /* NCCL path, fp16/bf16 runs: reduce copies in that type (--allreduce-lowp) */
} dlt_grad_reducer_config;

typedef struct dlt_grad_reducer dlt_grad_reducer;

/* The implementations' table (one per path). */
typedef struct {
    const char *name;
    /* 1 when the path can be recorded into a CUDA graph with the rest of the step: it queues its
     * work on the device and never waits on the host (--cuda-graphs needs it). */
    int capturable;
    int (*ready)(dlt_grad_reducer *r, size_t lo);
    int (*done)(dlt_grad_reducer *r);
    int (*finish)(dlt_grad_reducer *r);
    int (*agree)(dlt_grad_reducer *r, double *results, int count);
    void (*destroy)(dlt_grad_reducer *r);
} dlt_grad_reducer_ops;

struct dlt_grad_reducer {
    const dlt_grad_reducer_ops *ops;
    dlt_comm *comm;
    dlt_backend *be;
    float *grads; /* backend memory */
    size_t n;
    float *host; /* host staging (GPU backend, host communicator) */
    int divisor; /* the reduced gradients are this many ranks' sum (the optimizer divides by it):
                  * the world size, or 1 where the reduction averaged (dlt_grad_lowp_plan) */
    void *impl;
};

/* The low-precision reduction (--allreduce-lowp) over world ranks: each rank's gradients are
 * multiplied by *premul in the cast to fp16/bf16, before the sum, so the sum is the ranks' mean
 * and stays within fp16's range whatever the world size (scaled fp16 gradients summed over 64
 * ranks overflowed 64 times sooner); *divisor is what remains for the optimizer to divide by.
 * PyTorch's fp16_compress_hook (torch/distributed/algorithms/ddp_comm_hooks/default_hooks.py)
 * divides by the world size before its all-reduce likewise; here the product is taken in float
 * and rounded once. */
void dlt_grad_lowp_plan(int world, float *premul, int *divisor);

/* The buckets' sizes in floats from cfg (NULL: the defaults): the cap (--bucket-mib) and the bottom
 * one's (--bottom-bucket-mib, at most the cap): the arguments of dlt_grad_buckets_plan for every
 * path. */
void dlt_grad_bucket_sizes(const dlt_grad_reducer_config *cfg, size_t *cap_elems, size_t *bottom_elems);

/* The path follows from the communicator and the backend: NCCL buckets when the communicator is
 * NCCL and the backend a GPU (also for one rank, so the device check exercises it), else the
 * host communicator for more than one rank, else nothing. grads: n floats of backend memory. */
int dlt_grad_reducer_create(dlt_grad_reducer **out, const dlt_grad_reducer_config *cfg, dlt_comm *comm, dlt_backend *be,
                            float *grads, size_t n, dlt_err *err);
void dlt_grad_reducer_destroy(dlt_grad_reducer *r);

/* 1 when r's path can be recorded into a CUDA graph (see dlt_grad_reducer_ops.capturable). */
int dlt_grad_reducer_capturable(const dlt_grad_reducer *r);

/* What backward calls: dlt_net_backward(net, dlt_grad_reducer_listener(r)). */
dlt_grad_listener dlt_grad_reducer_listener(dlt_grad_reducer *r);

/* After the step's backward (run or recorded): the gradients are summed when it returns (host
 * paths) or, on the NCCL path, ordered before any later work of the backend's stream. A host
 * collective on the NCCL communicator (validation counts, replica checks) comes after the step's
 * results read, which waited for the compute stream and so for every reduction joined to it: NCCL
 * sees one order of collectives on every rank without a wait here. */
int dlt_grad_reducer_finish(dlt_grad_reducer *r);

/* The step's agreement: sums count doubles of backend memory (the backend's results) over the
 * ranks, in place, after the gradients, in the order every rank issues it. The NCCL path queues
 * it on the device (nothing waits: the step's one wait is the results' read); the host path
 * reduces in host memory (a GPU's results cross with a download and an upload). */
int dlt_grad_reducer_agree(dlt_grad_reducer *r, double *results, int count);

#ifdef DLT_HAVE_CUDA_BACKEND
int dlt_grad_reducer_nccl_create(dlt_grad_reducer *r, const dlt_grad_reducer_config *cfg, dlt_err *err);
#endif

#endif
