/* comm: the trainer's collective interface over host buffers (MPI or a single rank) and, in the
 * CUDA backend, device buffers (NCCL). The training loop sees only this table. */
#ifndef DLT_COMM_H
#define DLT_COMM_H

#include <stddef.h>

#include "pmix/dltpmix.h"

struct ncclComm;

typedef enum { DLT_DTYPE_F32 = 0, DLT_DTYPE_F64 = 1, DLT_DTYPE_I64 = 2 } dlt_dtype;

typedef struct dlt_comm dlt_comm;

typedef struct {
    const char *name;
    /* In-place sum over all ranks. */
    int (*allreduce_sum)(dlt_comm *c, void *buf, size_t count, dlt_dtype type);
    int (*bcast)(dlt_comm *c, void *buf, size_t bytes, int root);
    int (*barrier)(dlt_comm *c);
    void (*destroy)(dlt_comm *c);
    /* Ends every rank now (a peer is lost or a collective is wedged); may be called from any thread. */
    void (*abort)(dlt_comm *c, int code);
    /* The ncclComm_t of an NCCL communicator (the CUDA backend reduces gradients on it); NULL
     * entry for host communicators. */
    struct ncclComm *(*nccl)(dlt_comm *c);
} dlt_comm_ops;

struct dlt_comm {
    const dlt_comm_ops *ops;
    int rank;
    int size;
    char err[512];
    void *impl;
};

/* kind: "auto" (MPI when there is more than one rank, else single), "single", "mpi".
 * pmix gives rank and size; the communicator is checked against them. */
int dlt_comm_create(dlt_comm **out, const char *kind, const dltpmix_info *pmix, char *err, size_t errlen);
void dlt_comm_destroy(dlt_comm *c);

int dlt_comm_single_create(dlt_comm **out, char *err, size_t errlen);
#ifdef DLT_HAVE_MPI
int dlt_comm_mpi_create(dlt_comm **out, const dltpmix_info *pmix, char *err, size_t errlen);
#endif

#ifdef DLT_HAVE_CUDA_BACKEND
/* NCCL between the ranks of the PMIx namespace (bootstrapped by dltpmix_nccl_comm_init) on CUDA
 * device cuda_device (-1: the first visible); host buffers are staged through the device. */
int dlt_comm_nccl_create(dlt_comm **out, dltpmix_ctx *px, int cuda_device, char *err, size_t errlen);
#endif

size_t dlt_dtype_size(dlt_dtype type);

#endif
