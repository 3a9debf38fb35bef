/* SPDX-License-Identifier: Apache-2.0 */
/* comm_mpi: host collectives over MPI (Debian's OpenMPI, direct-launched by srun --mpi=pmix).
 * Errors are returned, not fatal: MPI_ERRORS_RETURN on the communicator. */
#include "config.h"

#include <errno.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

#include "trainer/comm/comm.h"

static int _mpi_fail(dlt_comm *c, const char *what, int code)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(code, msg, &len) != MPI_SUCCESS)
        snprintf(msg, sizeof(msg), "MPI error %d", code);
    return dlt_fail(c->err, -EIO, "%s failed on rank %d: %s", what, c->rank, msg);
}

static MPI_Datatype _mpi_type(dlt_dtype t)
{
    return t == DLT_DTYPE_F32 ? MPI_FLOAT : t == DLT_DTYPE_F64 ? MPI_DOUBLE : MPI_INT64_T;
}

/* The MPI communicator: the world, or a split's (impl holds it). */
static MPI_Comm _mc(const dlt_comm *c)
{
    return c->impl ? *(MPI_Comm *)c->impl : MPI_COMM_WORLD;
}

/* Marks this rank as waiting on its peers while a collective blocks (see comm.h). */
static void _enter(dlt_comm *c)
{
    __atomic_add_fetch(&c->in_collective, 1, __ATOMIC_RELAXED);
}

static int _leave(dlt_comm *c, int rc)
{
    __atomic_sub_fetch(&c->in_collective, 1, __ATOMIC_RELAXED);
    return rc;
}

static int _allreduce(dlt_comm *c, void *buf, size_t count, dlt_dtype type)
{
    /* MPI counts are int: reduce in chunks so a 100 M-parameter buffer is fine. */
    const size_t chunk = (size_t)1 << 30;
    size_t esz = dlt_dtype_size(type);
    for (size_t off = 0; off < count; off += chunk) {
        size_t n = count - off < chunk ? count - off : chunk;
        int rc;
        _enter(c);
        rc = _leave(c, MPI_Allreduce(MPI_IN_PLACE, (char *)buf + off * esz, (int)n, _mpi_type(type), MPI_SUM, _mc(c)));
        if (rc != MPI_SUCCESS)
            return _mpi_fail(c, "MPI_Allreduce", rc);
    }
    return 0;
}

static int _bcast(dlt_comm *c, void *buf, size_t bytes, int root)
{
    const size_t chunk = (size_t)1 << 30;
    for (size_t off = 0; off < bytes; off += chunk) {
        size_t n = bytes - off < chunk ? bytes - off : chunk;
        int rc;
        _enter(c);
        rc = _leave(c, MPI_Bcast((char *)buf + off, (int)n, MPI_BYTE, root, _mc(c)));
        if (rc != MPI_SUCCESS)
            return _mpi_fail(c, "MPI_Bcast", rc);
    }
    return 0;
}

static int _barrier(dlt_comm *c)
{
    int rc;
    _enter(c);
    rc = _leave(c, MPI_Barrier(_mc(c)));
    return rc == MPI_SUCCESS ? 0 : _mpi_fail(c, "MPI_Barrier", rc);
}

static void _destroy(dlt_comm *c)
{
    int finalized = 0;
    if (c->impl) { /* a split: the world stays */
        MPI_Comm_free((MPI_Comm *)c->impl);
        free(c->impl);
        free(c);
        return;
    }
    MPI_Finalized(&finalized);
    if (!finalized)
        MPI_Finalize();
    free(c);
}

static void _abort(dlt_comm *c, int code)
{
    (void)c;
    MPI_Abort(MPI_COMM_WORLD, code);
}

static int _split(dlt_comm *c, int color, int key, dlt_comm **out);

/* Records are small (the agreements'): one call; MPI counts are int. */
static int _allgather(dlt_comm *c, const void *mine, size_t bytes, void *all)
{
    int rc;
    if (bytes > (size_t)1 << 30)
        return dlt_fail(c->err, -E2BIG, "all-gather of %zu bytes per rank: more than one MPI call carries", bytes);
    _enter(c);
    rc = _leave(c, MPI_Allgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, _mc(c)));
    if (rc != MPI_SUCCESS)
        return _mpi_fail(c, "MPI_Allgather", rc);
    return 0;
}

