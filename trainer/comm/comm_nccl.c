/* SPDX-License-Identifier: Apache-2.0 */
/* comm_nccl: the trainer's communicator over NCCL, bootstrapped through PMIx (no MPI, no
 * MASTER_ADDR). Host buffers (loss, flags, checksums: a few values per step) travel through a
 * small device buffer; the gradient reducer's NCCL path (grad_reducer_nccl.c) runs on the same
 * communicator. Every NCCL call goes through nccl_call.h; waits poll NCCL's asynchronous error so
 * a lost peer ends the run with a message, and teardown aborts (rather than destroys) a
 * communicator that saw one. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cuda_check.h"
#include "common/status.h"
#include "trainer/comm/comm.h"
#include "trainer/comm/nccl_call.h"

typedef struct {
    ncclComm_t nccl;
    cudaStream_t s;
    void *dbuf;   /* device copy of the host buffer */
    void *pinned; /* its pinned host twin: a copy from the device into pageable memory would block
                   * the host until done, before the wait that watches for a lost peer */
    size_t dcap;
} nccl_impl;

static nccl_impl *_impl(dlt_comm *c)
{
    return c->impl;
}

static int _wait(dlt_comm *c)
{
    nccl_impl *m = _impl(c);
    return dlt_cuda_stream_wait(m->s, &c->peers, c->err);
}

static int _room(dlt_comm *c, size_t bytes)
{
    nccl_impl *m = _impl(c);
    return dlt_cuda_grow(&m->dbuf, &m->pinned, &m->dcap, bytes, m->s, &c->peers, c->err);
}

static int _allreduce(dlt_comm *c, void *buf, size_t count, dlt_dtype type)
{
    nccl_impl *m = _impl(c);
    size_t bytes = count * dlt_dtype_size(type);
    ncclDataType_t t = type == DLT_DTYPE_F32 ? ncclFloat32 : type == DLT_DTYPE_F64 ? ncclFloat64 : ncclInt64;
    int rc;
    if ((rc = _room(c, bytes)) != 0)
        return rc;
    memcpy(m->pinned, buf, bytes);
    DLT_TRY(c->err, DLT_CUDA_CHECK(c->err, cudaMemcpyAsync(m->dbuf, m->pinned, bytes, cudaMemcpyHostToDevice, m->s)));
    DLT_TRY(c->err, DLT_NCCL_CHECK(c->err, m->nccl, ncclAllReduce(m->dbuf, m->dbuf, count, t, ncclSum, m->nccl, m->s)));
    DLT_TRY(c->err, DLT_CUDA_CHECK(c->err, cudaMemcpyAsync(m->pinned, m->dbuf, bytes, cudaMemcpyDeviceToHost, m->s)));
    if ((rc = _wait(c)) != 0)
        return rc;
    memcpy(buf, m->pinned, bytes);
    return 0;
}

static int _bcast(dlt_comm *c, void *buf, size_t bytes, int root)
{
    nccl_impl *m = _impl(c);
    int rc;
    if ((rc = _room(c, bytes)) != 0)
        return rc;
    memcpy(m->pinned, buf, bytes);
    DLT_TRY(c->err, DLT_CUDA_CHECK(c->err, cudaMemcpyAsync(m->dbuf, m->pinned, bytes, cudaMemcpyHostToDevice, m->s)));
    DLT_TRY(c->err,
            DLT_NCCL_CHECK(c->err, m->nccl, ncclBroadcast(m->dbuf, m->dbuf, bytes, ncclUint8, root, m->nccl, m->s)));
    DLT_TRY(c->err, DLT_CUDA_CHECK(c->err, cudaMemcpyAsync(m->pinned, m->dbuf, bytes, cudaMemcpyDeviceToHost, m->s)));
    if ((rc = _wait(c)) != 0)
        return rc;
    memcpy(buf, m->pinned, bytes);
    return 0;
}

/* Staged through the device like the others. In place: this rank's send buffer is its own slot of
 * the receive buffer, which ncclAllGather allows (nccl.h: "in-place if sendbuff == recvbuff +
 * rank * sendcount"). */
static int _allgather(dlt_comm *c, const void *mine, size_t bytes, void *all)
{
    nccl_impl *m = _impl(c);
    size_t total = bytes * (size_t)c->size, at = bytes * (size_t)c->rank;
    int rc;
    if ((rc = _room(c, total)) != 0)
        return rc;
    memcpy((char *)m->pinned + at, mine, bytes);
    DLT_TRY(c->err, DLT_CUDA_CHECK(c->err, cudaMemcpyAsync((char *)m->dbuf + at, (char *)m->pinned + at, bytes,
                                                           cudaMemcpyHostToDevice, m->s)));
    DLT_TRY(c->err, DLT_NCCL_CHECK(c->err, m->nccl,
                                   ncclAllGather((char *)m->dbuf + at, m->dbuf, bytes, ncclUint8, m->nccl, m->s)));
    DLT_TRY(c->err, DLT_CUDA_CHECK(c->err, cudaMemcpyAsync(m->pinned, m->dbuf, total, cudaMemcpyDeviceToHost, m->s)));
    if ((rc = _wait(c)) != 0)
        return rc;
    memcpy(all, m->pinned, total);
    return 0;
}

