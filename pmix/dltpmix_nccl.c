/* SPDX-License-Identifier: Apache-2.0 */
/* dltpmix_nccl: an NCCL communicator bootstrapped through PMIx, with a bounded wait.
 * ncclGetUniqueId runs in rank 0 of the application (its listener lives in this process).
 *
 * The communicator is blocking, NCCL's default and PyTorch's (ProcessGroupNCCL creates blocking
 * communicators unless TORCH_NCCL_USE_COMM_NONBLOCKING is set). A non-blocking one makes every
 * collective of a multi-rank communicator return ncclInProgress (NCCL's group.cc / enqueue.cc),
 * which each caller would have to wait out with ncclCommGetAsyncError before touching the
 * communicator or queueing work that depends on the result: correct only if every program
 * using this library does so. ncclCommGetAsyncError and ncclCommAbort work on blocking
 * communicators too, so a lost peer is still seen and aborted after init. The init itself is
 * bounded by running the blocking ncclCommInitRankConfig on a helper thread and waiting for it
 * with the context timeout.
 *
 * NCCL and the CUDA runtime are opened with dlopen on the first dltpmix_nccl_comm_init, not linked:
 * a program linked with libdltpmix (dltrain on a CPU node, say) starts where they are absent, and
 * their absence is an error of this call that names the library. The headers still give the
 * types, so a table of the eight calls used here is all that is declared by hand. */
#include "config.h"

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <errno.h>
#include <nccl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "dltpmix.h"
#include "dltpmix_internal.h"

/* The calls of NCCL and the CUDA runtime used here, loaded once per process. */
static struct {
    pthread_once_t once;
    char why[384]; /* empty: loaded */
    cudaError_t (*cudaSetDevice)(int);
    const char *(*cudaGetErrorString)(cudaError_t);
    ncclResult_t (*ncclGetUniqueId)(ncclUniqueId *);
    ncclResult_t (*ncclCommInitRankConfig)(ncclComm_t *, int, ncclUniqueId, int, ncclConfig_t *);
    ncclResult_t (*ncclCommGetAsyncError)(ncclComm_t, ncclResult_t *);
    ncclResult_t (*ncclCommAbort)(ncclComm_t);
    const char *(*ncclGetErrorString)(ncclResult_t);
    const char *(*ncclGetLastError)(ncclComm_t);
} g_lib = {.once = PTHREAD_ONCE_INIT};

#define NCCL_SONAME "libnccl.so.2"
#define CUDART_SONAME "libcudart.so." DLT_CUDA_MAJOR

static void *_open_lib(const char *soname, const char *package)
{
    void *h = dlopen(soname, RTLD_NOW | RTLD_LOCAL); /* kept open for the life of the process */
    if (!h) {
        const char *why = dlerror();
        snprintf(g_lib.why, sizeof(g_lib.why), "dltpmix: cannot load %s (%s): install %s", soname,
                 why ? why : "not found", package);
    }
    return h;
}

static int _sym(void *h, const char *soname, const char *name, void **fn)
{
    *fn = dlsym(h, name);
    if (!*fn)
        snprintf(g_lib.why, sizeof(g_lib.why), "dltpmix: %s has no %s: NCCL 2.14 or newer is needed", soname, name);
    return *fn ? 0 : -1;
}

static void _load(void)
{
    void *rt = _open_lib(CUDART_SONAME, "the CUDA runtime (Debian/Ubuntu: cuda-cudart-" DLT_CUDA_MAJOR "-0)");
    void *nc = rt ? _open_lib(NCCL_SONAME, "NCCL (Debian/Ubuntu: libnccl2; RPM: libnccl)") : NULL;
    if (!nc)
        return;
    if (_sym(rt, CUDART_SONAME, "cudaSetDevice", (void **)&g_lib.cudaSetDevice) ||
        _sym(rt, CUDART_SONAME, "cudaGetErrorString", (void **)&g_lib.cudaGetErrorString) ||
        _sym(nc, NCCL_SONAME, "ncclGetUniqueId", (void **)&g_lib.ncclGetUniqueId) ||
        _sym(nc, NCCL_SONAME, "ncclCommInitRankConfig", (void **)&g_lib.ncclCommInitRankConfig) ||
        _sym(nc, NCCL_SONAME, "ncclCommGetAsyncError", (void **)&g_lib.ncclCommGetAsyncError) ||
        _sym(nc, NCCL_SONAME, "ncclCommAbort", (void **)&g_lib.ncclCommAbort) ||
        _sym(nc, NCCL_SONAME, "ncclGetErrorString", (void **)&g_lib.ncclGetErrorString) ||
        _sym(nc, NCCL_SONAME, "ncclGetLastError", (void **)&g_lib.ncclGetLastError))
        return;
}