/* The non-blocking sum: the MPI_Request lives in a small allocation the caller holds as void *. */
static int _istart(dlt_comm *c, void *buf, size_t count, dlt_dtype type, void **req)
{
    MPI_Request *q;
    int rc;
    *req = NULL;
    if (count > (size_t)1 << 30)
        return dlt_fail(c->err, -E2BIG, "non-blocking all-reduce of %zu values: more than one MPI call carries", count);
    if (!(q = malloc(sizeof(*q))))
        return dlt_fail(c->err, -ENOMEM, "out of memory");
    rc = MPI_Iallreduce(MPI_IN_PLACE, buf, (int)count, _mpi_type(type), MPI_SUM, _mc(c), q);
    if (rc != MPI_SUCCESS) {
        free(q);
        return _mpi_fail(c, "MPI_Iallreduce", rc);
    }
    *req = q;
    return 0;
}

static int _itest(dlt_comm *c, void **req, int *done)
{
    MPI_Request *q = *req;
    int rc, flag = 0;
    *done = 0;
    if (!q) {
        *done = 1;
        return 0;
    }
    rc = MPI_Test(q, &flag, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS || flag) {
        free(q);
        *req = NULL;
        *done = 1;
    }
    return rc == MPI_SUCCESS ? 0 : _mpi_fail(c, "MPI_Iallreduce (test)", rc);
}

static int _iwait(dlt_comm *c, void **req)
{
    MPI_Request *q = *req;
    int rc;
    if (!q)
        return 0;
    _enter(c);
    rc = _leave(c, MPI_Wait(q, MPI_STATUS_IGNORE));
    free(q);
    *req = NULL;
    return rc == MPI_SUCCESS ? 0 : _mpi_fail(c, "MPI_Iallreduce (wait)", rc);
}

static const dlt_comm_ops g_mpi_ops = {"mpi",  _allreduce, _bcast,     _barrier, _destroy, _abort, NULL,
                                       _split, NULL,       _allgather, _istart,  _itest,   _iwait};

static int _split(dlt_comm *c, int color, int key, dlt_comm **out)
{
    MPI_Comm sub = MPI_COMM_NULL;
    dlt_comm *s;
    int rc;
    *out = NULL;
    _enter(c);
    rc = _leave(c, MPI_Comm_split(_mc(c), color < 0 ? MPI_UNDEFINED : color, key, &sub));
    if (rc != MPI_SUCCESS)
        return _mpi_fail(c, "MPI_Comm_split", rc);
    if (sub == MPI_COMM_NULL)
        return 0;
    s = calloc(1, sizeof(*s));
    if (!s || !(s->impl = malloc(sizeof(MPI_Comm)))) {
        free(s);
        MPI_Comm_free(&sub);
        return dlt_fail(c->err, -ENOMEM, "out of memory");
    }
    *(MPI_Comm *)s->impl = sub;
    s->ops = &g_mpi_ops;
    s->err = c->err;
    MPI_Comm_set_errhandler(sub, MPI_ERRORS_RETURN);
    MPI_Comm_rank(sub, &s->rank);
    MPI_Comm_size(sub, &s->size);
    *out = s;
    return 0;
}

int dlt_comm_mpi_create(dlt_comm **out, dltpmix_ctx *px, dlt_err *err)
{
    const dltpmix_info *pmix = dltpmix_get_info(px);
    dlt_comm *c;
    int provided = 0, rc;

    *out = NULL;
    c = calloc(1, sizeof(*c));
    if (!c) {
        return dlt_fail(err, -ENOMEM, "out of memory");
    }
    c->ops = &g_mpi_ops;
    c->err = err;
    rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
    if (rc != MPI_SUCCESS) {
        dlt_fail(err, -EIO, "MPI_Init failed (error %d); the CPU backend needs srun --mpi=pmix", rc);
        free(c);
        return -EIO;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &c->size);
    if (pmix->rank != c->rank || pmix->size != c->size) {
        dlt_fail(err, -EPROTO,
                 "MPI sees rank %d of %d but PMIx says %d of %d: MPI was not launched by this step's "
                 "PMIx server",
                 c->rank, c->size, pmix->rank, pmix->size);
        _destroy(c);
        return -EPROTO;
    }
    /* No rank sends before every rank has returned from MPI_Init: a PMIx barrier (not MPI).
     * OpenMPI 4.1's TCP transport (Debian 12's 4.1.4) calls a NULL handler when a peer's first
     * connection reaches a rank still inside MPI_Init, waiting in opal_progress for its last fence
     * (SIGSEGV in mca_btl_tcp.so under ompi_mpi_init, seen at 4 ranks on a loaded 2-core machine
     * once in a few hundred launches). On failure MPI is not finalized: MPI_Finalize would wait
     * for the peers this barrier found missing. */
    if (c->size > 1 && dltpmix_barrier(px) != 0) {
        dlt_fail(err, -EIO, "the barrier after MPI_Init failed: %s", dltpmix_error(px));
        free(c);
        return -EIO;
    }
    *out = c;
    return 0;
}
