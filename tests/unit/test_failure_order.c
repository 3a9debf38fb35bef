/* SPDX-License-Identifier: Apache-2.0 */
/* test_failure_order: what a failed run does, in order, on the CPU through recording hooks. A run
 * of two ranks (a stand-in communicator that records its abort instead of ending the process)
 * whose optimizer fails at its second step must drop the backend's recorded step (the CUDA graph,
 * dlt_graph_ops.release) before it aborts the communicator: NCCL work recorded in a graph holds the
 * communicator, and ncclCommAbort waits for every such graph to be destroyed (NCCL
 * src/init.cc commDestroySync, src/enqueue.cc persistentDestructor). And the stall watchdog must
 * end the process within its bound even when the abort never returns. Also here, with the same
 * stand-in communicator: the replica check tells bit-identical weights from nearly equal ones (the
 * device check's two-rank phase reads it). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/status.h"
#include "tests/unit/data_fixture.h"
#include "tests/unit/stdout_capture.h"
#include "trainer/comm/comm.h"
#include "trainer/train/trainer.h"
#include "trainer/train/watchdog.h"

/* The calls recorded, in order: 'B'/'E' capture begin/end, 'R' graph release, 'S' graph release
 * from the watchdog's thread, 'A' communicator abort, 'D' backend destroy. */
static struct {
    char seq[64];
    int n;
    const dlt_backend_ops *real;
    dlt_backend_ops ops;
    int sgd_calls, fail_at;
    int seq_fd;       /* > 0: the abort writes the calls recorded so far here (a forked run's report) */
    int fail_destroy; /* the backend's destroy records a failure of its own */
} g;

static void _note(char what)
{
    if (g.n < (int)sizeof(g.seq) - 1)
        g.seq[g.n++] = what;
}

/* ---- a two-rank communicator whose peer is this rank's twin: a sum doubles */

static int _allreduce(dlt_comm *c, void *buf, size_t count, dlt_dtype type)
{
    (void)c;
    for (size_t i = 0; i < count; i++)
        if (type == DLT_DTYPE_F32)
            ((float *)buf)[i] *= 2;
        else if (type == DLT_DTYPE_F64)
            ((double *)buf)[i] *= 2;
        else
            ((int64_t *)buf)[i] *= 2;
    return 0;
}

static int _bcast(dlt_comm *c, void *buf, size_t bytes, int root)
{
    (void)c, (void)buf, (void)bytes, (void)root;
    return 0;
}

static int _barrier(dlt_comm *c)
{
    (void)c;
    return 0;
}

static void _comm_destroy(dlt_comm *c)
{
    free(c);
}

static void _abort(dlt_comm *c, int code)
{
    (void)code;
    _note('A'); /* the real ones end the process here: nothing after this point runs */
    if (g.seq_fd > 0 && write(g.seq_fd, g.seq, (size_t)g.n) < 0)
        _exit(3);
    /* A communicator may say something of its own as it ends (into its sink, the run's buffer):
     * the run's first failure is still what the command is left with. */
    dlt_fail(c->err, -EIO, "the communicator was aborted");
}

/* The twin's record is this rank's own. */
static int _allgather(dlt_comm *c, const void *mine, size_t bytes, void *all)
{
    for (int k = 0; k < c->size; k++)
        memcpy((char *)all + (size_t)k * bytes, mine, bytes);
    return 0;
}

static const dlt_comm_ops g_twin_ops = {"twin", _allreduce, _bcast,     _barrier, _comm_destroy, _abort, NULL,
                                        NULL,   NULL,       _allgather, NULL,     NULL,          NULL};

/* ---- the backend's recording hooks */

/* A recording that records nothing: the step's ops run plainly on the CPU between begin and end. */
static int _capture_begin(dlt_backend *be)
{
    (void)be;
    _note('B');
    return 0;
}

static int _capture_end(dlt_backend *be)
{
    (void)be;
    _note('E');
    return 0;
}

