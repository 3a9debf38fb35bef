/* SPDX-License-Identifier: Apache-2.0 */
/* dltpmix: bootstrap of a parallel program through PMIx: rank info, broadcast, all-gather,
 * barrier. Every collective is a Put/Commit/Fence/Get round bounded by a timeout. */
#include "config.h"

#include "dltpmix.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/env_contract.h"
#include "common/node_name.h"
#include "dltpmix_blob.h"
#include "dltpmix_internal.h"
#include "dltpmix_list.h"

extern char **environ;

#define DLTPMIX_DEFAULT_TIMEOUT_S 300.0
/* How long to wait for peers' arrival keys when naming the ranks missing from a timed-out fence. */
#define DLTPMIX_PROBE_S 3.0
/* At most this many missing ranks are named in a message. */
#define DLTPMIX_NAME_MAX_RANKS 16

int dltpmix_set_error(dltpmix_ctx *ctx, int code, const char *fmt, ...)
{
    char words[sizeof(ctx->err.msg)];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(words, sizeof(words), fmt, ap);
    va_end(ap);
    return dlt_fail(&ctx->err, code, "%s", words); /* the call's first failure is kept */
}

/* The one report of a failed PMIx call: "dltpmix: WHAT failed: PMIx's own error string". */
static int _pmix_fail(dltpmix_ctx *ctx, pmix_status_t rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int _pmix_fail(dltpmix_ctx *ctx, pmix_status_t rc, const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    return dltpmix_set_error(ctx, DLTPMIX_ERR_PMIX, "dltpmix: %s failed: %s", what, PMIx_Error_string(rc));
}

const char *dltpmix_error(const dltpmix_ctx *ctx)
{
    return ctx ? ctx->err.msg : "no dltpmix context";
}

const dltpmix_info *dltpmix_get_info(const dltpmix_ctx *ctx)
{
    return ctx ? &ctx->info : NULL;
}

/* ------------------------------------------------------------------ timed waits on PMIx callbacks */

/* One asynchronous PMIx operation. Heap-allocated: after a timeout the waiter leaves, and the
 * callback, if it ever fires, frees it. */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
    int abandoned;
    pmix_status_t status;
    pmix_proc_t proc;
    pmix_info_t info[2];
    size_t ninfo;
} _async_op;

static _async_op *_op_new(void)
{
    _async_op *op = calloc(1, sizeof(*op));
    if (!op)
        return NULL;
    pthread_mutex_init(&op->mu, NULL);
    dltpmix_cond_init(&op->cv);
    return op;
}

static void _op_free(_async_op *op)
{
    for (size_t i = 0; i < op->ninfo; i++)
        PMIX_INFO_DESTRUCT(&op->info[i]);
    pthread_mutex_destroy(&op->mu);
    pthread_cond_destroy(&op->cv);
    free(op);
}

static void _op_complete(_async_op *op, pmix_status_t status)
{
    int free_it;
    pthread_mutex_lock(&op->mu);
    op->status = status;
    op->done = 1;
    free_it = op->abandoned;
    pthread_cond_signal(&op->cv);
    pthread_mutex_unlock(&op->mu);
    if (free_it)
        _op_free(op);
}

static void _op_cb(pmix_status_t status, void *cbdata)
{
    _op_complete(cbdata, status);
}

static void _value_cb(pmix_status_t status, pmix_value_t *kv, void *cbdata)
{
    /* The value is the callback's to release (openpmix 4.2 pmix_client_get.c hands over its copy). */
    if (kv)
        PMIX_VALUE_RELEASE(kv);
    _op_complete(cbdata, status);
}

void dltpmix_cond_init(pthread_cond_t *cv)
{
    dlt_cond_init_monotonic(cv);
}

struct timespec dltpmix_deadline(double seconds)
{
    return dlt_deadline_after(seconds);
}

/* Waits until op completes or the deadline passes. Returns 1 if completed (op still owned by the
 * caller), 0 on timeout (op now owned by its callback). */
static int _op_wait(_async_op *op, const struct timespec *deadline)
{
    int completed;
    pthread_mutex_lock(&op->mu);
    while (!op->done) {
        if (pthread_cond_timedwait(&op->cv, &op->mu, deadline) == ETIMEDOUT)
            break;
    }
    completed = op->done;
    if (!completed)
        op->abandoned = 1;
    pthread_mutex_unlock(&op->mu);
    return completed;
}

/* ------------------------------------------------------------------ helpers */

static int _value_to_int(const pmix_value_t *v, long *out)
{
    switch (v->type) {
    case PMIX_UINT32: *out = v->data.uint32; return 0;
    case PMIX_UINT16: *out = v->data.uint16; return 0;
    case PMIX_UINT8: *out = v->data.uint8; return 0;
    case PMIX_INT: *out = v->data.integer; return 0;
    case PMIX_INT32: *out = v->data.int32; return 0;
    case PMIX_UINT64: *out = (long)v->data.uint64; return 0;
    case PMIX_UINT: *out = (long)v->data.uint; return 0;
    case PMIX_PROC_RANK: *out = (long)v->data.rank; return 0;
    default: return -1;
    }
}

