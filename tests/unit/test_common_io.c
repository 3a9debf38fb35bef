/* SPDX-License-Identifier: Apache-2.0 */
/* test_common_io: the small shared helpers every part leans on, against references written from
 * their definitions: the CRC-32C and TFRecord's mask (a bit-by-bit CRC and a bit-by-bit rotation),
 * the file helpers of common/io.c on real files, FIFOs and folders (a file's folder at the root,
 * missing, a file; a FIFO never waited on; an atomic write that leaves nothing behind), the
 * progress line's figures worked out by hand, and the CPU list of the thread's affinity. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
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
#include <unistd.h>

#include <cmocka.h>

#include "tests/unit/tmp_dir.h"

#include "common/affinity.h"
#include "common/crc32c.h"
#include "common/io.h"
#include "common/progress.h"
#include "common/status.h"

/* CRC-32C from its definition: reflected, polynomial 0x82F63B78, one bit at a time. */
static uint32_t _crc32c_bits(const uint8_t *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    }
    return c ^ 0xFFFFFFFFu;
}

/* Rotation right by r, one bit at a time: bit i goes to bit (i - r) mod 32. */
static uint32_t _rotr_bits(uint32_t v, int r)
{
    uint32_t out = 0;
    for (int i = 0; i < 32; i++)
        if (v & (1u << i))
            out |= 1u << ((i - r + 32) % 32);
    return out;
}

static void test_crc32c(void **state)
{
    uint8_t buf[1000];
    (void)state;
    assert_int_equal(dlt_crc32c(0, "123456789", 9), 0xe3069283u); /* the check value of CRC-32C */
    for (size_t i = 0; i < sizeof(buf); i++)
        buf[i] = (uint8_t)(i * 131 + 7);
    for (size_t n = 0; n <= sizeof(buf); n += 37) {
        uint32_t whole = dlt_crc32c(0, buf, n);
        assert_int_equal(whole, _crc32c_bits(buf, n));
        /* continued over two pieces, cut anywhere */
        assert_int_equal(dlt_crc32c(dlt_crc32c(0, buf, n / 3), buf + n / 3, n - n / 3), whole);
        /* TFRecord's mask: the CRC rotated right by 15 bits, plus 0xa282ead8 */
        assert_int_equal(dlt_crc32c_masked(buf, n), (uint32_t)(_rotr_bits(_crc32c_bits(buf, n), 15) + 0xa282ead8u));
    }
}