static int _barrier(dlt_comm *c)
{
    int64_t one = 1;
    return _allreduce(c, &one, 1, DLT_DTYPE_I64);
}

static void _destroy(dlt_comm *c)
{
    nccl_impl *m = _impl(c);
    if (m) {
        /* Queued work done first, watching the peers as every wait does: a kernel still waiting for
         * a lost peer would hold a plain cudaStreamSynchronize for ever. Then a communicator that
         * could not finish is aborted, not destroyed (dlt_nccl_release aborts one with an error). */
        dlt_err teardown = DLT_ERR_INIT;
        if (m->nccl && m->s && dlt_cuda_stream_wait(m->s, &c->peers, &teardown) != 0) {
            ncclCommAbort(m->nccl);
            m->nccl = NULL;
        }
        dlt_nccl_release(m->nccl);
        cudaFree(m->dbuf);
        cudaFreeHost(m->pinned);
        if (m->s)
            cudaStreamDestroy(m->s);
        free(m);
    }
    free(c);
}

/* dlt_comm_ops.discard: NCCL's abort, which neither waits for the stream nor for the peers (its
 * flag ends this rank's kernels first), then the rest as destroy frees it. */
static void _discard(dlt_comm *c)
{
    nccl_impl *m = _impl(c);
    if (m && m->nccl)
        ncclCommAbort(m->nccl);
    if (m)
        m->nccl = NULL;
    _destroy(c);
}

static void _abort(dlt_comm *c, int code)
{
    /* Peers blocked in a collective with us see the abort as an error and stop too. */
    nccl_impl *m = _impl(c);
    if (m && m->nccl)
        ncclCommAbort(m->nccl);
    fflush(NULL);
    _exit(code);
}

static void *_handle(dlt_comm *c)
{
    return _impl(c)->nccl;
}

static int _split(dlt_comm *c, int color, int key, dlt_comm **out);

static const dlt_comm_ops g_nccl_ops = {"nccl", _allreduce, _bcast,     _barrier, _destroy, _abort, _handle,
                                        _split, _discard,   _allgather, NULL,     NULL,     NULL};

/* ncclCommSplit (NCCL >= 2.18) on the parent's device; the child gets its own stream. */
static int _split(dlt_comm *c, int color, int key, dlt_comm **out)
{
    nccl_impl *m = _impl(c);
    ncclComm_t child = NULL;
    dlt_comm *s;
    nccl_impl *sm;
    int rank = 0, size = 0;
    *out = NULL;
    DLT_TRY(c->err, DLT_NCCL_CHECK(c->err, m->nccl,
                                   ncclCommSplit(m->nccl, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &child, NULL)));
    if (!child)
        return 0;
    s = calloc(1, sizeof(*s));
    sm = calloc(1, sizeof(*sm));
    if (!s || !sm) {
        free(s);
        free(sm);
        dlt_nccl_release(child);
        return dlt_fail(c->err, -ENOMEM, "out of memory");
    }
    s->ops = &g_nccl_ops;
    s->err = c->err;
    s->impl = sm;
    sm->nccl = child;
    s->peers = (dlt_peer_check){dlt_nccl_peer_check, child}; /* its waits ask its own NCCL state */
    if (ncclCommUserRank(child, &rank) != ncclSuccess || ncclCommCount(child, &size) != ncclSuccess ||
        cudaStreamCreateWithFlags(&sm->s, cudaStreamNonBlocking) != cudaSuccess) {
        _destroy(s);
        return dlt_fail(c->err, -EIO, "cannot set up a split NCCL communicator (color %d)", color);
    }
    s->rank = rank;
    s->size = size;
    *out = s;
    return 0;
}

int dlt_comm_nccl_create(dlt_comm **out, dltpmix_ctx *px, int cuda_device, dlt_err *err)
{
    dlt_comm *c = calloc(1, sizeof(*c));
    nccl_impl *m = calloc(1, sizeof(*m));
    const dltpmix_info *info = dltpmix_get_info(px);
    struct ncclComm *nc = NULL;
    int dev, rc;
    *out = NULL;
    if (!c || !m) {
        free(c);
        free(m);
        return dlt_fail(err, -ENOMEM, "out of memory");
    }
    c->ops = &g_nccl_ops;
    c->err = err;
    c->impl = m;
    c->rank = info->rank;
    c->size = info->size;
    /* A rank that cannot get as far as the bootstrap still takes part in its first exchange, saying
     * why: the others end at once naming it, instead of waiting out the timeout for it. */
    if ((rc = dlt_cuda_select_device(cuda_device, &dev, err)) != 0 ||
        (cudaStreamCreateWithFlags(&m->s, cudaStreamNonBlocking) != cudaSuccess &&
         (rc = dlt_fail(err, -EIO, "cannot create a CUDA stream on device %d", dev)) != 0)) {
        dltpmix_nccl_comm_refuse(px, err->msg);
        _destroy(c);
        return rc;
    }
    if (dltpmix_nccl_comm_init(px, dev, &nc) != 0) {
        _destroy(c);
        return dlt_fail(err, -EIO, "NCCL bootstrap over PMIx failed: %s", dltpmix_error(px));
    }
    m->nccl = (ncclComm_t)nc;
    c->peers = (dlt_peer_check){dlt_nccl_peer_check, m->nccl};
    *out = c;
    return 0;
}
