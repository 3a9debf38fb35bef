/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of plugin/step_dir.c: the step directory root makes and removes, with a user's tree in
 * it (nested folders, links to outside, FIFOs, unreadable folders) and a stale one of the same id;
 * %n in site paths expanded only to plain node names. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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

#include "plugin/step_dir.h"

typedef struct {
    char base[64];
    char top[PATH_MAX];    /* plays topo_dir */
    char victim[PATH_MAX]; /* outside the step directory: must survive everything */
} fixture;

static void _write_file(const char *path, size_t bytes)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (size_t i = 0; i < bytes; i++)
        fputc('x', f);
    assert_int_equal(fclose(f), 0);
}

static int _exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

static int setup(void **state)
{
    fixture *fx = calloc(1, sizeof(*fx));
    char base[] = "/tmp/dlt-step-dir-XXXXXX", path[PATH_MAX + 32];
    if (!fx || !mkdtemp(base))
        return -1;
    snprintf(fx->base, sizeof(fx->base), "%s", base);
    snprintf(fx->top, sizeof(fx->top), "%s/topo", base);
    snprintf(fx->victim, sizeof(fx->victim), "%s/victim", base);
    if (mkdir(fx->top, 0755) != 0 || mkdir(fx->victim, 0755) != 0)
        return -1;
    snprintf(path, sizeof(path), "%s/keep.txt", fx->victim);
    _write_file(path, 10);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    fixture *fx = *state;
    char cmd[PATH_MAX * 2 + 64];
    snprintf(cmd, sizeof(cmd), "chmod -R u+rwx '%s' 2>/dev/null; rm -rf '%s'", fx->base, fx->base);
    if (system(cmd) != 0)
        fprintf(stderr, "cleanup of %s failed\n", fx->base);
    free(fx);
    return 0;
}

/* What a user may leave in the step directory: nested folders with data, links to a folder and a
 * file outside, a FIFO, a folder with no permissions at all. */
static void _user_tree(const fixture *fx, const char *step)
{
    char p[PATH_MAX + 128], t[PATH_MAX + 256];
    snprintf(p, sizeof(p), "%s/%s/a", fx->top, step);
    assert_int_equal(mkdir(p, 0755), 0);
    snprintf(p, sizeof(p), "%s/%s/a/b", fx->top, step);
    assert_int_equal(mkdir(p, 0755), 0);
    snprintf(p, sizeof(p), "%s/%s/a/b/c", fx->top, step);
    assert_int_equal(mkdir(p, 0755), 0);
    snprintf(p, sizeof(p), "%s/%s/a/b/c/data.bin", fx->top, step);
    _write_file(p, 1 << 20);
    snprintf(p, sizeof(p), "%s/%s/a/to_victim", fx->top, step);
    assert_int_equal(symlink(fx->victim, p), 0);
    snprintf(p, sizeof(p), "%s/%s/a/b/to_file", fx->top, step);
    snprintf(t, sizeof(t), "%s/keep.txt", fx->victim);
    assert_int_equal(symlink(t, p), 0);
    snprintf(p, sizeof(p), "%s/%s/fifo", fx->top, step);
    assert_int_equal(mkfifo(p, 0600), 0);
    snprintf(p, sizeof(p), "%s/%s/locked", fx->top, step);
    assert_int_equal(mkdir(p, 0755), 0);
    snprintf(t, sizeof(t), "%s/inside", p);
    _write_file(t, 1);
    /* Root (slurmstepd) passes permissions; a test run by a user keeps the folder readable. */
    if (getuid() == 0)
        assert_int_equal(chmod(p, 0), 0);
}

static void _victim_intact(const fixture *fx)
{
    char p[PATH_MAX + 32];
    struct stat st;
    snprintf(p, sizeof(p), "%s/keep.txt", fx->victim);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_size, 10);
}

static void test_user_tree_removed_links_not_followed(void **state)
{
    fixture *fx = *state;
    char file[PATH_MAX], p[PATH_MAX + 32];
    dlt_err err = DLT_ERR_INIT;
    int stale = -1;
    assert_int_equal(dlt_step_dir_create(fx->top, "7.0", "nccl_topo.xml", "<system/>", 9, getuid(), getgid(), file,
                                         sizeof(file), &stale, dlt_err_fresh(&err)),
                     0);
    assert_int_equal(stale, 0);
    _user_tree(fx, "7.0");
    assert_int_equal(dlt_step_dir_remove(fx->top, "7.0", dlt_err_fresh(&err)), 0);
    snprintf(p, sizeof(p), "%s/7.0", fx->top);
    assert_false(_exists(p));
    _victim_intact(fx);
}

