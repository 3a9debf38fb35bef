/* SPDX-License-Identifier: Apache-2.0 */
/* test_dltpmix: libdltpmix's test rendezvous (DLTPMIX_TEST_RENDEZVOUS), the way the
 * device check starts several ranks without Slurm or a PMIx server: three forked ranks all-gather,
 * broadcast from the last rank and meet at a barrier, each checking what it got; a rank whose peer
 * never comes times out naming it; a rank outside the size is refused; the door is refused in a
 * Slurm job and for a directory others could write. Each names its node as Slurm does
 * (SLURMD_NODENAME), as the plugin and the trainer do. Built without --enable-test-hooks (as every
 * package is), the variables change nothing: that is checked instead. */
#include "config.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "pmix/dltpmix.h"
#include "pmix/dltpmix_list.h"

static void _setenv_rank(const char *dir, int rank, int size)
{
    char r[16], s[16];
    snprintf(r, sizeof(r), "%d", rank);
    snprintf(s, sizeof(s), "%d", size);
    setenv("DLTPMIX_TEST_RENDEZVOUS", dir, 1);
    setenv("DLTPMIX_TEST_RANK", r, 1);
    setenv("DLTPMIX_TEST_SIZE", s, 1);
    setenv("SLURMD_NODENAME", "dlt-test-node", 1);
    unsetenv("SLURM_JOB_ID"); /* the door is refused inside a job: make check may run in one */
    unsetenv("PMIX_NAMESPACE");
    unsetenv("PMIX_SERVER_URI2");
    unsetenv("PMIX_SERVER_URI3");
    unsetenv("PMIX_SERVER_URI4");
    unsetenv("PMIX_SERVER_URI21");
    unsetenv("PMIX_SERVER_URI41");
}

#ifdef DLT_TEST_HOOKS
/* One rank's run: 0 when every collective gave what it should, else a line on stderr. */
static int _rank(const char *dir, int rank, int size)
{
    dltpmix_ctx *px = NULL;
    char err[512], pattern[40], got[40];
    int all[8] = {0}, mine = 100 + rank;
    _setenv_rank(dir, rank, size);
    if (dltpmix_init(&px, NULL, err, sizeof(err)) != 0) {
        fprintf(stderr, "rank %d: init: %s\n", rank, err);
        return 1;
    }
    if (dltpmix_get_info(px)->rank != rank || dltpmix_get_info(px)->size != size ||
        dltpmix_get_info(px)->local_rank != rank || dltpmix_get_info(px)->singleton) {
        fprintf(stderr, "rank %d: info says rank %d of %d\n", rank, dltpmix_get_info(px)->rank,
                dltpmix_get_info(px)->size);
        return 1;
    }
    if (strcmp(dltpmix_get_info(px)->hostname, "dlt-test-node") != 0) {
        fprintf(stderr, "rank %d: hostname '%s', not SLURMD_NODENAME's 'dlt-test-node'\n", rank,
                dltpmix_get_info(px)->hostname);
        return 1;
    }
    if (dltpmix_allgather(px, &mine, sizeof(mine), all) != 0) {
        fprintf(stderr, "rank %d: allgather: %s\n", rank, dltpmix_error(px));
        return 1;
    }
    for (int r = 0; r < size; r++)
        if (all[r] != 100 + r) {
            fprintf(stderr, "rank %d: allgather slot %d = %d\n", rank, r, all[r]);
            return 1;
        }
    for (size_t i = 0; i < sizeof(pattern); i++)
        pattern[i] = (char)(i * 7 + 3);
    memcpy(got, rank == size - 1 ? pattern : (char[40]){0}, sizeof(got));
    if (dltpmix_bcast(px, size - 1, got, sizeof(got)) != 0 || memcmp(got, pattern, sizeof(got)) != 0) {
        fprintf(stderr, "rank %d: bcast: %s\n", rank, dltpmix_error(px));
        return 1;
    }
    if (dltpmix_barrier(px) != 0) {
        fprintf(stderr, "rank %d: barrier: %s\n", rank, dltpmix_error(px));
        return 1;
    }
    return dltpmix_finalize(px) != 0;
}

