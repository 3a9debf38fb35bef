/* SPDX-License-Identifier: Apache-2.0 */
/* comm: everything that crosses ranks: the host collectives (MPI, NCCL or a single rank), the
 * choice of communicator in one function, and the gradient reducer (grad_reducer.h) that sums the
 * gradients while backward runs. The training loop sees only these two interfaces. */
#ifndef DLT_COMM_H
#define DLT_COMM_H

#include <stddef.h>

#include "common/peer_check.h"
#include "common/status.h"
#include "pmix/dltpmix.h"

typedef enum { DLT_DTYPE_F32 = 0, DLT_DTYPE_F64 = 1, DLT_DTYPE_I64 = 2 } dlt_dtype;

/* Here with the type, not in comm.c: the communicators use it, and comm.c (which chooses and
 * creates them) is the one file that calls into theirs. */
static inline size_t dlt_dtype_size(dlt_dtype type)
{
    switch (type) {
    case DLT_DTYPE_F32: return 4;
    case DLT_DTYPE_F64: return 8;
    case DLT_DTYPE_I64: return 8;
    }
    return 0;
}

typedef struct dlt_comm dlt_comm;

typedef struct {
    const char *name;
    /* In-place sum over all ranks of host memory. */
    int (*allreduce_sum)(dlt_comm *c, void *buf, size_t count, dlt_dtype type);
    int (*bcast)(dlt_comm *c, void *buf, size_t bytes, int root);
    int (*barrier)(dlt_comm *c);
    void (*destroy)(dlt_comm *c);
    /* Ends every rank now (a peer is lost or a collective is wedged); may be called from any thread. */
    void (*abort)(dlt_comm *c, int code);
    /* The ncclComm_t of an NCCL communicator (the gradient reducer's NCCL path runs on it); NULL
     * entry for host communicators. */
    void *(*nccl)(dlt_comm *c);
    /* A communicator over the ranks that pass the same color (>= 0), ordered by key; every rank
     * calls it; a rank passing color < 0 joins none (*out NULL). The health check (trainer/check)
     * measures within a node, across nodes and between node pairs on it. NULL: cannot split. */
    int (*split)(dlt_comm *c, int color, int key, dlt_comm **out);
    /* Tears the communicator down without waiting for its peers, after a collective on it failed
     * (a lost peer would make destroy wait: NCCL's ncclCommDestroy flushes outstanding work, its
     * ncclCommAbort does not), without ending the process as abort does. NULL: destroy serves. */
    void (*discard)(dlt_comm *c);
    /* Each rank's bytes of mine into all (size * bytes), in rank order; the agreements
     * (agree.h) are built on it. */
    int (*allgather)(dlt_comm *c, const void *mine, size_t bytes, void *all);
    /* A non-blocking in-place sum of host memory (count < 2^31), so that the gradient reducer's
     * buckets cross while backward goes on: start returns a request in *req; test drives the
     * communicator's progress and, when the sum is complete, sets *done and frees the request;
     * wait blocks until it is (counted as waiting on the peers). A failed request is freed too.
     * Every rank starts the same requests in the same order. NULL: the communicator has none. */
    int (*iallreduce_start)(dlt_comm *c, void *buf, size_t count, dlt_dtype type, void **req);
    int (*iallreduce_test)(dlt_comm *c, void **req, int *done);
    int (*iallreduce_wait)(dlt_comm *c, void **req);
} dlt_comm_ops;

struct dlt_comm {
    const dlt_comm_ops *ops;
    int rank;
    int size;
    /* Whether a peer is lost, for waits on the device (NCCL's asynchronous error; empty for host
     * communicators): the communicator's own waits ask it, and the run lends it to the backend. */
    dlt_peer_check peers;
    /* The error sink given at creation: every collective's error goes there. */
    dlt_err *err;
    void *impl;
    /* Threads of this rank now inside a host collective (read and written with __atomic builtins):
     * the stall watchdog tells a rank that waits for its peers from one that is stuck itself. */
    int in_collective;
};

/* c (may be NULL) torn down after a failure on it: discard where the communicator has one. */
static inline void dlt_comm_discard(dlt_comm *c)
{
    if (c)
        (c->ops->discard ? c->ops->discard : c->ops->destroy)(c);
}

/* What the run asks for: kind "auto", "single", "mpi" or "nccl"; gpu: the run's backend is a GPU
 * (then "auto" means NCCL for more than one rank); cuda_device for NCCL (-1: the first visible). */
typedef struct {
    const char *kind;
    int gpu;
    int cuda_device;
} dlt_comm_request;

/* The one place the communicator is chosen: auto -> single for one rank, else NCCL on GPUs and
 * MPI on CPUs. px gives rank and size (and bootstraps NCCL). err receives this call's error and,
 * for the communicator's life, every collective's (it must outlive the communicator). */
int dlt_comm_open(dlt_comm **out, const dlt_comm_request *req, dltpmix_ctx *px, dlt_err *err);
/* The kind dlt_comm_open would choose for ranks ranks ("single", "mpi" or "nccl"); NULL with err
 * filled when the request is invalid. */
const char *dlt_comm_resolve(const dlt_comm_request *req, int ranks, dlt_err *err);
void dlt_comm_destroy(dlt_comm *c);

int dlt_comm_single_create(dlt_comm **out, dlt_err *err);
#ifdef DLT_HAVE_MPI
/* MPI_COMM_WORLD, checked against px's rank and size; returns once every rank has left MPI_Init. */
int dlt_comm_mpi_create(dlt_comm **out, dltpmix_ctx *px, dlt_err *err);
#endif
#ifdef DLT_HAVE_CUDA_BACKEND
/* NCCL between the ranks of the PMIx namespace (bootstrapped by dltpmix_nccl_comm_init) on CUDA
 * device cuda_device (-1: the first visible); host buffers are staged through the device. */
int dlt_comm_nccl_create(dlt_comm **out, dltpmix_ctx *px, int cuda_device, dlt_err *err);
#endif

#endif