static void _write(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

static void _expect_msg(const dlt_err *err, const char *want)
{
    if (!strstr(err->msg, want))
        fail_msg("message '%s' lacks '%s'", err->msg, want);
}

static void test_check_parent_dir(void **state)
{
    char *d = tmp_dir_make("common-io"), p[8192];
    dlt_err err = DLT_ERR_INIT;
    (void)state;
    /* a file directly under the root: its folder is "/" */
    assert_int_equal(dlt_check_parent_dir("--metrics", "/m.jsonl", dlt_err_fresh(&err)), 0);
    /* no folder at all: the working directory */
    assert_int_equal(dlt_check_parent_dir("--metrics", "m.jsonl", dlt_err_fresh(&err)), 0);
    snprintf(p, sizeof(p), "%s/m.jsonl", d);
    assert_int_equal(dlt_check_parent_dir("--metrics", p, dlt_err_fresh(&err)), 0);
    /* the folder one level down, missing: named with the command that makes it */
    snprintf(p, sizeof(p), "%s/no/m.jsonl", d);
    assert_int_equal(dlt_check_parent_dir("--metrics", p, dlt_err_fresh(&err)), -ENOENT);
    _expect_msg(&err, "--metrics ");
    _expect_msg(&err, "/no does not exist: create it (mkdir -p ");
    /* the folder is a file */
    snprintf(p, sizeof(p), "%s/f", d);
    _write(p, "x");
    snprintf(p, sizeof(p), "%s/f/m.jsonl", d);
    assert_int_equal(dlt_check_parent_dir("--metrics", p, dlt_err_fresh(&err)), -ENOTDIR);
    _expect_msg(&err, "/f is a regular file, not a folder");
    /* a folder path longer than PATH_MAX: refused by length, not cut short */
    memset(p, 'a', 5000);
    p[0] = '/';
    memcpy(p + 5000, "/m", 3);
    assert_int_equal(dlt_check_parent_dir("--metrics", p, dlt_err_fresh(&err)), -ENAMETOOLONG);
    tmp_dir_remove(d);
}

static void test_open_regular(void **state)
{
    char *d = tmp_dir_make("common-io"), p[512], q[512];
    dlt_err err = DLT_ERR_INIT;
    int fd, fl;
    FILE *f;
    char got[16] = "";
    (void)state;
    snprintf(p, sizeof(p), "%s/fifo", d);
    assert_int_equal(mkfifo(p, 0600), 0);
    /* a FIFO with no writer: refused at once, for reading and for writing, never waited on */
    assert_int_equal(dlt_open_regular("--init", p, O_RDONLY, 0, dlt_err_fresh(&err)), -EINVAL);
    _expect_msg(&err, "--init ");
    _expect_msg(&err, "/fifo: a FIFO, not a regular file");
    assert_int_equal(dlt_open_regular("--metrics", p, O_WRONLY, 0, dlt_err_fresh(&err)), -EINVAL);
    _expect_msg(&err, "a FIFO, not a regular file");
    assert_null(dlt_fopen_regular(NULL, p, "r", dlt_err_fresh(&err)));
    _expect_msg(&err, "a FIFO, not a regular file");
    assert_int_equal(strncmp(err.msg, d, strlen(d)), 0); /* no option name: the path first */
    /* a directory, a missing file */
    assert_int_equal(dlt_open_regular("--init", d, O_RDONLY, 0, dlt_err_fresh(&err)), -EINVAL);
    _expect_msg(&err, "a directory, not a regular file");
    snprintf(q, sizeof(q), "%s/missing", d);
    assert_int_equal(dlt_open_regular("--init", q, O_RDONLY, 0, dlt_err_fresh(&err)), -ENOENT);
    _expect_msg(&err, strerror(ENOENT));
    /* a regular file: opened blocking and close-on-exec */
    snprintf(q, sizeof(q), "%s/file", d);
    _write(q, "hello");
    fd = dlt_open_regular("--init", q, O_RDONLY, 0, dlt_err_fresh(&err));
    assert_true(fd >= 0);
    fl = fcntl(fd, F_GETFL);
    assert_int_equal(fl & O_NONBLOCK, 0);
    assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    assert_int_equal(dlt_read_full(fd, got, sizeof(got)), 5); /* fewer at the end of the file */
    assert_string_equal(got, "hello");
    close(fd);
    /* stdio modes: "w" truncates, "a" appends */
    f = dlt_fopen_regular("--metrics", q, "a", dlt_err_fresh(&err));
    assert_non_null(f);
    fputs(" world", f);
    fclose(f);
    f = dlt_fopen_regular("--metrics", q, "r", dlt_err_fresh(&err));
    assert_non_null(f);
    memset(got, 0, sizeof(got));
    assert_int_equal(fread(got, 1, sizeof(got) - 1, f), 11);
    fclose(f);
    assert_string_equal(got, "hello world");
    f = dlt_fopen_regular("--metrics", q, "w", dlt_err_fresh(&err));
    assert_non_null(f);
    fclose(f);
    {
        struct stat st;
        assert_int_equal(stat(q, &st), 0);
        assert_int_equal(st.st_size, 0);
    }
    tmp_dir_remove(d);
}

static void test_check_path(void **state)
{
    char *d = tmp_dir_make("common-io"), p[512];
    dlt_err err = DLT_ERR_INIT;
    (void)state;
    snprintf(p, sizeof(p), "%s/file", d);
    _write(p, "x");
    assert_int_equal(dlt_check_path("--data", d, 1, dlt_err_fresh(&err)), 0);
    assert_int_equal(dlt_check_path("--init", p, 0, dlt_err_fresh(&err)), 0);
    assert_int_equal(dlt_check_path("--data", p, 1, dlt_err_fresh(&err)), -ENOTDIR);
    _expect_msg(&err, "--data ");
    _expect_msg(&err, "/file: a regular file, not a directory");
    assert_int_equal(dlt_check_path("--init", d, 0, dlt_err_fresh(&err)), -EINVAL);
    _expect_msg(&err, ": a directory, not a regular file");
    snprintf(p, sizeof(p), "%s/nothing", d);
    assert_int_equal(dlt_check_path("--val-data", p, 1, dlt_err_fresh(&err)), -ENOENT);
    _expect_msg(&err, "/nothing: No such file or directory");
    tmp_dir_remove(d);
}

static void test_mkdirs(void **state)
{
    char *d = tmp_dir_make("common-io"), p[512];
    struct stat st;
    (void)state;
    snprintf(p, sizeof(p), "%s/a/b/c", d);
    assert_int_equal(dlt_mkdirs(p), 0);
    assert_int_equal(stat(p, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(dlt_mkdirs(p), 0); /* already there */
    snprintf(p, sizeof(p), "%s/a/b/c/", d);
    assert_int_equal(dlt_mkdirs(p), 0); /* a trailing slash */
    snprintf(p, sizeof(p), "%s/file", d);
    _write(p, "x");
    errno = 0;
    assert_int_equal(dlt_mkdirs(p), -1); /* a file in the way */
    assert_int_equal(errno, ENOTDIR);
    snprintf(p, sizeof(p), "%s/file/under", d);
    errno = 0;
    assert_int_equal(dlt_mkdirs(p), -1);
    assert_int_equal(errno, ENOTDIR);
    errno = 0;
    assert_int_equal(dlt_mkdirs(""), -1);
    assert_int_equal(errno, ENOENT);
    tmp_dir_remove(d);
}

static void test_write_file_atomic(void **state)
{
    char *d = tmp_dir_make("common-io"), p[512], got[64] = "";
    dlt_err err = DLT_ERR_INIT;
    struct stat st;
    FILE *f;
    (void)state;
    snprintf(p, sizeof(p), "%s/out", d);
    _write(p, "old contents");
    assert_int_equal(dlt_write_file_atomic(p, "new", 3, 0600, dlt_err_fresh(&err)), 0);
    f = fopen(p, "r");
    assert_non_null(f);
    assert_int_equal(fread(got, 1, sizeof(got) - 1, f), 3);
    fclose(f);
    assert_string_equal(got, "new");
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600); /* the new file's mode, not the old one's */
    {
        char cmd[600];
        snprintf(cmd, sizeof(cmd), "test \"$(ls -A '%s')\" = out", d); /* no temporary file left */
        assert_int_equal(system(cmd), 0);
    }
    /* into a missing folder: refused, naming the temporary file it could not make */
    snprintf(p, sizeof(p), "%s/no/out", d);
    assert_int_equal(dlt_write_file_atomic(p, "x", 1, 0644, dlt_err_fresh(&err)), -ENOENT);
    _expect_msg(&err, "cannot write ");
    _expect_msg(&err, "/no/out.tmp.");
    tmp_dir_remove(d);
}

static void test_write_all_read_full_pipe(void **state)
{
    enum { N = 200000 }; /* more than a pipe holds: short writes and reads on both sides */
    int fds[2];
    pid_t pid;
    uint8_t *buf = malloc(N + 10), *back = malloc(N + 10);
    (void)state;
    for (size_t i = 0; i < N; i++)
        buf[i] = (uint8_t)(i % 251);
    assert_int_equal(pipe(fds), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        _exit(dlt_write_all(fds[1], buf, N) == 0 ? 0 : 1);
    }
    close(fds[1]);
    assert_int_equal(dlt_read_full(fds[0], back, N + 10), N); /* all of it, then the end */
    assert_memory_equal(back, buf, N);
    close(fds[0]);
    {
        int status;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    /* writing into a pipe nobody reads: -1 with EPIPE (SIGPIPE ignored) */
    assert_int_equal(pipe(fds), 0);
    close(fds[0]);
    signal(SIGPIPE, SIG_IGN);
    errno = 0;
    assert_int_equal(dlt_write_all(fds[1], buf, 10), -1);
    assert_int_equal(errno, EPIPE);
    close(fds[1]);
    free(buf);
    free(back);
}

static void test_progress_format(void **state)
{
    char b[256];
    (void)state;
    /* 25 of 100 in 10 s: 2.5/s, 75 left at 2.5/s is 30 s */
    dlt_progress_format(b, sizeof(b), "packing", "images", 25, 100, 10.0, 0);
    assert_string_equal(b, "dltrain: packing 25/100 images (25.0%), 2.5 images/s, 0:00:30 left");
    /* 1000 of 37000 in 100 s: 10/s, 36000 left is one hour */
    dlt_progress_format(b, sizeof(b), "packing", "images", 1000, 37000, 100.0, 0);
    assert_string_equal(b, "dltrain: packing 1000/37000 images (2.7%), 10.0 images/s, 1:00:00 left");
    /* nothing done yet: no rate, the time left unknown */
    dlt_progress_format(b, sizeof(b), "indexing", "files", 0, 50, 3.0, 0);
    assert_string_equal(b, "dltrain: indexing 0/50 files (0.0%), 0.0 files/s, ? left");
    /* finished: the time it took */
    dlt_progress_format(b, sizeof(b), "packing", "images", 100, 100, 3725.0, 1);
    assert_string_equal(b, "dltrain: packing 100/100 images (100.0%), 0.0 images/s, 1:02:05 elapsed");
    /* no total */
    dlt_progress_format(b, sizeof(b), "scanning", "files", 42, 0, 61.0, 0);
    assert_string_equal(b, "dltrain: scanning 42 files, 0.7 files/s, 0:01:01 elapsed");
}

static size_t _slurp(FILE *f, char *buf, size_t len)
{
    size_t n;
    fflush(f);
    rewind(f);
    n = fread(buf, 1, len - 1, f);
    buf[n] = '\0';
    return n;
}

static void test_progress_lines(void **state)
{
    dlt_progress p;
    char out[2048];
    FILE *f = tmpfile();
    (void)state;
    assert_non_null(f);
    /* not a terminal: plain lines, one per interval, none before the first interval */
    setenv("DLT_PROGRESS_SECONDS", "0.05", 1);
    dlt_progress_start(&p, f, 0, "packing", "images", 10);
    assert_int_equal(p.mode, DLT_PROGRESS_LINES);
    dlt_progress_update(&p, 1);
    assert_int_equal(_slurp(f, out, sizeof(out)), 0);
    usleep(80000);
    dlt_progress_update(&p, 4);
    _slurp(f, out, sizeof(out));
    assert_non_null(strstr(out, "dltrain: packing 4/10 images (40.0%)"));
    assert_non_null(strstr(out, " left\n"));
    dlt_progress_end(&p, 10); /* a line was printed: the last one too */
    _slurp(f, out, sizeof(out));
    assert_non_null(strstr(out, "dltrain: packing 10/10 images (100.0%)"));
    assert_non_null(strstr(out, " elapsed\n"));
    fclose(f);
    /* a short command prints nothing, even at its end */
    f = tmpfile();
    setenv("DLT_PROGRESS_SECONDS", "100", 1);
    dlt_progress_start(&p, f, 0, "packing", "images", 10);
    dlt_progress_update(&p, 5);
    dlt_progress_end(&p, 10);
    assert_int_equal(_slurp(f, out, sizeof(out)), 0);
    fclose(f);
    /* quiet: nothing even after the interval */
    f = tmpfile();
    setenv("DLT_PROGRESS_SECONDS", "0.01", 1);
    dlt_progress_start(&p, f, 1, "packing", "images", 10);
    usleep(30000);
    dlt_progress_update(&p, 5);
    dlt_progress_end(&p, 10);
    assert_int_equal(_slurp(f, out, sizeof(out)), 0);
    fclose(f);
    /* a value that is not a number of seconds in range: said, and the default used */
    f = tmpfile();
    setenv("DLT_PROGRESS_SECONDS", "0", 1);
    dlt_progress_start(&p, f, 0, "packing", "images", 10);
    _slurp(f, out, sizeof(out));
    assert_non_null(strstr(out, "DLT_PROGRESS_SECONDS=0 is not a number of seconds in [0.01, 86400]"));
    assert_true(p.every > 0.01);
    fclose(f);
    unsetenv("DLT_PROGRESS_SECONDS");
}

static void test_affinity_list(void **state)
{
    cpu_set_t all, one;
    char list[256];
    int first = -1, second = -1, n = 0;
    (void)state;
    assert_int_equal(sched_getaffinity(0, sizeof(all), &all), 0);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &all)) {
            n++;
            if (first < 0)
                first = c;
            else if (second < 0)
                second = c;
        }
    assert_int_equal(dlt_affinity_list(list, sizeof(list)), n);
    /* one CPU: its number alone */
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    assert_int_equal(sched_setaffinity(0, sizeof(one), &one), 0);
    assert_int_equal(dlt_affinity_list(list, sizeof(list)), 1);
    {
        char want[16];
        snprintf(want, sizeof(want), "%d", first);
        assert_string_equal(list, want);
    }
    if (second >= 0) { /* two: a range when adjacent, else a list */
        char want[32];
        CPU_SET(second, &one);
        assert_int_equal(sched_setaffinity(0, sizeof(one), &one), 0);
        assert_int_equal(dlt_affinity_list(list, sizeof(list)), 2);
        snprintf(want, sizeof(want), second == first + 1 ? "%d-%d" : "%d,%d", first, second);
        assert_string_equal(list, want);
        /* a buffer too small: cut, never overrun, the count still whole */
        memset(list, 'Z', sizeof(list));
        assert_int_equal(dlt_affinity_list(list, 2), 2);
        assert_int_equal(list[1], '\0');
        assert_int_equal(list[2], 'Z');
    }
    assert_int_equal(sched_setaffinity(0, sizeof(all), &all), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32c),
        cmocka_unit_test(test_check_parent_dir),
        cmocka_unit_test(test_open_regular),
        cmocka_unit_test(test_check_path),
        cmocka_unit_test(test_mkdirs),
        cmocka_unit_test(test_write_file_atomic),
        cmocka_unit_test(test_write_all_read_full_pipe),
        cmocka_unit_test(test_progress_format),
        cmocka_unit_test(test_progress_lines),
        cmocka_unit_test(test_affinity_list),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