static int _replay(dlt_backend *be, const dlt_step_inputs *in)
{
    (void)be, (void)in;
    return -ENOTSUP;
}

static void _release(dlt_backend *be)
{
    (void)be;
    _note('R');
}

static void _release_async(dlt_backend *be)
{
    (void)be;
    _note('S');
}

static const dlt_graph_ops g_graphs = {_capture_begin, _capture_end, _replay, _release, _release_async};

static void _destroy(dlt_backend *be)
{
    _note('D');
    if (g.fail_destroy) /* a backend failing while the run unwinds: its words must not be what is said */
        dlt_fail(be->err, -EIO, "the backend failed while closing");
    g.real->destroy(be);
}

static int _sgd_step(dlt_backend *be, float *w, float *v, const float *gr, float lr, float mu, float wd, float wd_nd,
                     float scale)
{
    if (++g.sgd_calls == g.fail_at) {
        return dlt_fail(be->err, -EIO, "injected optimizer failure");
    }
    return g.real->sgd_step(be, w, v, gr, lr, mu, wd, wd_nd, scale);
}

static void _hook(dlt_backend *be, void *arg)
{
    (void)arg;
    g.real = be->ops;
    g.ops = *be->ops;
    g.ops.destroy = _destroy;
    g.ops.sgd_step = _sgd_step;
    be->ops = &g.ops;
    be->graphs = &g_graphs; /* as the CUDA backend has: a recording that may exist */
}

/* Four steps of a small ResNet-18 on the CPU backend with the recording hook, checkpointing into dir. */
static void _small_run(dlt_train_config *c, char *dir)
{
    dlt_err err = DLT_ERR_INIT;
    dlt_train_config_defaults(c);
    assert_int_equal(dlt_model_parse_arch("resnet18", &c->model, dlt_err_fresh(&err)), 0);
    c->model.image = 32;
    c->model.batch = 2;
    c->model.classes = 10;
    c->backend.kind = "cpu";
    c->synthetic_size = 64;
    c->epochs = 1;
    c->max_steps = 4;
    c->eval_every = 0;
    c->check_every = 0;
    c->log_level = DLT_LOG_QUIET;
    c->log_every = 0;
    c->stall_timeout = 0;
    c->checkpoint_dir = dir;
    c->backend_hook = _hook;
}

static void test_failed_run_releases_graph_before_abort(void **state)
{
    dlt_train_config c;
    dlt_comm *comm = calloc(1, sizeof(*comm));
    dlt_err err = DLT_ERR_INIT;
    char dir[] = "/tmp/dlt-failorder-XXXXXX", cmd[64];
    int rc;
    (void)state;
    assert_non_null(comm);
    assert_non_null(mkdtemp(dir));
    _small_run(&c, dir);
    memset(&g, 0, sizeof(g));
    g.fail_at = 2;
    comm->ops = &g_twin_ops;
    comm->rank = 0;
    comm->size = 2;
    comm->err = dlt_err_fresh(&err);
    rc = dlt_train_run(&c, comm, dlt_err_fresh(&err));
    comm->ops->destroy(comm);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    printf("# run: rc %d, err \"%s\", recorded \"%s\" (R graph release, A abort, D backend destroy)\n", rc, err.msg,
           g.seq);
    assert_int_not_equal(rc, 0);
    assert_non_null(strstr(err.msg, "injected optimizer failure")); /* the first failure, not the abort's words */
    /* The abort happened, and the recording was dropped before it (the backend's destroy, the
     * only other place a graph goes, comes after the abort: on a real communicator, never). */
    assert_non_null(strchr(g.seq, 'A'));
    if (!strchr(g.seq, 'R') || strchr(g.seq, 'R') > strchr(g.seq, 'A'))
        fail_msg("the communicator was aborted with the recorded step alive (calls: \"%s\"): NCCL's abort waits for "
                 "every graph holding the communicator",
                 g.seq);
}