int dltpmix_have_nccl(void)
{
    return 1;
}

/* The blocking init on its own thread, so the caller can stop waiting. Shared between the two
 * threads under mu; whoever is last out frees it (the helper may outlive a timed-out caller). */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done, abandoned;
    int device, size, rank;
    ncclUniqueId id;
    ncclComm_t comm;
    ncclResult_t result;
    cudaError_t cuda;
} _init_job;

static void _job_release(_init_job *j)
{
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    free(j);
}

static void *_init_thread(void *arg)
{
    _init_job *j = arg;
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    ncclComm_t comm = NULL;
    ncclResult_t r = ncclSystemError;
    cudaError_t ce = g_lib.cudaSetDevice(j->device); /* the device is per thread: NCCL binds the current one */
    int abandoned;
    config.blocking = 1;
    if (ce == cudaSuccess)
        r = g_lib.ncclCommInitRankConfig(&comm, j->size, j->id, j->rank, &config);
    /* NCCL_COMM_BLOCKING=0 in the environment overrides the config (NCCL's parseCommConfig): the
     * init then returns ncclInProgress and must be waited out (until the caller gives up). */
    while (r == ncclInProgress && comm) {
        ncclResult_t state = ncclInProgress;
        if (g_lib.ncclCommGetAsyncError(comm, &state) != ncclSuccess)
            state = ncclInternalError;
        r = state;
        if (r == ncclInProgress) {
            int gone;
            pthread_mutex_lock(&j->mu);
            gone = j->abandoned;
            pthread_mutex_unlock(&j->mu);
            if (gone)
                break;
            usleep(1000);
        }
    }
    pthread_mutex_lock(&j->mu);
    j->comm = comm;
    j->result = r;
    j->cuda = ce;
    j->done = 1;
    abandoned = j->abandoned;
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
    if (abandoned) { /* the caller gave up and reported the timeout: nobody will use this */
        if (comm)
            g_lib.ncclCommAbort(comm);
        _job_release(j);
    }
    return NULL;
}

/* What each rank brings to the bootstrap: whether it can join (its libraries loaded, its device
 * set, on rank 0 the unique id made) and, when not, why; rank 0's record carries the id. */
typedef struct {
    int32_t status; /* 0: ready */
    char why[220];
    ncclUniqueId id;
} join_record;

/* Every rank's readiness, gathered before anyone waits on anyone: a rank that cannot join (no
 * libcudart or NCCL on its node, a GPU it cannot set, rank 0 without an id) still takes part in
 * this one collective, so every rank ends at once naming it, instead of the others waiting out the
 * timeout in a broadcast it never joins and blaming it for not arriving. 0 and *id (rank 0's), or
 * an error naming the ranks that cannot join (this rank's own cause first when it is one). */
static int _join(dltpmix_ctx *ctx, int cuda_device, const char *refused, ncclUniqueId *id)
{
    join_record mine, *all = calloc((size_t)ctx->info.size, sizeof(*all));
    char others[640] = "";
    int rc, bad = 0;
    cudaError_t ce;
    ncclResult_t nr;
    memset(&mine, 0, sizeof(mine));
    pthread_once(&g_lib.once, _load);
    if (refused) {
        mine.status = DLTPMIX_ERR_NCCL;
        snprintf(mine.why, sizeof(mine.why), "%s", refused);
    } else if (g_lib.why[0]) {
        mine.status = DLTPMIX_ERR_NCCL;
        snprintf(mine.why, sizeof(mine.why), "%.219s", g_lib.why);
    } else if ((ce = g_lib.cudaSetDevice(cuda_device)) != cudaSuccess) {
        mine.status = DLTPMIX_ERR_NCCL;
        snprintf(mine.why, sizeof(mine.why), "dltpmix: cudaSetDevice(%d) failed: %s", cuda_device,
                 g_lib.cudaGetErrorString(ce));
    } else if (ctx->info.rank == 0 && (nr = g_lib.ncclGetUniqueId(&mine.id)) != ncclSuccess) {
        mine.status = DLTPMIX_ERR_NCCL;
        snprintf(mine.why, sizeof(mine.why), "dltpmix: ncclGetUniqueId failed: %s (%s)", g_lib.ncclGetErrorString(nr),
                 g_lib.ncclGetLastError(NULL));
    }
    if (!all)
        return dltpmix_set_error(ctx, DLTPMIX_ERR_NOMEM, "dltpmix: out of memory");
    if ((rc = dltpmix_allgather(ctx, &mine, sizeof(mine), all)) != 0) {
        free(all);
        return rc;
    }
    for (int r = 0; r < ctx->info.size; r++) {
        size_t n = strlen(others);
        if (!all[r].status)
            continue;
        if (++bad <= 3 && r != ctx->info.rank && n + 1 < sizeof(others))
            snprintf(others + n, sizeof(others) - n, "%srank %d: %.*s", n ? "; " : "", r, (int)sizeof(all[r].why),
                     all[r].why);
    }
    *id = all[0].id;
    free(all);
    if (!bad)
        return 0;
    return dltpmix_set_error(ctx, DLTPMIX_ERR_NCCL, "%s%s%d of %d rank(s) cannot join NCCL, every rank stops%s%s%s",
                             mine.status ? mine.why : "", mine.status ? "; " : "", bad, ctx->info.size,
                             others[0] ? " (" : "", others, others[0] ? (bad > 3 ? "; ...)" : ")") : "");
}