/* PMIx_Get of an integer key for (nspace, rank). Returns 0 or the PMIx status. */
static pmix_status_t _get_int(dltpmix_ctx *ctx, pmix_rank_t rank, const char *key, long *out)
{
    pmix_proc_t p;
    pmix_value_t *val = NULL;
    pmix_status_t rc;
    PMIX_LOAD_PROCID(&p, ctx->me.nspace, rank);
    rc = PMIx_Get(&p, key, NULL, 0, &val);
    if (rc != PMIX_SUCCESS)
        return rc;
    rc = _value_to_int(val, out) == 0 ? PMIX_SUCCESS : PMIX_ERR_TYPE_MISMATCH;
    PMIX_VALUE_RELEASE(val);
    return rc;
}

static pmix_status_t _get_string(dltpmix_ctx *ctx, pmix_rank_t rank, const char *key, char *out, size_t outlen)
{
    pmix_proc_t p;
    pmix_value_t *val = NULL;
    pmix_status_t rc;
    PMIX_LOAD_PROCID(&p, ctx->me.nspace, rank);
    rc = PMIx_Get(&p, key, NULL, 0, &val);
    if (rc != PMIX_SUCCESS)
        return rc;
    if (val->type == PMIX_STRING && val->data.string)
        snprintf(out, outlen, "%s", val->data.string);
    else
        rc = PMIX_ERR_TYPE_MISMATCH;
    PMIX_VALUE_RELEASE(val);
    return rc;
}

static int _env_has_pmix_server(void)
{
    if (getenv("PMIX_NAMESPACE"))
        return 1;
    for (char **e = environ; e && *e; e++)
        if (strncmp(*e, "PMIX_SERVER_URI", 15) == 0)
            return 1;
    return 0;
}

static long _env_long(const char *name, long dflt)
{
    const char *s = getenv(name);
    char *end;
    long v;
    if (!s || !*s)
        return dflt;
    errno = 0;
    v = strtol(s, &end, 10);
    return (errno || *end) ? dflt : v;
}

/* Slurm's variables describe the same step: any disagreement means the PMIx seen here is not
 * the one Slurm launched (container/host PMIx mismatch, nested launch). */
static int _cross_check_slurm(dltpmix_ctx *ctx)
{
    const struct {
        const char *var;
        int value;
    } checks[] = {
        {"SLURM_PROCID", ctx->info.rank},
        {"SLURM_STEP_NUM_TASKS", ctx->info.size},
        {"SLURM_LOCALID", ctx->info.local_rank},
        {"SLURM_NODEID", ctx->info.node_rank},
        {"SLURM_STEP_NUM_NODES", ctx->info.node_count},
    };
    if (strncmp(ctx->info.nspace, "slurm.pmix.", 11) != 0)
        return 0;
    for (size_t i = 0; i < sizeof(checks) / sizeof(checks[0]); i++) {
        long v = _env_long(checks[i].var, -1);
        if (v >= 0 && v != checks[i].value)
            return dltpmix_set_error(ctx, DLTPMIX_ERR_MISMATCH,
                                     "dltpmix: PMIx and Slurm disagree: %s=%ld but PMIx gives %d (namespace %s); "
                                     "is the program's PMIx library the one Slurm's mpi/pmix plugin serves?",
                                     checks[i].var, v, checks[i].value, ctx->info.nspace);
    }
    return 0;
}

/* The rank info of ranks that all run on this one host (no resource manager). */
static int _one_host(dltpmix_ctx *ctx, int rank, int size, const char *nspace)
{
    ctx->info.rank = ctx->info.local_rank = rank;
    ctx->info.size = ctx->info.local_size = size;
    ctx->info.node_rank = 0;
    ctx->info.node_count = 1;
    snprintf(ctx->info.nspace, sizeof(ctx->info.nspace), "%s", nspace);
    dlt_node_name(ctx->info.hostname, sizeof(ctx->info.hostname));
    return 0;
}

static int _init_singleton(dltpmix_ctx *ctx)
{
    ctx->info.singleton = 1;
    return _one_host(ctx, 0, 1, "singleton");
}

/* Tells the plugin this task has joined (common/env_contract.h, DLT_JOIN_MARK): an empty file of
 * the task's own, made once, at the one place the plugin names (nothing else is ever made). Without
 * it (no plugin, no /dev/shm) the plugin cannot tell a rank that joined and then failed, which ends
 * its peers itself, from one that never came: said once, the run goes on. */