/* The first failure across modules: the data loader fails (a truncated validation image under
 * --strict, met in the evaluation after the first epoch: not an agreed decision, so the run ends
 * every rank), then the communicator's abort and the backend's close each record words of their
 * own into the same error while the run unwinds. What the command is left with is the loader's. */
static void test_loader_failure_wins_over_unwinding(void **state)
{
    static const char *const classes[] = {"cat", "dog"};
    dlt_train_config c;
    dlt_comm *comm = calloc(1, sizeof(*comm));
    dlt_err err = DLT_ERR_INIT;
    char dir[] = "/tmp/dlt-firstfail-XXXXXX", root[300], p[400];
    int rc;
    (void)state;
    assert_non_null(comm);
    assert_non_null(mkdtemp(dir));
    snprintf(root, sizeof(root), "%s/data", dir);
    mkdir(root, 0755);
    snprintf(p, sizeof(p), "%s/train", root);
    dlt_test_make_folder(p, classes, 2, 8, 0);
    snprintf(p, sizeof(p), "%s/val", root);
    dlt_test_make_folder(p, classes, 2, 4, 1);
    _small_run(&c, dir);
    c.data = root;
    c.strict = 1;
    c.eval_every = 1;
    c.max_steps = 0;
    c.epochs = 1;
    memset(&g, 0, sizeof(g));
    g.fail_destroy = 1;
    comm->ops = &g_twin_ops;
    comm->rank = 0;
    comm->size = 2;
    comm->err = dlt_err_fresh(&err);
    rc = dlt_train_run(&c, comm, &err);
    comm->ops->destroy(comm);
    snprintf(p, sizeof(p), "rm -rf %s", dir);
    assert_int_equal(system(p), 0);
    printf("# run: rc %d, err \"%s\" (from %s:%d), recorded \"%s\"\n", rc, err.msg, err.file ? err.file : "?", err.line,
           g.seq);
    assert_int_not_equal(rc, 0);
    assert_non_null(strstr(err.msg, "img00.JPEG")); /* the loader's words, naming the file */
    assert_null(strstr(err.msg, "aborted"));
    assert_null(strstr(err.msg, "closing"));
    assert_non_null(strchr(g.seq, 'A')); /* the abort and the backend's close both happened after it */
    assert_non_null(strchr(g.seq, 'D'));
    assert_int_equal(err.agreed, 0);
}

/* The first failure is kept: a later one (a second symptom, a failing cleanup) is ignored, and
 * context is added to the failure travelling up, never to the first one from another's way up. */
static void test_status_keeps_first_failure(void **state)
{
    dlt_err e = DLT_ERR_INIT;
    (void)state;
    assert_int_equal(dlt_fail(&e, -EIO, "device lost"), -EIO);
    assert_int_equal(dlt_fail_prefix(&e, -EIO, "step %d", 3), -EIO);
    assert_string_equal(e.msg, "step 3: device lost");
    assert_non_null(strstr(e.file, "test_failure_order.c"));
    assert_true(e.line > 0);
    assert_int_equal(dlt_fail(&e, -ENOMEM, "second symptom"), -ENOMEM); /* the caller's status, not kept */
    assert_int_equal(dlt_fail_prefix(&e, -ENOMEM, "cleanup"), -ENOMEM); /* the second one's context */
    assert_int_equal(dlt_fail_suffix(&e, -ENOMEM, " (layer x)"), -ENOMEM);
    assert_string_equal(e.msg, "step 3: device lost");
    assert_int_equal(e.code, -EIO);
    dlt_err_clear(&e);
    assert_int_equal(dlt_fail(&e, 0, "not a failure"), 0); /* 0 records nothing */
    assert_int_equal(e.code, 0);
    /* a callee that returned a status without words: its strerror, with the context */
    assert_int_equal(dlt_fail_prefix(&e, -ENOENT, "opening %s", "x"), -ENOENT);
    assert_string_equal(e.msg, "opening x: No such file or directory");
    /* a deferred failure taken later keeps its own words unless one came first */
    {
        dlt_err later = DLT_ERR_INIT, first = DLT_ERR_INIT;
        dlt_fail(&later, -EPROTO, "batch 7: bad file");
        assert_int_equal(dlt_fail_take(&first, &later), -EPROTO);
        assert_string_equal(first.msg, "batch 7: bad file");
        dlt_fail(&later, -EIO, "ignored");
        dlt_err_clear(&first);
        dlt_fail(&first, -EINVAL, "the first");
        dlt_fail_take(&first, &later);
        assert_string_equal(first.msg, "the first");
    }
    /* NULL: the caller wants the status only */
    assert_int_equal(dlt_fail(NULL, -EIO, "nowhere"), -EIO);
}