int dltpmix_nccl_comm_init(dltpmix_ctx *ctx, int cuda_device, struct ncclComm **out)
{
    ncclUniqueId id;
    _init_job *j;
    pthread_t th;
    pthread_attr_t attr;
    struct timespec deadline;
    double end;
    int rc, done, err = 0;

    if (ctx)
        dlt_err_clear(&ctx->err);
    if (!ctx || !out)
        return ctx ? dltpmix_set_error(ctx, DLTPMIX_ERR_ARG, "dltpmix_nccl_comm_init: NULL argument") : DLTPMIX_ERR_ARG;
    *out = NULL;
    if ((rc = _join(ctx, cuda_device, NULL, &id)) != 0)
        return rc;
    j = calloc(1, sizeof(*j));
    if (!j)
        return dltpmix_set_error(ctx, DLTPMIX_ERR_NOMEM, "dltpmix: out of memory");
    pthread_mutex_init(&j->mu, NULL);
    dltpmix_cond_init(&j->cv);
    j->device = cuda_device;
    j->size = ctx->info.size;
    j->rank = ctx->info.rank;
    j->id = id;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&th, &attr, _init_thread, j) != 0) {
        pthread_attr_destroy(&attr);
        _job_release(j);
        return dltpmix_set_error(ctx, DLTPMIX_ERR_NCCL, "dltpmix: cannot start the NCCL init thread");
    }
    pthread_attr_destroy(&attr);
    end = dlt_now() + ctx->timeout_s;
    deadline = dltpmix_deadline(ctx->timeout_s);
    pthread_mutex_lock(&j->mu);
    while (!j->done && err != ETIMEDOUT && dlt_now() < end)
        err = pthread_cond_timedwait(&j->cv, &j->mu, &deadline);
    done = j->done;
    if (!done)
        j->abandoned = 1; /* the thread frees the job when NCCL returns, if ever */
    pthread_mutex_unlock(&j->mu);
    if (!done)
        return dltpmix_set_error(ctx, DLTPMIX_ERR_TIMEOUT,
                                 "dltpmix: ncclCommInitRank on rank %d (device %d) did not finish in %.0f s: a rank "
                                 "never joined or the network path is wrong (check NCCL_SOCKET_IFNAME; "
                                 "NCCL_DEBUG=INFO shows why); end the process",
                                 ctx->info.rank, cuda_device, ctx->timeout_s);
    if (j->cuda != cudaSuccess || j->result != ncclSuccess) {
        const char *last = j->comm ? g_lib.ncclGetLastError(j->comm) : g_lib.ncclGetLastError(NULL);
        rc = j->cuda != cudaSuccess
                 ? dltpmix_set_error(ctx, DLTPMIX_ERR_NCCL, "dltpmix: cudaSetDevice(%d) on the NCCL init thread: %s",
                                     cuda_device, g_lib.cudaGetErrorString(j->cuda))
                 : dltpmix_set_error(ctx, DLTPMIX_ERR_NCCL, "dltpmix: ncclCommInitRank on rank %d failed: %s (%s)",
                                     ctx->info.rank, g_lib.ncclGetErrorString(j->result), last ? last : "");
        if (j->comm)
            g_lib.ncclCommAbort(j->comm);
        _job_release(j);
        return rc;
    }
    *out = (struct ncclComm *)j->comm;
    _job_release(j);
    return 0;
}

int dltpmix_nccl_comm_refuse(dltpmix_ctx *ctx, const char *why)
{
    ncclUniqueId id;
    if (!ctx)
        return DLTPMIX_ERR_ARG;
    dlt_err_clear(&ctx->err);
    return _join(ctx, -1, why && *why ? why : "(no reason given)", &id);
}