static void _mark_joined(void)
{
    const char *m = getenv(DLT_ENV_JOIN_MARK);
    size_t n = strlen(DLT_JOIN_MARK_PREFIX);
    int fd;
    if (!m || strncmp(m, DLT_JOIN_MARK_PREFIX, n) || strchr(m + n, '/') || strlen(m) > 128 || !m[n])
        return;
    fd = open(m, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0)
        close(fd);
    else if (errno != EEXIST)
        fprintf(stderr, "dltpmix: cannot make %s (%s): if this rank fails, the plugin may end its peers at once\n", m,
                strerror(errno));
}

static int _init_from_pmix(dltpmix_ctx *ctx)
{
    pmix_status_t rc;
    long v;
    char nodelist[4096];

    rc = PMIx_Init(&ctx->me, NULL, 0);
    if (rc != PMIX_SUCCESS)
        return dltpmix_set_error(ctx, DLTPMIX_ERR_PMIX,
                                 "dltpmix: PMIx_Init failed: %s; launch with srun --mpi=pmix (or MpiDefault=pmix)",
                                 PMIx_Error_string(rc));
    ctx->pmix_up = 1;
    _mark_joined(); /* a connected client that dies is taken out of the fence by its PMIx server */
    ctx->info.rank = (int)ctx->me.rank;
    snprintf(ctx->info.nspace, sizeof(ctx->info.nspace), "%s", ctx->me.nspace);

#define GET_INT(rank_, key_, field_)                                                                                   \
    do {                                                                                                               \
        rc = _get_int(ctx, (rank_), (key_), &v);                                                                       \
        if (rc != PMIX_SUCCESS)                                                                                        \
            return _pmix_fail(ctx, rc, "PMIx_Get(%s)", (key_));                                                        \
        ctx->info.field_ = (int)v;                                                                                     \
    } while (0)
    /* Per-process keys must be asked with the process's own rank; job keys with the wildcard. */
    GET_INT(PMIX_RANK_WILDCARD, PMIX_JOB_SIZE, size);
    GET_INT(ctx->me.rank, PMIX_LOCAL_RANK, local_rank);
    GET_INT(PMIX_RANK_WILDCARD, PMIX_LOCAL_SIZE, local_size);
    GET_INT(PMIX_RANK_WILDCARD, PMIX_NUM_NODES, node_count);
#undef GET_INT

    rc = _get_string(ctx, ctx->me.rank, PMIX_HOSTNAME, ctx->info.hostname, sizeof(ctx->info.hostname));
    if (rc != PMIX_SUCCESS)
        return _pmix_fail(ctx, rc, "PMIx_Get(PMIX_HOSTNAME)");
    /* The node index: PMIX_NODEID where the server gives it, else our place in the node list. */
    if (_get_int(ctx, ctx->me.rank, PMIX_NODEID, &v) == PMIX_SUCCESS) {
        ctx->info.node_rank = (int)v;
    } else if (_get_string(ctx, PMIX_RANK_WILDCARD, PMIX_NODE_LIST, nodelist, sizeof(nodelist)) == PMIX_SUCCESS &&
               (v = dltpmix_list_index(nodelist, ctx->info.hostname)) >= 0) {
        ctx->info.node_rank = (int)v;
    } else {
        return dltpmix_set_error(ctx, DLTPMIX_ERR_PMIX,
                                 "dltpmix: the PMIx server gives neither PMIX_NODEID nor a node list containing %s",
                                 ctx->info.hostname);
    }
    return _cross_check_slurm(ctx);
}

#ifdef DLT_TEST_HOOKS
/* ------------------------------------------------------------------ test rendezvous
 * For a machine without a resource manager or PMIx server (the lent GPU machine of the device
 * check: no Slurm, no PMIx server to pack), DLTPMIX_TEST_RENDEZVOUS=DIR with DLTPMIX_TEST_RANK and
 * DLTPMIX_TEST_SIZE makes the ranks of one host exchange their collectives as files in DIR, a
 * fresh directory per run (tests/device/two_ranks.sh makes it). Frames are the PMIx path's
 * (sequence, rank and CRC checked); a file appears whole (written aside, then renamed); every wait
 * is bounded by the context's timeout. A test door, not a production one: frames are checked, not
 * authenticated, so whoever can write DIR can inject a value (an NCCL unique id) or block the run.
 * Hence it is refused inside a Slurm job and unless DIR is a real directory (no symbolic link)
 * owned by the caller and writable by nobody else; it is opened once and every frame is opened
 * relative to it without following links, written under an unpredictable temporary name created
 * exclusively (a planted link at a guessable name made a root run overwrite the link's target). */