static void test_stale_directory_of_same_id_replaced(void **state)
{
    fixture *fx = *state;
    char file[PATH_MAX], p[PATH_MAX + 32], buf[16] = "";
    dlt_err err = DLT_ERR_INIT;
    int stale = 0, fd;
    ssize_t n;
    snprintf(p, sizeof(p), "%s/9.1", fx->top);
    assert_int_equal(mkdir(p, 0700), 0);
    _user_tree(fx, "9.1");
    assert_int_equal(dlt_step_dir_create(fx->top, "9.1", "nccl_topo.xml", "<system/>", 9, getuid(), getgid(), file,
                                         sizeof(file), &stale, dlt_err_fresh(&err)),
                     0);
    assert_int_equal(stale, 1);
    fd = open(file, O_RDONLY);
    assert_true(fd >= 0);
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    assert_int_equal(n, 9);
    assert_string_equal(buf, "<system/>");
    snprintf(p, sizeof(p), "%s/9.1/a", fx->top);
    assert_false(_exists(p)); /* nothing of the old tree is left */
    _victim_intact(fx);
    assert_int_equal(dlt_step_dir_remove(fx->top, "9.1", dlt_err_fresh(&err)), 0);
}

static void test_link_at_step_path_removed_not_followed(void **state)
{
    fixture *fx = *state;
    dlt_err err = DLT_ERR_INIT;
    char p[PATH_MAX + 32];
    snprintf(p, sizeof(p), "%s/3.0", fx->top);
    assert_int_equal(symlink(fx->victim, p), 0);
    assert_int_equal(dlt_step_dir_remove(fx->top, "3.0", dlt_err_fresh(&err)), 0);
    assert_false(_exists(p));
    _victim_intact(fx);
}

static void test_too_deep_is_reported_not_recursed_forever(void **state)
{
    fixture *fx = *state;
    dlt_err err = DLT_ERR_INIT;
    char p[PATH_MAX + 32];
    int dfd, next;
    snprintf(p, sizeof(p), "%s/5.0", fx->top);
    assert_int_equal(mkdir(p, 0700), 0);
    dfd = open(p, O_RDONLY | O_DIRECTORY);
    assert_true(dfd >= 0);
    for (int i = 0; i < DLT_STEP_DIR_MAX_DEPTH + 4; i++) {
        assert_int_equal(mkdirat(dfd, "d", 0700), 0);
        next = openat(dfd, "d", O_RDONLY | O_DIRECTORY);
        close(dfd);
        assert_true(next >= 0);
        dfd = next;
    }
    close(dfd);
    assert_int_not_equal(dlt_step_dir_remove(fx->top, "5.0", dlt_err_fresh(&err)), 0);
    assert_non_null(strstr(err.msg, "deeper than the limit"));
    assert_non_null(strstr(err.msg, "5.0"));
}

static void test_expand_node(void **state)
{
    char out[64];
    (void)state;
    assert_int_equal(dlt_expand_node("/run/%n/dlt", "n12", out, sizeof(out)), 0);
    assert_string_equal(out, "/run/n12/dlt");
    assert_int_equal(dlt_expand_node("/run/dlt", "n1", out, sizeof(out)), 0);
    assert_string_equal(out, "/run/dlt");
    assert_int_equal(dlt_expand_node("/run/%n", "../etc", out, sizeof(out)), -1);
    assert_int_equal(dlt_expand_node("/run/%n", "..", out, sizeof(out)), -1);
    assert_int_equal(dlt_expand_node("/run/%n", "", out, sizeof(out)), -1);
    assert_int_equal(dlt_expand_node("/a/very/long/path/%n", "node-name-that-is-long-enough", out, 20), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_expand_node),
        cmocka_unit_test_setup_teardown(test_user_tree_removed_links_not_followed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stale_directory_of_same_id_replaced, setup, teardown),
        cmocka_unit_test_setup_teardown(test_link_at_step_path_removed_not_followed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_too_deep_is_reported_not_recursed_forever, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