/* A step that fails while it is being recorded (--cuda-graphs, the second step) drops the partial
 * recording (release) instead of ending the capture, which made the partial graph executable. */
static void test_failed_capture_is_dropped(void **state)
{
    dlt_train_config c;
    dlt_comm *comm;
    dlt_err err = DLT_ERR_INIT;
    char dir[] = "/tmp/dlt-failcap-XXXXXX", cmd[64];
    int rc;
    (void)state;
    assert_non_null(mkdtemp(dir));
    _small_run(&c, dir);
    c.cuda_graphs = 1;
    memset(&g, 0, sizeof(g));
    g.fail_at = 2; /* the second step is the one recorded */
    assert_int_equal(dlt_comm_single_create(&comm, dlt_err_fresh(&err)), 0);
    rc = dlt_train_run(&c, comm, dlt_err_fresh(&err));
    comm->ops->destroy(comm);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    printf("# run: rc %d, err \"%s\", recorded \"%s\" (B capture begin, E capture end, R release)\n", rc, err.msg,
           g.seq);
    assert_int_not_equal(rc, 0);
    assert_non_null(strstr(err.msg, "injected optimizer failure"));
    assert_non_null(strstr(g.seq, "BR"));
    if (strchr(g.seq, 'E'))
        fail_msg("the failed step's partial recording was ended into a graph (calls: \"%s\")", g.seq);
}

/* ---- the replica check's exactness: the twin communicator's peer holds the same bits (its sums
 * double each value), so every check says bit-identical; a peer whose checksum differs in its last
 * bit passes the 1e-9 bound but is said not to be bit-identical. */

static int g_perturb; /* 1: the twin's checksum differs by one unit in the last place; 2: by 1% */

static int _allgather_perturbed(dlt_comm *c, const void *mine, size_t bytes, void *all)
{
    _allgather(c, mine, bytes, all);
    if (g_perturb && bytes == sizeof(double)) {
        /* The replica check's record: the peer's checksum is the next double up. */
        double other;
        memcpy(&other, mine, sizeof(other));
        other = g_perturb == 1 ? nextafter(other, INFINITY) : other * 1.01 + 1; /* 2: far beyond the bound */
        memcpy((char *)all + bytes, &other, sizeof(other));
    }
    return 0;
}

static const dlt_comm_ops g_perturbed_ops = {"twin", _allreduce, _bcast, _barrier, _comm_destroy,
                                             _abort, NULL,       NULL,   NULL,     _allgather_perturbed,
                                             NULL,   NULL,       NULL};

/* A 3-step two-rank run with a replica check every step and the verbose log in a file; returns
 * how many checks said bit-identical and how many said not. */