static int _rdv_init(dltpmix_ctx *ctx, const char *dir)
{
    long rank = _env_long("DLTPMIX_TEST_RANK", -1), size = _env_long("DLTPMIX_TEST_SIZE", -1);
    const char *job = getenv("SLURM_JOB_ID");
    struct stat st;
    int fd;
    if (job && *job)
        return dltpmix_set_error(ctx, DLTPMIX_ERR_ARG,
                                 "dltpmix: DLTPMIX_TEST_RENDEZVOUS is a test door, refused inside a Slurm job "
                                 "(SLURM_JOB_ID=%.32s): start the ranks with srun --mpi=pmix",
                                 job);
    if (size < 1 || size > 4096 || rank < 0 || rank >= size)
        return dltpmix_set_error(ctx, DLTPMIX_ERR_ARG,
                                 "dltpmix: DLTPMIX_TEST_RENDEZVOUS needs DLTPMIX_TEST_RANK in 0..SIZE-1 and "
                                 "DLTPMIX_TEST_SIZE >= 1 (got rank %ld, size %ld)",
                                 rank, size);
    if (snprintf(ctx->rdv, sizeof(ctx->rdv), "%s", dir) >= (int)sizeof(ctx->rdv) - 32)
        return dltpmix_set_error(ctx, DLTPMIX_ERR_ARG, "dltpmix: DLTPMIX_TEST_RENDEZVOUS path too long");
    fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return dltpmix_set_error(ctx, DLTPMIX_ERR_ARG,
                                 "dltpmix: DLTPMIX_TEST_RENDEZVOUS=%s: %s (a directory of "
                                 "your own the ranks share, not a symbolic link)",
                                 dir, strerror(errno));
    if (fstat(fd, &st) != 0 || st.st_uid != geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH))) {
        int mine = st.st_uid == geteuid();
        close(fd);
        return dltpmix_set_error(ctx, DLTPMIX_ERR_ARG,
                                 "dltpmix: DLTPMIX_TEST_RENDEZVOUS=%s is %s: whoever can "
                                 "write it could inject frames; use a fresh directory of your own (mktemp -d)",
                                 dir, !mine ? "owned by another user" : "writable by group or others");
    }
    ctx->rdv_fd = fd;
    return _one_host(ctx, (int)rank, (int)size, "test-rendezvous");
}

/* This rank's frame of collective seq (payload len bytes) into DIR/SEQ.RANK: written under a fresh
 * name of random letters (O_EXCL: never an existing file or link), then renamed into place. */
static int _rdv_put(dltpmix_ctx *ctx, const char *what, uint64_t seq, const void *payload, size_t len)
{
    char name[64], tmp[96];
    size_t flen = DLTPMIX_BLOB_HEADER + len;
    void *frame = malloc(flen);
    int fd = -1, ok = 0, e = 0;
    if (!frame)
        return dltpmix_set_error(ctx, DLTPMIX_ERR_NOMEM, "dltpmix: %s: cannot allocate %zu bytes", what, flen);
    flen = dltpmix_blob_encode(frame, flen, seq, ctx->info.rank, payload, len);
    snprintf(name, sizeof(name), "%llu.%d", (unsigned long long)seq, ctx->info.rank);
    for (int tries = 0; fd < 0 && tries < 16; tries++) {
        uint64_t r = 0;
        if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r)) {
            e = errno;
            break;
        }
        snprintf(tmp, sizeof(tmp), ".%s.%016llx", name, (unsigned long long)r);
        fd = openat(ctx->rdv_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        e = errno;
        if (fd < 0 && e != EEXIST)
            break;
    }
    if (fd >= 0) {
        ok = write(fd, frame, flen) == (ssize_t)flen;
        e = ok ? 0 : errno;
        if (close(fd) != 0 && ok) {
            ok = 0;
            e = errno;
        }
        if (ok && renameat(ctx->rdv_fd, tmp, ctx->rdv_fd, name) != 0) {
            ok = 0;
            e = errno;
        }
        if (!ok)
            unlinkat(ctx->rdv_fd, tmp, 0);
    }
    free(frame);
    if (!ok)
        return dltpmix_set_error(ctx, DLTPMIX_ERR_PMIX, "dltpmix: %s: cannot write %s/%s: %s", what, ctx->rdv, name,
                                 strerror(e ? e : EIO));
    return 0;
}

/* rank's frame of collective seq into dst (len bytes), waiting for it until the deadline. */
static int _rdv_get(dltpmix_ctx *ctx, const char *what, uint64_t seq, int rank, void *dst, size_t len, double deadline)
{
    char path[600];
    size_t flen = DLTPMIX_BLOB_HEADER + len;
    unsigned char *frame = malloc(flen + 1);
    const void *payload;
    const char *why = NULL;
    size_t got = 0;
    FILE *f = NULL;
    if (!frame)
        return dltpmix_set_error(ctx, DLTPMIX_ERR_NOMEM, "dltpmix: %s: cannot allocate %zu bytes", what, flen);
    snprintf(path, sizeof(path), "%llu.%d", (unsigned long long)seq, rank);
    for (;;) {
        struct timespec now, ts = {0, 2000000L};
        int fd = openat(ctx->rdv_fd, path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0 && !(f = fdopen(fd, "rb")))
            close(fd);
        if (f)
            break;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((double)now.tv_sec + now.tv_nsec * 1e-9 > deadline) {
            free(frame);
            ctx->broken = 1;
            return dltpmix_set_error(ctx, DLTPMIX_ERR_TIMEOUT,
                                     "dltpmix: %s (collective #%llu) timed out after %.0f s on rank %d of %d; ranks "
                                     "that never arrived: %d (test rendezvous %s)",
                                     what, (unsigned long long)seq, ctx->timeout_s, ctx->info.rank, ctx->info.size,
                                     rank, ctx->rdv);
        }
        nanosleep(&ts, NULL);
    }
    got = fread(frame, 1, flen + 1, f);
    fclose(f);
    payload = dltpmix_blob_decode(frame, got, seq, rank, len, &why);
    if (!payload) {
        free(frame);
        return dltpmix_set_error(ctx, DLTPMIX_ERR_MISMATCH, "dltpmix: %s: value from rank %d refused: %s", what, rank,
                                 why);
    }
    if (len)
        memcpy(dst, payload, len);
    free(frame);
    return 0;
}