static void test_three_ranks(void **state)
{
    char dir[] = "/tmp/dlt-rdv-XXXXXX", cmd[64];
    pid_t pid[3];
    int failed = 0;
    (void)state;
    assert_non_null(mkdtemp(dir));
    for (int r = 0; r < 3; r++) {
        pid[r] = fork();
        assert_true(pid[r] >= 0);
        if (pid[r] == 0) {
            setenv("DLTPMIX_TIMEOUT", "20", 1);
            _exit(_rank(dir, r, 3));
        }
    }
    for (int r = 0; r < 3; r++) {
        int st = 0;
        waitpid(pid[r], &st, 0);
        failed += !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(failed, 0);
}

static void test_missing_peer_times_out(void **state)
{
    char dir[] = "/tmp/dlt-rdv-XXXXXX", cmd[64], err[512];
    dltpmix_ctx *px = NULL;
    int mine = 1, all[2];
    (void)state;
    assert_non_null(mkdtemp(dir));
    _setenv_rank(dir, 0, 2);
    setenv("DLTPMIX_TIMEOUT", "1", 1);
    assert_int_equal(dltpmix_init(&px, NULL, err, sizeof(err)), 0);
    assert_int_equal(dltpmix_allgather(px, &mine, sizeof(mine), all), DLTPMIX_ERR_TIMEOUT);
    assert_non_null(strstr(dltpmix_error(px), "ranks that never arrived: 1"));
    /* After a timeout nothing more is attempted. */
    assert_int_equal(dltpmix_barrier(px), DLTPMIX_ERR_TIMEOUT);
    dltpmix_finalize(px);
    /* A bound of 0 s (no bound at all) or below is refused, naming it. */
    setenv("DLTPMIX_TIMEOUT", "0", 1);
    assert_int_equal(dltpmix_init(&px, NULL, err, sizeof(err)), DLTPMIX_ERR_ARG);
    assert_non_null(strstr(err, "DLTPMIX_TIMEOUT='0'"));
    setenv("DLTPMIX_TIMEOUT", "1", 1);
    /* A rank outside the size is refused at init. */
    _setenv_rank(dir, 2, 2);
    assert_int_equal(dltpmix_init(&px, NULL, err, sizeof(err)), DLTPMIX_ERR_ARG);
    assert_non_null(strstr(err, "DLTPMIX_TEST_RANK"));
    unsetenv("DLTPMIX_TEST_RENDEZVOUS");
    unsetenv("DLTPMIX_TIMEOUT");
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* The test door stays a test door: refused inside a Slurm job, for a symbolic link, for a
 * directory others can write (the planted-link attack needs one) or another user owns; the
 * refusals name the reason, and a planted link's target is never written. */
static void test_rendezvous_refusals(void **state)
{
    char dir[] = "/tmp/dlt-rdv-XXXXXX", path[128], link[160], victim[128], err[512], cmd[160];
    dltpmix_ctx *px = NULL;
    FILE *f;
    (void)state;
    assert_non_null(mkdtemp(dir));
    setenv("DLTPMIX_TIMEOUT", "2", 1);
    /* A Slurm job: refused whatever the directory. */
    _setenv_rank(dir, 0, 1);
    setenv("SLURM_JOB_ID", "4242", 1);
    assert_int_equal(dltpmix_init(&px, NULL, err, sizeof(err)), DLTPMIX_ERR_ARG);
    assert_non_null(strstr(err, "refused inside a Slurm job (SLURM_JOB_ID=4242)"));
    unsetenv("SLURM_JOB_ID");
    /* Its own fresh 0700 directory: accepted (one rank, a broadcast to itself). */
    assert_int_equal(dltpmix_init(&px, NULL, err, sizeof(err)), 0);
    dltpmix_finalize(px);
    px = NULL;
    /* A world-writable directory with a link planted at the old predictable name: refused, the
     * link's target untouched. */
    snprintf(path, sizeof(path), "%s/shared", dir);
    snprintf(victim, sizeof(victim), "%s/victim.txt", dir);
    assert_int_equal(mkdir(path, 0700), 0);
    assert_int_equal(chmod(path, 01777), 0);
    f = fopen(victim, "w");
    assert_non_null(f);
    fputs("precious\n", f);
    fclose(f);
    snprintf(link, sizeof(link), "%s/0.0.tmp", path);
    assert_int_equal(symlink(victim, link), 0);
    _setenv_rank(path, 0, 2);
    assert_int_equal(dltpmix_init(&px, NULL, err, sizeof(err)), DLTPMIX_ERR_ARG);
    assert_non_null(strstr(err, "writable by group or others"));
    f = fopen(victim, "r");
    assert_non_null(f);
    assert_non_null(fgets(cmd, sizeof(cmd), f));
    fclose(f);
    assert_string_equal(cmd, "precious\n");
    /* Group-writable only, and others-writable only: refused too (each bit on its own). */
    assert_int_equal(chmod(path, 0770), 0);
    assert_int_equal(dltpmix_init(&px, NULL, err, sizeof(err)), DLTPMIX_ERR_ARG);
    assert_int_equal(chmod(path, 0703), 0);
    assert_int_equal(dltpmix_init(&px, NULL, err, sizeof(err)), DLTPMIX_ERR_ARG);
    assert_non_null(strstr(err, "writable by group or others"));
    /* A symbolic link to a good directory: refused (the directory is opened without following). */
    snprintf(link, sizeof(link), "%s/alias", dir);
    assert_int_equal(chmod(path, 0700), 0);
    assert_int_equal(symlink(path, link), 0);
    _setenv_rank(link, 0, 1);
    assert_int_equal(dltpmix_init(&px, NULL, err, sizeof(err)), DLTPMIX_ERR_ARG);
    assert_non_null(strstr(err, "not a symbolic link"));
    /* Another user's directory (checked where this test can make one: as root). */
    if (geteuid() == 0) {
        assert_int_equal(chown(path, 65534, 65534), 0);
        _setenv_rank(path, 0, 1);
        assert_int_equal(dltpmix_init(&px, NULL, err, sizeof(err)), DLTPMIX_ERR_ARG);
        assert_non_null(strstr(err, "owned by another user"));
    }
    unsetenv("DLTPMIX_TEST_RENDEZVOUS");
    unsetenv("DLTPMIX_TIMEOUT");
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

#else
/* A build without --enable-test-hooks (every package) has no rendezvous: the variables change
 * nothing, and the library starts as the one rank of a step without PMIx, as it would without them. */
static void test_rendezvous_not_built(void **state)
{
    dltpmix_ctx *px = NULL;
    dltpmix_options o = {0};
    char err[512], dir[] = "/tmp/dlt-rdv-off-XXXXXX";
    (void)state;
    assert_non_null(mkdtemp(dir));
    _setenv_rank(dir, 1, 3);
    unsetenv("SLURM_STEP_NUM_TASKS");
    unsetenv("SLURM_NTASKS");
    o.allow_singleton = 1;
    assert_int_equal(dltpmix_init(&px, &o, err, sizeof(err)), 0);
    assert_int_equal(dltpmix_get_info(px)->rank, 0);
    assert_int_equal(dltpmix_get_info(px)->size, 1);
    assert_true(dltpmix_get_info(px)->singleton);
    dltpmix_finalize(px);
    assert_int_equal(rmdir(dir), 0); /* nothing written there */
}
#endif

/* dltpmix_error says the last call's first failure, and nothing after a call that succeeded. */
static void test_error_is_the_calls_own(void **state)
{
    dltpmix_ctx *px = NULL;
    dltpmix_options o = {0};
    char err[512];
    int v = 7;
    (void)state;
    unsetenv("DLTPMIX_TEST_RENDEZVOUS");
    unsetenv("SLURM_STEP_NUM_TASKS");
    unsetenv("SLURM_NTASKS");
    o.allow_singleton = 1;
    assert_int_equal(dltpmix_init(&px, &o, err, sizeof(err)), 0);
    assert_int_equal(dltpmix_bcast(px, 3, &v, sizeof(v)), DLTPMIX_ERR_ARG);
    assert_non_null(strstr(dltpmix_error(px), "dltpmix_bcast: root 3 outside 0..0"));
    /* the bounds themselves: the world size (one past the last rank) and -1 refused, 0 taken */
    assert_int_equal(dltpmix_bcast(px, 1, &v, sizeof(v)), DLTPMIX_ERR_ARG);
    assert_non_null(strstr(dltpmix_error(px), "dltpmix_bcast: root 1 outside 0..0"));
    assert_int_equal(dltpmix_bcast(px, -1, &v, sizeof(v)), DLTPMIX_ERR_ARG);
    assert_int_equal(dltpmix_bcast(px, 0, &v, sizeof(v)), 0);
    assert_int_equal(v, 7);
    assert_int_equal(dltpmix_bcast(px, 0, NULL, sizeof(v)), DLTPMIX_ERR_ARG);
    assert_string_equal(dltpmix_error(px), "dltpmix_bcast: NULL buffer"); /* this call's words, not the last one's */
    assert_int_equal(dltpmix_barrier(px), 0);
    assert_string_equal(dltpmix_error(px), "");
    dltpmix_finalize(px);
}

/* No PMIx server reachable: a step of 2 tasks (the smallest that needs one) is refused naming the
 * fix, SLURM_NTASKS read when SLURM_STEP_NUM_TASKS is absent; 1 task runs as a singleton. */
static void test_no_server_several_tasks(void **state)
{
    dltpmix_ctx *px = NULL;
    dltpmix_options o = {0};
    char err[512];
    (void)state;
    unsetenv("DLTPMIX_TEST_RENDEZVOUS");
    unsetenv("SLURM_NTASKS");
    o.allow_singleton = 1;
    setenv("SLURM_STEP_NUM_TASKS", "2", 1);
    assert_int_equal(dltpmix_init(&px, &o, err, sizeof(err)), DLTPMIX_ERR_NOPMIX);
    assert_null(px);
    if (!strstr(err, "this step has 2 tasks but no PMIx server is reachable") || !strstr(err, "srun --mpi=pmix"))
        fail_msg("2 tasks without PMIx: '%s'", err);
    unsetenv("SLURM_STEP_NUM_TASKS");
    setenv("SLURM_NTASKS", "2", 1);
    assert_int_equal(dltpmix_init(&px, &o, err, sizeof(err)), DLTPMIX_ERR_NOPMIX);
    setenv("SLURM_NTASKS", "1", 1);
    assert_int_equal(dltpmix_init(&px, &o, err, sizeof(err)), 0);
    assert_int_equal(dltpmix_get_info(px)->size, 1);
    dltpmix_finalize(px);
    unsetenv("SLURM_NTASKS");
}

/* The node index from a PMIx node list (where a server gives no PMIX_NODEID): whole entries only,
 * the first at 0, the last, absent names and empty lists -1. */
static void test_node_list_index(void **state)
{
    (void)state;
    assert_int_equal(dltpmix_list_index("n1,n2,n10", "n1"), 0);
    assert_int_equal(dltpmix_list_index("n1,n2,n10", "n2"), 1);
    assert_int_equal(dltpmix_list_index("n1,n2,n10", "n10"), 2);
    assert_int_equal(dltpmix_list_index("n10,n1", "n1"), 1); /* not the prefix of n10 */
    assert_int_equal(dltpmix_list_index("n10,n2", "n1"), -1);
    assert_int_equal(dltpmix_list_index("n1,n2", "n"), -1);
    assert_int_equal(dltpmix_list_index("n1", "n1"), 0);
    assert_int_equal(dltpmix_list_index("", "n1"), -1);
    assert_int_equal(dltpmix_list_index(NULL, "n1"), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_error_is_the_calls_own),
        cmocka_unit_test(test_no_server_several_tasks),
        cmocka_unit_test(test_node_list_index),
#ifdef DLT_TEST_HOOKS
        cmocka_unit_test(test_three_ranks),
        cmocka_unit_test(test_missing_peer_times_out),
        cmocka_unit_test(test_rendezvous_refusals),
#else
        cmocka_unit_test(test_rendezvous_not_built),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