static int _replica_run(int perturb, int *same, int *differ, dlt_err *out)
{
    dlt_train_config c;
    dlt_comm *comm = calloc(1, sizeof(*comm));
    dlt_err err = DLT_ERR_INIT;
    char dir[] = "/tmp/dlt-replica-XXXXXX", cmd[256], logf[64], line[512];
    int saved, rc;
    FILE *f;
    assert_non_null(comm);
    assert_non_null(mkdtemp(dir));
    _small_run(&c, dir);
    c.model.width = 0.25;
    c.max_steps = 3;
    c.check_every = 1;
    c.log_level = DLT_LOG_VERBOSE;
    c.backend_hook = NULL; /* the real ops: only the communicator is a stand-in here */
    memset(&g, 0, sizeof(g));
    g_perturb = perturb;
    comm->ops = &g_perturbed_ops;
    comm->rank = 0;
    comm->size = 2;
    comm->err = dlt_err_fresh(&err);
    snprintf(logf, sizeof(logf), "%s.log", dir);
    saved = stdout_capture_begin(logf);
    rc = dlt_train_run(&c, comm, dlt_err_fresh(&err));
    stdout_capture_end(saved);
    comm->ops->destroy(comm);
    *out = err;
    *same = *differ = 0;
    assert_non_null(f = fopen(logf, "r"));
    while (fgets(line, sizeof(line), f)) {
        *differ += strstr(line, "not bit-identical") != NULL;
        *same += strstr(line, "bit-identical across 2 ranks") != NULL && !strstr(line, "not bit-identical");
    }
    fclose(f);
    snprintf(cmd, sizeof(cmd), "rm -rf %s %s", dir, logf);
    assert_int_equal(system(cmd), 0);
    return rc;
}

static void test_replica_check_tells_bit_identity(void **state)
{
    int same, differ;
    dlt_err e;
    (void)state;
    assert_int_equal(_replica_run(0, &same, &differ, &e), 0);
    printf("# identical peer: %d check(s) bit-identical, %d not\n", same, differ);
    assert_int_equal(same, 3);
    assert_int_equal(differ, 0);
    assert_int_equal(_replica_run(1, &same, &differ, &e), 0);
    printf("# peer one ulp off: %d check(s) bit-identical, %d not\n", same, differ);
    assert_int_equal(same, 0);
    assert_int_equal(differ, 3);
    /* Beyond the bound: every rank stops at the first check with the same words, naming the
     * ranks of each checksum, agreed (no abort). */
    assert_int_not_equal(_replica_run(2, &same, &differ, &e), 0);
    printf("# peer 1%% off: %s\n", e.msg);
    assert_non_null(strstr(e.msg, "weights differ across ranks at step 1 (checksum "));
    assert_non_null(strstr(e.msg, " on rank(s) 0, "));
    assert_non_null(strstr(e.msg, " on rank(s) 1): stopping"));
    assert_int_equal(e.agreed, 1);
    assert_null(strchr(g.seq, 'A'));
}

/* ---- the watchdog: an abort that never returns still ends the process, within the bound */

static void _abort_forever(void *arg)
{
    (void)arg;
    for (;;)
        pause();
}

static void _abort_quick(void *arg)
{
    (void)arg;
}

/* Forks a process whose watchdog (limit 0.2 s, abort bound 0.5 s) fires with abort_fn; returns its
 * wait status and the seconds it took, or -1 when it had not ended after 10 s (then killed). */
static int _stalled_child(void (*abort_fn)(void *), double *secs)
{
    struct timespec t0, t1;
    int st = 0;
    pid_t pid;
    fflush(stdout); /* the child's watchdog flushes stdout: nothing of ours may be in it twice */
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dlt_watchdog w;
        if (dlt_watchdog_start(&w, 0.2, 0, "test", abort_fn, NULL) != 0)
            _exit(2);
        pthread_mutex_lock(&w.mu);
        w.abort_wait_s = 0.5;
        pthread_mutex_unlock(&w.mu);
        dlt_watchdog_phase(&w, DLT_PHASE_ALLREDUCE, 7);
        sleep(30);
        _exit(0);
    }
    for (int i = 0; i < 1000; i++) {
        struct timespec ts = {0, 10000000L};
        if (waitpid(pid, &st, WNOHANG) == pid) {
            clock_gettime(CLOCK_MONOTONIC, &t1);
            *secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
            return st;
        }
        nanosleep(&ts, NULL);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    return -1;
}