static double _rdv_deadline(const dltpmix_ctx *ctx)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + now.tv_nsec * 1e-9 + ctx->timeout_s;
}

/* One collective: the writers (root, or every rank when root < 0) put len bytes of send, and
 * recv gets the root's (len bytes) or everyone's in rank order (size * len bytes). */
static int _rdv_collective(dltpmix_ctx *ctx, const char *what, int root, const void *send, size_t len, void *recv)
{
    uint64_t seq = ctx->seq++;
    double deadline = _rdv_deadline(ctx);
    int rc = 0;
    if (ctx->broken)
        return dltpmix_set_error(ctx, DLTPMIX_ERR_TIMEOUT, "dltpmix: %s after an earlier timeout: not attempted", what);
    if ((root < 0 || root == ctx->info.rank) && (rc = _rdv_put(ctx, what, seq, send, len)) != 0)
        return rc;
    if (root >= 0)
        return root == ctx->info.rank ? 0 : _rdv_get(ctx, what, seq, root, recv, len, deadline);
    for (int r = 0; rc == 0 && r < ctx->info.size; r++)
        rc = _rdv_get(ctx, what, seq, r, recv ? (char *)recv + (size_t)r * len : NULL, len, deadline);
    return rc;
}
#endif /* DLT_TEST_HOOKS */

int dltpmix_init(dltpmix_ctx **out, const dltpmix_options *opts, char *err, size_t errlen)
{
    dltpmix_ctx *ctx;
    int rc;
    long ntasks;

    if (!out)
        return DLTPMIX_ERR_ARG;
    *out = NULL;
    ctx = calloc(1, sizeof(*ctx));
    if (!ctx) {
        if (err && errlen)
            snprintf(err, errlen, "dltpmix: out of memory");
        return DLTPMIX_ERR_NOMEM;
    }
    ctx->timeout_s = DLTPMIX_DEFAULT_TIMEOUT_S;
    ctx->rdv_fd = -1;
    if (opts && opts->timeout_s > 0 && opts->timeout_s <= 1e9) {
        ctx->timeout_s = opts->timeout_s;
    } else if (getenv("DLTPMIX_TIMEOUT") && *getenv("DLTPMIX_TIMEOUT")) {
        /* A bound that cannot be read must not quietly become the default (or no bound at all). */
        const char *v = getenv("DLTPMIX_TIMEOUT");
        char *end;
        double t;
        errno = 0;
        t = strtod(v, &end);
        if (errno || end == v || *end || !(t > 0 && t <= 1e9)) {
            if (err && errlen)
                snprintf(err, errlen,
                         "dltpmix: DLTPMIX_TIMEOUT='%.32s': expected seconds, a number in (0, 1e9] "
                         "(default %d)",
                         v, (int)DLTPMIX_DEFAULT_TIMEOUT_S);
            free(ctx);
            return DLTPMIX_ERR_ARG;
        }
        ctx->timeout_s = t;
    }

    if (_env_has_pmix_server()) {
        rc = _init_from_pmix(ctx);
#ifdef DLT_TEST_HOOKS
    } else if (getenv("DLTPMIX_TEST_RENDEZVOUS") && *getenv("DLTPMIX_TEST_RENDEZVOUS")) {
        rc = _rdv_init(ctx, getenv("DLTPMIX_TEST_RENDEZVOUS"));
#endif
    } else {
        ntasks = _env_long("SLURM_STEP_NUM_TASKS", _env_long("SLURM_NTASKS", 1));
        if (ntasks > 1)
            rc = dltpmix_set_error(ctx, DLTPMIX_ERR_NOPMIX,
                                   "dltpmix: this step has %ld tasks but no PMIx server is reachable (no PMIX_* "
                                   "variables): launch with srun --mpi=pmix, or set MpiDefault=pmix in slurm.conf",
                                   ntasks);
        else if (opts && !opts->allow_singleton)
            rc = dltpmix_set_error(ctx, DLTPMIX_ERR_NOPMIX, "dltpmix: no PMIx server (launch with srun --mpi=pmix)");
        else
            rc = _init_singleton(ctx);
    }
    if (rc != 0) {
        if (err && errlen)
            snprintf(err, errlen, "%s", ctx->err.msg);
        dltpmix_finalize(ctx);
        return rc;
    }
    *out = ctx;
    return 0;
}

