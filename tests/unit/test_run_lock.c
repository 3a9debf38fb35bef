/* SPDX-License-Identifier: Apache-2.0 */
/* common/run_lock.c: the holder line round-trips with its restart count and a line of the
 * earlier five-field form still parses (restart unknown); a requeue (an earlier incarnation) is
 * told from a concurrent step of the same incarnation and from another job. The claims themselves
 * on real folders and files: the lock file's name and place, the holder it names, the refusal of a
 * second claim (another run, a step of this incarnation, a previous incarnation waited for up to
 * its deadline), a lock file that is a symbolic link, and a failed claim that leaves nothing held. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/unit/tmp_dir.h"

#include "common/clock.h"
#include "common/run_lock.h"

static dlt_run_holder _h(const char *job, const char *step, int restart)
{
    dlt_run_holder h;
    memset(&h, 0, sizeof(h));
    snprintf(h.host, sizeof(h.host), "n1");
    h.pid = 42;
    snprintf(h.job, sizeof(h.job), "%s", job);
    snprintf(h.step, sizeof(h.step), "%s", step);
    snprintf(h.since, sizeof(h.since), "2026-01-01T00:00:00Z");
    h.restart = restart;
    return h;
}

static void test_holder_line(void **state)
{
    dlt_run_holder a = _h("77", "3", 2), b;
    char line[256];
    (void)state;
    assert_true(dlt_run_holder_format(&a, line, sizeof(line)) > 0);
    assert_int_equal(dlt_run_holder_parse(line, &b), 0);
    assert_string_equal(b.job, "77");
    assert_string_equal(b.step, "3");
    assert_int_equal(b.restart, 2);
    /* written by the previous version */
    assert_int_equal(dlt_run_holder_parse("host=n1 pid=9 job=77 step=0 since=2026-01-01T00:00:00Z\n", &b), 0);
    assert_int_equal(b.restart, -1);
    assert_int_equal(dlt_run_holder_parse("host=n1 pid=0 job=77 step=0 since=x\n", &b), -EINVAL);
}

static void test_relation(void **state)
{
    dlt_run_holder me = _h("77", "0", 1), h;
    (void)state;
    h = _h("77", "0", 0);
    assert_int_equal(dlt_run_holder_relate(&me, &h), DLT_HOLDER_EARLIER); /* requeued once */
    h = _h("77", "-", -1);
    assert_int_equal(dlt_run_holder_relate(&me, &h), DLT_HOLDER_EARLIER); /* an older holder line */
    h = _h("77", "1", 1);
    assert_int_equal(dlt_run_holder_relate(&me, &h), DLT_HOLDER_SAME_JOB); /* a concurrent step */
    h = _h("77", "0", 2);
    assert_int_equal(dlt_run_holder_relate(&me, &h), DLT_HOLDER_SAME_JOB); /* a later incarnation */
    h = _h("78", "0", 0);
    assert_int_equal(dlt_run_holder_relate(&me, &h), DLT_HOLDER_OTHER);
    me = _h("-", "-", 0);
    h = _h("-", "-", 0);
    assert_int_equal(dlt_run_holder_relate(&me, &h), DLT_HOLDER_OTHER); /* outside Slurm: no waiting */
}

static void _expect_msg(const dlt_err *err, const char *want)
{
    if (!strstr(err->msg, want))
        fail_msg("message '%s' lacks '%s'", err->msg, want);
}

static void _slurm_env(const char *job, const char *step, const char *restart)
{
    if (job)
        setenv("SLURM_JOB_ID", job, 1);
    else
        unsetenv("SLURM_JOB_ID");
    if (step)
        setenv("SLURM_STEP_ID", step, 1);
    else
        unsetenv("SLURM_STEP_ID");
    if (restart)
        setenv("SLURM_RESTART_COUNT", restart, 1);
    else
        unsetenv("SLURM_RESTART_COUNT");
}