static void test_watchdog_exits_when_abort_blocks(void **state)
{
    double secs = 0;
    int st;
    (void)state;
    st = _stalled_child(_abort_forever, &secs);
    if (st == -1)
        fail_msg("a stalled process whose communicator abort never returns was still alive after 10 s (the watchdog "
                 "must exit after its bounded wait)");
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), DLT_EXIT_STALLED);
    printf("# blocking abort: exited %d after %.2f s (limit 0.2 s + bound 0.5 s)\n", WEXITSTATUS(st), secs);
    assert_true(secs >= 0.6);
    /* An abort that returns ends the process at once, not after the bound. */
    st = _stalled_child(_abort_quick, &secs);
    assert_true(st != -1 && WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), DLT_EXIT_STALLED);
    printf("# returning abort: exited %d after %.2f s\n", WEXITSTATUS(st), secs);
}

/* A rank that stalls (DLT_TEST_STALL: its compute phase of step 2 sleeps) is ended by its
 * watchdog, which must drop the recorded step from its own thread (release_async) before it aborts
 * the communicator: otherwise NCCL's abort waits for a graph nobody destroys, the rank leaves
 * without aborting, and its peers wait for their own stall timeout. */
#ifdef DLT_TEST_HOOKS /* without the hooks there is no DLT_TEST_STALL to stall a rank with */
static void test_watchdog_releases_graph_before_abort(void **state)
{
    char dir[] = "/tmp/dlt-failorder-XXXXXX", cmd[64], seq[64] = "";
    int fds[2], st = 0;
    ssize_t n;
    pid_t pid;
    (void)state;
    assert_non_null(mkdtemp(dir));
    assert_int_equal(pipe(fds), 0);
    fflush(stdout);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dlt_train_config c;
        dlt_comm *comm = calloc(1, sizeof(*comm));
        dlt_err err = DLT_ERR_INIT;
        close(fds[0]);
        setenv("DLT_TEST_STALL", "compute:2:20", 1);
        _small_run(&c, dir);
        c.stall_timeout = 0.4;
        memset(&g, 0, sizeof(g));
        g.seq_fd = fds[1];
        comm->ops = &g_twin_ops;
        comm->size = 2;
        comm->err = dlt_err_fresh(&err);
        dlt_train_run(&c, comm, dlt_err_fresh(&err));
        _exit(0); /* not reached: the watchdog ends the process */
    }
    close(fds[1]);
    n = read(fds[0], seq, sizeof(seq) - 1);
    close(fds[0]);
    waitpid(pid, &st, 0);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    printf("# stalled rank: exit %d, recorded \"%s\" (S graph release from the watchdog, A abort)\n",
           WIFEXITED(st) ? WEXITSTATUS(st) : -1, n > 0 ? seq : "");
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), DLT_EXIT_STALLED);
    assert_true(n > 0);
    if (!strchr(seq, 'S') || strchr(seq, 'S') > strchr(seq, 'A'))
        fail_msg("the watchdog aborted the communicator with the recorded step alive (calls: \"%s\")", seq);
}
#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
    /* First: it forks a training run, and OpenMP's threads (started by any earlier run in this
     * process) do not survive a fork. */
#ifdef DLT_TEST_HOOKS
        cmocka_unit_test(test_watchdog_releases_graph_before_abort),
#endif
        cmocka_unit_test(test_status_keeps_first_failure),
        cmocka_unit_test(test_loader_failure_wins_over_unwinding),
        cmocka_unit_test(test_failed_run_releases_graph_before_abort),
        cmocka_unit_test(test_failed_capture_is_dropped),
        cmocka_unit_test(test_replica_check_tells_bit_identity),
        cmocka_unit_test(test_watchdog_exits_when_abort_blocks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