int dltpmix_finalize(dltpmix_ctx *ctx)
{
    pmix_status_t rc = PMIX_SUCCESS;
    if (!ctx)
        return 0;
    /* After a timeout, operations may still be pending in the PMIx progress thread and a
     * finalize could wait on the very peer that vanished: leave, the server sees the socket close. */
    if (ctx->pmix_up && !ctx->broken)
        rc = PMIx_Finalize(NULL, 0);
    if (ctx->rdv_fd >= 0)
        close(ctx->rdv_fd);
    free(ctx);
    return rc == PMIX_SUCCESS ? 0 : DLTPMIX_ERR_PMIX;
}

/* ------------------------------------------------------------------ collectives */

/* Names the ranks whose arrival key for seq cannot be read within DLTPMIX_PROBE_S. */
static void _name_missing_ranks(dltpmix_ctx *ctx, uint64_t seq, char *out, size_t outlen)
{
    char key[DLTPMIX_KEY_MAX];
    int n = ctx->info.size, named = 0, missing = 0;
    _async_op **ops = calloc((size_t)n, sizeof(*ops));
    struct timespec deadline = dltpmix_deadline(DLTPMIX_PROBE_S);
    size_t used = 0;

    out[0] = '\0';
    if (!ops || dltpmix_key(key, sizeof(key), DLTPMIX_OP_ARRIVE, seq) != 0) {
        free(ops);
        snprintf(out, outlen, "unknown");
        return;
    }
    for (int r = 0; r < n; r++) {
        if (r == ctx->info.rank)
            continue;
        ops[r] = _op_new();
        if (!ops[r])
            continue;
        PMIX_LOAD_PROCID(&ops[r]->proc, ctx->me.nspace, (pmix_rank_t)r);
        if (PMIx_Get_nb(&ops[r]->proc, key, NULL, 0, _value_cb, ops[r]) != PMIX_SUCCESS) {
            ops[r]->status = PMIX_ERROR;
            ops[r]->done = 1;
        }
    }
    for (int r = 0; r < n; r++) {
        int ok;
        if (!ops[r])
            continue;
        ok = _op_wait(ops[r], &deadline);
        if (ok) {
            ok = ops[r]->status == PMIX_SUCCESS;
            _op_free(ops[r]);
        }
        if (!ok) {
            missing++;
            if (named < DLTPMIX_NAME_MAX_RANKS && used < outlen) {
                int w = snprintf(out + used, outlen - used, "%s%d", named ? "," : "", r);
                if (w > 0)
                    used += (size_t)w;
                named++;
            }
        }
    }
    if (missing > named && used < outlen)
        snprintf(out + used, outlen - used, " and %d more", missing - named);
    if (missing == 0)
        snprintf(out, outlen, "none identified (all arrival keys readable; the PMIx server may be stalled)");
    free(ops);
}

/* Publishes key=value (may be NULL), the arrival mark, commits and fences with data collection
 * over the whole namespace, bounded by the context timeout. */