static void test_lock_dir(void **state)
{
    char *d = tmp_dir_make("run-lock"), path[512], line[256] = "", pid[32];
    dlt_run_lock a, b;
    dlt_run_holder h;
    dlt_err err = DLT_ERR_INIT;
    FILE *f;
    (void)state;
    _slurm_env(NULL, NULL, NULL);
    assert_int_equal(dlt_run_lock_dir(&a, "--checkpoint-dir", d, 0, dlt_err_fresh(&err)), 0);
    assert_true(a.fd >= 0);
    /* the holder, in the folder's .dltrain.lock */
    snprintf(path, sizeof(path), "%s/.dltrain.lock", d);
    assert_non_null(f = fopen(path, "r"));
    assert_non_null(fgets(line, sizeof(line), f));
    fclose(f);
    assert_int_equal(dlt_run_holder_parse(line, &h), 0);
    assert_int_equal(h.pid, (long)getpid());
    assert_string_equal(h.job, "-");
    /* a second claim: refused at once, naming the holder's pid and the option */
    assert_int_equal(dlt_run_lock_dir(&b, "--checkpoint-dir", d, 0, dlt_err_fresh(&err)), -EBUSY);
    assert_int_equal(b.fd, -1);
    snprintf(pid, sizeof(pid), "pid %ld", (long)getpid());
    _expect_msg(&err, "is in use by another run (host ");
    _expect_msg(&err, pid);
    _expect_msg(&err, "give this run another --checkpoint-dir");
    /* released: the next claim has it */
    dlt_run_lock_release(&a);
    assert_int_equal(a.fd, -1);
    assert_int_equal(dlt_run_lock_dir(&b, "--checkpoint-dir", d, 0, dlt_err_fresh(&err)), 0);
    dlt_run_lock_release(&b);
    /* a lock file that is a symbolic link is never followed */
    assert_int_equal(unlink(path), 0);
    {
        char target[512];
        snprintf(target, sizeof(target), "%s/elsewhere", d);
        assert_int_equal(symlink(target, path), 0);
        assert_true(dlt_run_lock_dir(&a, "--checkpoint-dir", d, 0, dlt_err_fresh(&err)) < 0);
        assert_int_equal(a.fd, -1);
        _expect_msg(&err, "cannot create its lock file");
        assert_int_equal(access(target, F_OK), -1); /* nothing made through it */
    }
    tmp_dir_remove(d);
}

static void test_lock_beside(void **state)
{
    char *d = tmp_dir_make("run-lock"), file[512], path[512], cwd[4096];
    dlt_run_lock a, b;
    dlt_err err = DLT_ERR_INIT;
    (void)state;
    _slurm_env(NULL, NULL, NULL);
    snprintf(file, sizeof(file), "%s/m.jsonl", d);
    assert_int_equal(dlt_run_lock_beside(&a, "--metrics", file, 0, dlt_err_fresh(&err)), 0);
    snprintf(path, sizeof(path), "%s/.m.jsonl.dltrain.lock", d); /* beside it, hidden, in its folder */
    assert_int_equal(access(path, F_OK), 0);
    assert_int_equal(access(file, F_OK), -1); /* the file itself is not made */
    assert_int_equal(dlt_run_lock_beside(&b, "--metrics", file, 0, dlt_err_fresh(&err)), -EBUSY);
    _expect_msg(&err, "--metrics ");
    _expect_msg(&err, "/m.jsonl is in use by another run");
    dlt_run_lock_release(&a);
    /* a name without a folder: in the working directory */
    assert_non_null(getcwd(cwd, sizeof(cwd)));
    assert_int_equal(chdir(d), 0);
    assert_int_equal(dlt_run_lock_beside(&a, "--metrics", "n.jsonl", 0, dlt_err_fresh(&err)), 0);
    assert_int_equal(access(".n.jsonl.dltrain.lock", F_OK), 0);
    dlt_run_lock_release(&a);
    assert_int_equal(chdir(cwd), 0);
    {
        char cmd[600];
        snprintf(cmd, sizeof(cmd),
                 "test \"$(ls -A '%s' | sort | tr '\\n' ' ')\" = '.m.jsonl.dltrain.lock .n.jsonl.dltrain.lock '", d);
        assert_int_equal(system(cmd), 0);
    }
    tmp_dir_remove(d);
}

static void test_lock_file(void **state)
{
    char *d = tmp_dir_make("run-lock"), file[512];
    dlt_run_lock a, b;
    dlt_err err = DLT_ERR_INIT;
    int fd1, fd2;
    (void)state;
    snprintf(file, sizeof(file), "%s/events", d);
    assert_true((fd1 = open(file, O_WRONLY | O_CREAT, 0644)) >= 0);
    assert_true((fd2 = open(file, O_WRONLY)) >= 0);
    assert_int_equal(dlt_run_lock_file(&a, "--metrics", file, fd1, dlt_err_fresh(&err)), 0);
    assert_int_equal(dlt_run_lock_file(&b, "--metrics", file, fd2, dlt_err_fresh(&err)), -EBUSY);
    _expect_msg(&err, "is being written by another running process");
    /* the lock is the open file's: it goes once the claim and the file are both closed */
    dlt_run_lock_release(&a);
    close(fd1);
    assert_int_equal(dlt_run_lock_file(&b, "--metrics", file, fd2, dlt_err_fresh(&err)), 0);
    dlt_run_lock_release(&b);
    close(fd2);
    tmp_dir_remove(d);
}

