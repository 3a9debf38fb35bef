/* SPDX-License-Identifier: Apache-2.0 */
/* dltpmix: bootstrap of a parallel program through PMIx: who am I, broadcast, all-gather,
 * barrier, and an NCCL communicator, with timeouts instead of hangs. No MPI needed. */
#ifndef DLTPMIX_H
#define DLTPMIX_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DLTPMIX_VERSION_MAJOR 0
#define DLTPMIX_VERSION_MINOR 1

/* Status codes: 0 on success, one of these (negative) otherwise. The message is in
 * dltpmix_error(ctx) (or the err buffer of dltpmix_init). */
enum {
    DLTPMIX_OK = 0,
    DLTPMIX_ERR_ARG = -1,      /* bad argument from the caller */
    DLTPMIX_ERR_NOPMIX = -2,   /* not launched under a PMIx server (use srun --mpi=pmix) */
    DLTPMIX_ERR_PMIX = -3,     /* a PMIx call failed; message has PMIx_Error_string */
    DLTPMIX_ERR_TIMEOUT = -4,  /* a collective did not complete; message names missing ranks */
    DLTPMIX_ERR_MISMATCH = -5, /* ranks disagree (sizes, Slurm cross-check, corrupt blob) */
    DLTPMIX_ERR_NOMEM = -6,
    DLTPMIX_ERR_NCCL = -7,    /* NCCL or CUDA failed; message has its error string */
    DLTPMIX_ERR_NOTBUILT = -8 /* feature not compiled in (NCCL) */
};

typedef struct dltpmix_ctx dltpmix_ctx;

typedef struct {
    int rank;           /* global rank in the job step */
    int size;           /* number of ranks */
    int local_rank;     /* rank among the processes of this node */
    int local_size;     /* processes on this node */
    int node_rank;      /* index of this node among the step's nodes */
    int node_count;     /* nodes in the step */
    int singleton;      /* 1 when no PMIx server was found and the process is alone */
    char nspace[256];   /* PMIx namespace (slurm.pmix.<job>.<step>) */
    char hostname[256]; /* node name as the resource manager knows it */
} dltpmix_info;

typedef struct {
    double timeout_s;    /* bound on every collective; <= 0: DLTPMIX_TIMEOUT env or 300 */
    int allow_singleton; /* 1: without a PMIx server, run as rank 0 of 1 if Slurm says 1 task */
} dltpmix_options;

/* Connects to the PMIx server and fills the rank information. opts may be NULL (defaults).
 * On failure *ctx is NULL and err holds why and what to do. */
int dltpmix_init(dltpmix_ctx **ctx, const dltpmix_options *opts, char *err, size_t errlen);
const dltpmix_info *dltpmix_get_info(const dltpmix_ctx *ctx);
const char *dltpmix_error(const dltpmix_ctx *ctx);

/* len bytes at buf on rank root go to buf on every rank. Every rank passes the same len. */
int dltpmix_bcast(dltpmix_ctx *ctx, int root, void *buf, size_t len);
/* Every rank contributes len bytes; recv (size * len bytes) gets them in rank order. */
int dltpmix_allgather(dltpmix_ctx *ctx, const void *send, size_t len, void *recv);
int dltpmix_barrier(dltpmix_ctx *ctx);
/* Disconnects and frees ctx. Safe with NULL. */
int dltpmix_finalize(dltpmix_ctx *ctx);

/* Rank 0 makes the NCCL unique id, it goes to all ranks through PMIx, every rank creates its
 * communicator on CUDA device cuda_device. The communicator is blocking (NCCL's default: no call
 * returns ncclInProgress). The init is bounded by the context timeout: on expiry the error says
 * so and the process should end (the init thread is left to NCCL). comm receives an ncclComm_t.
 * Returns DLTPMIX_ERR_NOTBUILT without NCCL. */
struct ncclComm;
int dltpmix_nccl_comm_init(dltpmix_ctx *ctx, int cuda_device, struct ncclComm **comm);

/* For a rank that cannot call dltpmix_nccl_comm_init (its device or stream could not be set up):
 * takes part in the bootstrap's first exchange saying why, so that every other rank's
 * dltpmix_nccl_comm_init ends at once naming this rank and why, instead of waiting out the timeout.
 * Returns DLTPMIX_ERR_NCCL, its error naming every rank that could not join (or the exchange's own
 * failure). */
int dltpmix_nccl_comm_refuse(dltpmix_ctx *ctx, const char *why);

/* 1 when the library was built with NCCL. */
int dltpmix_have_nccl(void);

#ifdef __cplusplus
}
#endif
#endif