static int _put_commit_fence(dltpmix_ctx *ctx, const char *what, const char *key, const void *frame, size_t framelen)
{
    char akey[DLTPMIX_KEY_MAX];
    pmix_value_t val;
    pmix_status_t rc;
    _async_op *op;
    int completed;
    bool collect = true;
    struct timespec deadline;

    if (ctx->broken)
        return dltpmix_set_error(ctx, DLTPMIX_ERR_TIMEOUT, "dltpmix: %s after an earlier timeout: not attempted", what);
    if (key) {
        val.type = PMIX_BYTE_OBJECT;
        val.data.bo.bytes = (char *)frame;
        val.data.bo.size = framelen;
        rc = PMIx_Put(PMIX_GLOBAL, key, &val);
        if (rc != PMIX_SUCCESS)
            return _pmix_fail(ctx, rc, "%s: PMIx_Put(%s)", what, key);
    }
    if (dltpmix_key(akey, sizeof(akey), DLTPMIX_OP_ARRIVE, ctx->seq) != 0)
        return dltpmix_set_error(ctx, DLTPMIX_ERR_ARG, "dltpmix: key overflow");
    val.type = PMIX_UINT64;
    val.data.uint64 = ctx->seq;
    rc = PMIx_Put(PMIX_GLOBAL, akey, &val);
    if (rc == PMIX_SUCCESS)
        rc = PMIx_Commit();
    if (rc != PMIX_SUCCESS)
        return _pmix_fail(ctx, rc, "%s: PMIx_Put/Commit", what);

    op = _op_new();
    if (!op)
        return dltpmix_set_error(ctx, DLTPMIX_ERR_NOMEM, "dltpmix: out of memory");
    PMIX_LOAD_PROCID(&op->proc, ctx->me.nspace, PMIX_RANK_WILDCARD);
    PMIX_INFO_LOAD(&op->info[0], PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
    op->ninfo = 1;
    deadline = dltpmix_deadline(ctx->timeout_s);
    /* GCC 12 misreads the procs[] parameter as a 256-byte region (false positive). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstringop-overread"
    rc = PMIx_Fence_nb(&op->proc, 1, op->info, op->ninfo, _op_cb, op);
#pragma GCC diagnostic pop
    if (rc != PMIX_SUCCESS) {
        _op_free(op);
        return _pmix_fail(ctx, rc, "%s: PMIx_Fence_nb", what);
    }
    /* Slurm's PMIx server ends a fence on its own clock too (PMIxTimeout, 300 s by default, from its
     * node's first contribution: slurm src/plugins/mpi/pmix/pmixp_coll_tree.c), answering
     * PMIX_ERR_TIMEOUT: the same timeout, said the same way. */
    completed = _op_wait(op, &deadline); /* not completed: abandoned, op is the callback's now */
    rc = completed ? op->status : PMIX_ERR_TIMEOUT;
    if (completed)
        _op_free(op);
    if (rc == PMIX_ERR_TIMEOUT) { /* completed: the server's own bound; else this library's */
        char missing[256];
        ctx->broken = 1;
        _name_missing_ranks(ctx, ctx->seq, missing, sizeof(missing));
        if (completed)
            return dltpmix_set_error(ctx, DLTPMIX_ERR_TIMEOUT,
                                     "dltpmix: %s (collective #%llu) timed out at the PMIx server's own bound on rank "
                                     "%d of %d; ranks that never arrived: %s (Slurm's PMIxTimeout in mpi.conf bounds "
                                     "it, as DLTPMIX_TIMEOUT does here)",
                                     what, (unsigned long long)ctx->seq, ctx->info.rank, ctx->info.size, missing);
        return dltpmix_set_error(ctx, DLTPMIX_ERR_TIMEOUT,
                                 "dltpmix: %s (collective #%llu) timed out after %.0f s on rank %d of %d; ranks that "
                                 "never arrived: %s (set DLTPMIX_TIMEOUT to change the bound)",
                                 what, (unsigned long long)ctx->seq, ctx->timeout_s, ctx->info.rank, ctx->info.size,
                                 missing);
    }
    if (rc != PMIX_SUCCESS)
        return _pmix_fail(ctx, rc, "%s: PMIx_Fence", what);
    return 0;
}

/* Reads and checks rank's frame for key into dst (len bytes). */
static int _get_frame(dltpmix_ctx *ctx, const char *what, const char *key, int rank, uint64_t seq, void *dst,
                      size_t len)
{
    pmix_proc_t p;
    pmix_value_t *val = NULL;
    pmix_status_t rc;
    const void *payload;
    const char *why = NULL;
    int ret = 0;

    /* After the fence with data collection the value is here or nowhere: PMIX_IMMEDIATE answers from
     * the local store at once (openpmix pmix_client_get.c), where a plain Get of a key that never
     * came (ranks calling different collectives at the same sequence number) would go to the server
     * and wait on Slurm's direct modex. */
    {
        pmix_info_t imm;
        bool yes = true;
        PMIX_INFO_CONSTRUCT(&imm);
        PMIX_INFO_LOAD(&imm, PMIX_IMMEDIATE, &yes, PMIX_BOOL);
        PMIX_LOAD_PROCID(&p, ctx->me.nspace, (pmix_rank_t)rank);
        rc = PMIx_Get(&p, key, &imm, 1, &val);
        PMIX_INFO_DESTRUCT(&imm);
    }
    if (rc == PMIX_ERR_NOT_FOUND)
        return dltpmix_set_error(ctx, DLTPMIX_ERR_MISMATCH,
                                 "dltpmix: %s: rank %d published no %s in this collective: the ranks called "
                                 "collectives in a different order",
                                 what, rank, key);
    if (rc != PMIX_SUCCESS)
        return _pmix_fail(ctx, rc, "%s: PMIx_Get(rank %d, %s)", what, rank, key);
    if (val->type != PMIX_BYTE_OBJECT) {
        ret = dltpmix_set_error(ctx, DLTPMIX_ERR_MISMATCH, "dltpmix: %s: rank %d's %s is not a byte object", what, rank,
                                key);
    } else {
        payload = dltpmix_blob_decode(val->data.bo.bytes, val->data.bo.size, seq, rank, len, &why);
        if (!payload)
            ret = dltpmix_set_error(ctx, DLTPMIX_ERR_MISMATCH, "dltpmix: %s: value from rank %d refused: %s", what,
                                    rank, why);
        else if (len)
            memcpy(dst, payload, len);
    }
    PMIX_VALUE_RELEASE(val);
    return ret;
}

int dltpmix_bcast(dltpmix_ctx *ctx, int root, void *buf, size_t len)
{
    char key[DLTPMIX_KEY_MAX];
    void *frame = NULL;
    size_t framelen = 0;
    uint64_t seq;
    int rc;

    if (ctx)
        dlt_err_clear(&ctx->err);
    if (!ctx || (len && !buf))
        return ctx ? dltpmix_set_error(ctx, DLTPMIX_ERR_ARG, "dltpmix_bcast: NULL buffer") : DLTPMIX_ERR_ARG;
    if (root < 0 || root >= ctx->info.size)
        return dltpmix_set_error(ctx, DLTPMIX_ERR_ARG, "dltpmix_bcast: root %d outside 0..%d", root,
                                 ctx->info.size - 1);
    if (ctx->info.singleton)
        return 0;
#ifdef DLT_TEST_HOOKS
    if (ctx->rdv[0])
        return _rdv_collective(ctx, "broadcast", root, buf, len, buf);
#endif
    seq = ctx->seq;
    dltpmix_key(key, sizeof(key), DLTPMIX_OP_BCAST, seq);
    if (ctx->info.rank == root) {
        frame = malloc(DLTPMIX_BLOB_HEADER + len);
        if (!frame)
            return dltpmix_set_error(ctx, DLTPMIX_ERR_NOMEM, "dltpmix_bcast: cannot allocate %zu bytes", len);
        framelen = dltpmix_blob_encode(frame, DLTPMIX_BLOB_HEADER + len, seq, root, buf, len);
    }
    rc = _put_commit_fence(ctx, "broadcast", ctx->info.rank == root ? key : NULL, frame, framelen);
    free(frame);
    ctx->seq++;
    if (rc != 0 || ctx->info.rank == root)
        return rc;
    return _get_frame(ctx, "broadcast", key, root, seq, buf, len);
}

int dltpmix_allgather(dltpmix_ctx *ctx, const void *send, size_t len, void *recv)
{
    char key[DLTPMIX_KEY_MAX];
    void *frame;
    size_t framelen;
    uint64_t seq;
    int rc;

    if (ctx)
        dlt_err_clear(&ctx->err);
    if (!ctx || (len && (!send || !recv)))
        return ctx ? dltpmix_set_error(ctx, DLTPMIX_ERR_ARG, "dltpmix_allgather: NULL buffer") : DLTPMIX_ERR_ARG;
    if (ctx->info.singleton) {
        if (len)
            memmove(recv, send, len);
        return 0;
    }
#ifdef DLT_TEST_HOOKS
    if (ctx->rdv[0])
        return _rdv_collective(ctx, "all-gather", -1, send, len, recv);
#endif
    seq = ctx->seq;
    dltpmix_key(key, sizeof(key), DLTPMIX_OP_ALLGATHER, seq);
    frame = malloc(DLTPMIX_BLOB_HEADER + len);
    if (!frame)
        return dltpmix_set_error(ctx, DLTPMIX_ERR_NOMEM, "dltpmix_allgather: cannot allocate %zu bytes", len);
    framelen = dltpmix_blob_encode(frame, DLTPMIX_BLOB_HEADER + len, seq, ctx->info.rank, send, len);
    rc = _put_commit_fence(ctx, "all-gather", key, frame, framelen);
    free(frame);
    ctx->seq++;
    for (int r = 0; rc == 0 && r < ctx->info.size; r++)
        rc = _get_frame(ctx, "all-gather", key, r, seq, (char *)recv + (size_t)r * len, len);
    return rc;
}

int dltpmix_barrier(dltpmix_ctx *ctx)
{
    int rc;
    if (!ctx)
        return DLTPMIX_ERR_ARG;
    dlt_err_clear(&ctx->err);
    if (ctx->info.singleton)
        return 0;
#ifdef DLT_TEST_HOOKS
    if (ctx->rdv[0])
        return _rdv_collective(ctx, "barrier", -1, NULL, 0, NULL);
#endif
    rc = _put_commit_fence(ctx, "barrier", NULL, NULL, 0);
    ctx->seq++;
    return rc;
}

#ifndef DLT_HAVE_NCCL
int dltpmix_nccl_comm_init(dltpmix_ctx *ctx, int cuda_device, struct ncclComm **comm)
{
    (void)cuda_device;
    if (comm)
        *comm = NULL;
    if (!ctx)
        return DLTPMIX_ERR_NOTBUILT;
    return dltpmix_set_error(ctx, DLTPMIX_ERR_NOTBUILT,
                             "dltpmix: built without NCCL; rebuild with --with-cuda=DIR where nccl.h and libnccl are");
}

int dltpmix_nccl_comm_refuse(dltpmix_ctx *ctx, const char *why)
{
    (void)why;
    return dltpmix_nccl_comm_init(ctx, -1, NULL); /* the same refusal: built without NCCL */
}

int dltpmix_have_nccl(void)
{
    return 0;
}
#endif