static void test_lock_incarnations(void **state)
{
    char *d = tmp_dir_make("run-lock");
    dlt_run_lock a, b;
    dlt_err err = DLT_ERR_INIT;
    double t0;
    (void)state;
    /* held by step 0 of job 77's first incarnation */
    _slurm_env("77", "0", NULL);
    assert_int_equal(dlt_run_lock_dir(&a, "--checkpoint-dir", d, 0, dlt_err_fresh(&err)), 0);
    /* another step of the same incarnation: refused at once even with a deadline */
    _slurm_env("77", "1", NULL);
    t0 = dlt_now();
    assert_int_equal(dlt_run_lock_dir(&b, "--checkpoint-dir", d, dlt_now() + 5, dlt_err_fresh(&err)), -EBUSY);
    assert_true(dlt_now() - t0 < 2);
    _expect_msg(&err, "is in use by step 0 of this same Slurm job");
    /* the job requeued (restart count 1): waits for the previous run up to the deadline, then says so */
    _slurm_env("77", "0", "1");
    t0 = dlt_now();
    assert_int_equal(dlt_run_lock_dir(&b, "--checkpoint-dir", d, dlt_now() + 0.6, dlt_err_fresh(&err)), -EBUSY);
    assert_true(dlt_now() - t0 >= 0.55);
    _expect_msg(&err, "is still held by this job's previous run");
    _expect_msg(&err, "Slurm job 77 step 0");
    dlt_run_lock_release(&a);
    _slurm_env(NULL, NULL, NULL);
    tmp_dir_remove(d);
}

static void test_claims(void **state)
{
    char *d = tmp_dir_make("run-lock"), m[512], c[512], t[512], f[512];
    dlt_run_claims a, b;
    dlt_run_lock probe;
    dlt_err err = DLT_ERR_INIT;
    (void)state;
    _slurm_env(NULL, NULL, NULL);
    snprintf(m, sizeof(m), "%s/m.jsonl", d);
    snprintf(c, sizeof(c), "%s/ck/a/b", d);
    snprintf(t, sizeof(t), "%s/tb", d);
    assert_int_equal(dlt_run_claims_take(&a, m, c, t, 0, dlt_err_fresh(&err)), 0);
    assert_true(a.taken && a.ckpt.fd >= 0 && a.tb.fd >= 0 && a.metrics.fd >= 0);
    {
        struct stat st;
        assert_int_equal(stat(c, &st), 0); /* folders made with their parents */
        assert_true(S_ISDIR(st.st_mode));
        assert_int_equal(stat(t, &st), 0);
    }
    /* a second run with the same metrics file only: refused, nothing of its own held */
    assert_int_equal(dlt_run_claims_take(&b, m, NULL, NULL, 0, dlt_err_fresh(&err)), -EBUSY);
    assert_false(b.taken);
    assert_int_equal(b.metrics.fd, -1);
    dlt_run_claims_release(&a);
    assert_false(a.taken);
    /* a TensorBoard folder that cannot be made: the checkpoint folder's claim is let go again */
    snprintf(f, sizeof(f), "%s/file", d);
    {
        FILE *x = fopen(f, "w");
        assert_non_null(x);
        fclose(x);
    }
    snprintf(t, sizeof(t), "%s/file/tb", d);
    assert_true(dlt_run_claims_take(&b, m, c, t, 0, dlt_err_fresh(&err)) < 0);
    _expect_msg(&err, "--tensorboard ");
    _expect_msg(&err, "cannot create it");
    assert_false(b.taken);
    assert_int_equal(dlt_run_lock_dir(&probe, "--checkpoint-dir", c, 0, dlt_err_fresh(&err)), 0);
    dlt_run_lock_release(&probe);
    tmp_dir_remove(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_holder_line), cmocka_unit_test(test_relation),  cmocka_unit_test(test_lock_dir),
        cmocka_unit_test(test_lock_beside), cmocka_unit_test(test_lock_file), cmocka_unit_test(test_lock_incarnations),
        cmocka_unit_test(test_claims),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
