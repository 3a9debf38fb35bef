/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of plugin/step_dir.c: the step directory root makes and removes, with a user's tree in
 * it (nested folders, links to outside, FIFOs, unreadable folders, trees of any depth) and a stale one
 * of the same id (replaced, never blocking); the folder is root's, readable by the job's group;
 * names escaped for logs; %n in site paths expanded only to plain node names. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
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

/* The step folder of step with a one-line topology file, as slurmstepd makes it: file (PATH_MAX)
 * receives the file's path, *stale whether a left-over folder was replaced, note (NOTE_LEN) what
 * was said about it. */
#define NOTE_LEN 512
static int _create(const fixture *fx, const char *step, gid_t gid, char *file, int *stale, char *note, dlt_err *err)
{
    int held = -1, rc = dlt_step_dir_create(fx->top, step, "nccl_topo.xml", "<system/>", 9, gid, file, PATH_MAX, stale,
                                            note, NOTE_LEN, &held, dlt_err_fresh(err));
    if (held >= 0)
        close(held); /* these tests remove by name (-1); the lock's own tests keep it */
    return rc;
}

static void test_user_tree_removed_links_not_followed(void **state)
{
    fixture *fx = *state;
    char file[PATH_MAX], p[PATH_MAX + 32], note[NOTE_LEN];
    dlt_err err = DLT_ERR_INIT;
    int stale = -1;
    assert_int_equal(_create(fx, "7.0", getgid(), file, &stale, note, &err), 0);
    assert_int_equal(stale, 0);
    _user_tree(fx, "7.0");
    assert_int_equal(dlt_step_dir_remove(fx->top, "7.0", -1, dlt_err_fresh(&err)), 0);
    snprintf(p, sizeof(p), "%s/7.0", fx->top);
    assert_false(_exists(p));
    _victim_intact(fx);
}

static void test_stale_directory_of_same_id_replaced(void **state)
{
    fixture *fx = *state;
    char file[PATH_MAX], p[PATH_MAX + 32], buf[16] = "", note[NOTE_LEN];
    dlt_err err = DLT_ERR_INIT;
    int stale = 0, fd;
    ssize_t n;
    snprintf(p, sizeof(p), "%s/9.1", fx->top);
    assert_int_equal(mkdir(p, 0700), 0);
    _user_tree(fx, "9.1");
    assert_int_equal(_create(fx, "9.1", getgid(), file, &stale, note, &err), 0);
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
    assert_int_equal(dlt_step_dir_remove(fx->top, "9.1", -1, dlt_err_fresh(&err)), 0);
}

static void test_link_at_step_path_removed_not_followed(void **state)
{
    fixture *fx = *state;
    dlt_err err = DLT_ERR_INIT;
    char p[PATH_MAX + 32];
    snprintf(p, sizeof(p), "%s/3.0", fx->top);
    assert_int_equal(symlink(fx->victim, p), 0);
    assert_int_equal(dlt_step_dir_remove(fx->top, "3.0", -1, dlt_err_fresh(&err)), 0);
    assert_false(_exists(p));
    _victim_intact(fx);
}

/* A chain of depth folders under topo/step, each name long, so the whole path is far longer than
 * PATH_MAX: what a task may make to outlast a recursive or depth-limited removal. A name with a
 * newline at the bottom. */
static void _deep_chain(const fixture *fx, const char *step, int depth)
{
    char p[PATH_MAX + 32], name[101];
    int dfd, next;
    memset(name, 'd', 100);
    name[100] = '\0';
    snprintf(p, sizeof(p), "%s/%s", fx->top, step);
    dfd = open(p, O_RDONLY | O_DIRECTORY);
    assert_true(dfd >= 0);
    for (int i = 0; i < depth; i++) {
        assert_int_equal(mkdirat(dfd, name, 0700), 0);
        next = openat(dfd, name, O_RDONLY | O_DIRECTORY);
        close(dfd);
        assert_true(next >= 0);
        dfd = next;
    }
    assert_int_equal(mkdirat(dfd, "forged\ndltrain: line", 0700), 0);
    next = openat(dfd, "forged\ndltrain: line", O_RDONLY | O_DIRECTORY);
    assert_true(next >= 0);
    assert_int_equal(symlinkat(fx->victim, next, "to_victim"), 0);
    close(next);
    close(dfd);
}

static void test_any_depth_removed(void **state)
{
    fixture *fx = *state;
    dlt_err err = DLT_ERR_INIT;
    char p[PATH_MAX + 32];
    snprintf(p, sizeof(p), "%s/5.0", fx->top);
    assert_int_equal(mkdir(p, 0700), 0);
    _deep_chain(fx, "5.0", 200); /* 200 levels: 20 kB of path */
    if (dlt_step_dir_remove(fx->top, "5.0", -1, dlt_err_fresh(&err)) != 0)
        fail_msg("a 200-level tree not removed: %s", err.msg);
    assert_false(_exists(p));
    _victim_intact(fx);
}

/* A folder of the same id left with a deep tree (an earlier step whose slurmstepd died) does not
 * block the step: it is replaced. */
static void test_deep_stale_does_not_block(void **state)
{
    fixture *fx = *state;
    char file[PATH_MAX], p[PATH_MAX + 32], note[NOTE_LEN];
    dlt_err err = DLT_ERR_INIT;
    int stale = 0;
    snprintf(p, sizeof(p), "%s/6.0", fx->top);
    assert_int_equal(mkdir(p, 0700), 0);
    _deep_chain(fx, "6.0", 80);
    if (_create(fx, "6.0", getgid(), file, &stale, note, &err) != 0)
        fail_msg("a stale folder with an 80-level tree blocks the step: %s", err.msg);
    assert_int_equal(stale, 1);
    assert_int_equal(dlt_step_dir_remove(fx->top, "6.0", -1, dlt_err_fresh(&err)), 0);
    _victim_intact(fx);
    /* Nothing else left in topo_dir (no renamed-aside remains). */
    snprintf(p, sizeof(p), "%s", fx->top);
    {
        int n = 0;
        DIR *d = opendir(p);
        struct dirent *e;
        assert_non_null(d);
        while ((e = readdir(d)) != NULL)
            n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
        closedir(d);
        assert_int_equal(n, 0);
    }
}

/* The step folder is not the user's: root keeps it and the file, the job's group may read them, so
 * a task cannot put anything in root's topo_dir (a tmpfs under /run) nor leave it behind. */
static void test_step_dir_not_user_writable(void **state)
{
    fixture *fx = *state;
    char file[PATH_MAX], p[PATH_MAX + 32], note[NOTE_LEN];
    dlt_err err = DLT_ERR_INIT;
    struct stat st;
    int stale = 0;
    gid_t gid = getuid() == 0 ? 65534 : getgid();
    assert_int_equal(_create(fx, "8.0", gid, file, &stale, note, &err), 0);
    snprintf(p, sizeof(p), "%s/8.0", fx->top);
    assert_int_equal(lstat(p, &st), 0);
    assert_int_equal(st.st_uid, getuid());
    assert_int_equal(st.st_gid, gid);
    assert_int_equal(st.st_mode & 07777, 0750);
    assert_int_equal(lstat(file, &st), 0);
    assert_int_equal(st.st_uid, getuid());
    assert_int_equal(st.st_gid, gid);
    assert_int_equal(st.st_mode & 07777, 0640);
    assert_int_equal(dlt_step_dir_remove(fx->top, "8.0", -1, dlt_err_fresh(&err)), 0);
}

static int _entries(const char *path)
{
    int n = 0;
    DIR *d = opendir(path);
    struct dirent *e;
    assert_non_null(d);
    while ((e = readdir(d)) != NULL)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return n;
}

static const char *g_sought;
static int g_found;
static int _seek(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st, (void)type;
    if (!strcmp(path + ftw->base, g_sought))
        g_found++;
    return 0;
}

/* How many entries named name are under root (links not followed). */
static int _count_named(const char *root, const char *name)
{
    g_sought = name;
    g_found = 0;
    assert_int_equal(nftw(root, _seek, 16, FTW_PHYS), 0);
    return g_found;
}

static void _mkdir_owned(const char *path, mode_t mode, uid_t uid)
{
    assert_int_equal(mkdir(path, 0700), 0);
    assert_int_equal(chown(path, uid, uid), 0);
    assert_int_equal(chmod(path, mode), 0);
}

/* A stale folder of an earlier version is its user's (uid 65534): the user may have moved into it a
 * sticky 1777 folder of theirs in which another user (65533) keeps a 0700 folder. Root removes what
 * the stale folder's owner could remove, never the other user's folder: that stays, out of reach
 * (in root's 0700 work folder), and the note names it. */
static void test_foreign_folder_in_stale_tree_kept(void **state)
{
    fixture *fx = *state;
    char file[PATH_MAX], p[PATH_MAX + 300], note[NOTE_LEN];
    dlt_err err = DLT_ERR_INIT;
    struct stat st;
    int stale = 0, works = 0;
    DIR *d;
    struct dirent *e;
    if (getuid() != 0)
        skip(); /* other owners need root */
    snprintf(p, sizeof(p), "%s/4.0", fx->top);
    _mkdir_owned(p, 0700, 65534);
    snprintf(p, sizeof(p), "%s/4.0/mine", fx->top);
    _mkdir_owned(p, 0755, 65534);
    snprintf(p, sizeof(p), "%s/4.0/mine/sticky", fx->top);
    _mkdir_owned(p, 01777, 65534);
    snprintf(p, sizeof(p), "%s/4.0/mine/sticky/theirs", fx->top);
    _mkdir_owned(p, 0700, 65533);
    snprintf(p, sizeof(p), "%s/4.0/mine/sticky/theirs/inner", fx->top);
    _mkdir_owned(p, 0700, 65533);
    snprintf(p, sizeof(p), "%s/4.0/mine/sticky/theirs/inner/secret", fx->top);
    _write_file(p, 3);
    assert_int_equal(chown(p, 65533, 65533), 0);
    assert_int_equal(_create(fx, "4.0", getgid(), file, &stale, note, &err), 0);
    assert_int_equal(stale, 1);
    if (!strstr(note, "at 'theirs'") || !strstr(note, "uid 65533") || !strstr(note, "never entered"))
        fail_msg("note: %s", note);
    assert_int_equal(_count_named(fx->top, "secret"), 1);
    assert_int_equal(_count_named(fx->top, "inner"), 1);
    /* What is left is in a folder of root's that no one else can enter. */
    d = opendir(fx->top);
    assert_non_null(d);
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, ".stale-4.0-", 11))
            continue;
        works++;
        snprintf(p, sizeof(p), "%s/%s", fx->top, e->d_name);
        assert_int_equal(lstat(p, &st), 0);
        assert_int_equal(st.st_uid, 0);
        assert_int_equal(st.st_mode & 07777, 0700);
    }
    closedir(d);
    assert_int_equal(works, 1);
    assert_int_equal(_entries(fx->top), 2);
    assert_int_equal(dlt_step_dir_remove(fx->top, "4.0", -1, dlt_err_fresh(&err)), 0);
}

/* Root's own step folder is walked the same way: a folder of another owner in it is never entered. */
static void test_foreign_folder_in_root_step_dir_kept(void **state)
{
    fixture *fx = *state;
    char file[PATH_MAX], p[PATH_MAX + 64], note[NOTE_LEN];
    dlt_err err = DLT_ERR_INIT;
    int stale = 0;
    if (getuid() != 0)
        skip();
    assert_int_equal(_create(fx, "4.1", getgid(), file, &stale, note, &err), 0);
    snprintf(p, sizeof(p), "%s/4.1/theirs", fx->top);
    _mkdir_owned(p, 0700, 65533);
    snprintf(p, sizeof(p), "%s/4.1/theirs/secret", fx->top);
    _write_file(p, 3);
    assert_int_equal(dlt_step_dir_remove(fx->top, "4.1", -1, dlt_err_fresh(&err)), -EPERM);
    if (!strstr(err.msg, "at 'theirs'") || !strstr(err.msg, "what is left is in"))
        fail_msg("message: %s", err.msg);
    assert_int_equal(_count_named(fx->top, "secret"), 1);
}

/* The names the walk lifts folders to cannot be taken in advance: a stale tree full of them (each
 * holding a folder, so that every one of them needs a lift) is removed all the same. */
static void test_lift_names_taken_in_advance(void **state)
{
    fixture *fx = *state;
    char file[PATH_MAX], p[PATH_MAX + 64], note[NOTE_LEN];
    dlt_err err = DLT_ERR_INIT;
    int stale = 0;
    snprintf(p, sizeof(p), "%s/2.0", fx->top);
    assert_int_equal(mkdir(p, 0700), 0);
    for (int i = 0; i < 256; i++) {
        snprintf(p, sizeof(p), "%s/2.0/.dlt-lifted-%d", fx->top, i);
        assert_int_equal(mkdir(p, 0700), 0);
        snprintf(p, sizeof(p), "%s/2.0/.dlt-lifted-%d/x", fx->top, i);
        assert_int_equal(mkdir(p, 0700), 0);
        snprintf(p, sizeof(p), "%s/2.0/lifted-%d", fx->top, i);
        assert_int_equal(mkdir(p, 0700), 0);
        snprintf(p, sizeof(p), "%s/2.0/lifted-%d/x", fx->top, i);
        assert_int_equal(mkdir(p, 0700), 0);
    }
    assert_int_equal(_create(fx, "2.0", getgid(), file, &stale, note, &err), 0);
    assert_int_equal(stale, 1);
    if (note[0])
        fail_msg("stale tree not removed: %s", note);
    assert_int_equal(_entries(fx->top), 1);
    snprintf(p, sizeof(p), "%s/2.0", fx->top);
    assert_int_equal(_entries(p), 2); /* the topology file and the step's lock */
    assert_int_equal(dlt_step_dir_remove(fx->top, "2.0", -1, dlt_err_fresh(&err)), 0);
    assert_int_equal(_entries(fx->top), 0);
}

/* topo_dir is made 0755 whatever the umask, and one tasks cannot pass through (0750, 0700) is
 * refused naming the fix: else NCCL cannot open NCCL_TOPO_FILE and only warns. */
static void test_topo_dir_searchable_by_tasks(void **state)
{
    fixture *fx = *state;
    char p[PATH_MAX + 32];
    dlt_err err = DLT_ERR_INIT;
    struct stat st;
    mode_t old = umask(077);
    int rc;
    snprintf(p, sizeof(p), "%s/made", fx->base);
    rc = dlt_topo_dir_check(p, dlt_err_fresh(&err));
    umask(old);
    assert_int_equal(rc, getuid() == 0 ? 0 : -EPERM); /* a user's is refused: not root's */
    assert_int_equal(lstat(p, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0755);
    if (getuid() != 0)
        skip(); /* a root-owned topo_dir needs root */
    for (int i = 0; i < 2; i++) {
        snprintf(p, sizeof(p), "%s/closed%d", fx->base, i);
        assert_int_equal(mkdir(p, 0700), 0);
        assert_int_equal(chmod(p, i ? 0750 : 0700), 0);
        assert_int_equal(dlt_topo_dir_check(p, dlt_err_fresh(&err)), -EPERM);
        if (!strstr(err.msg, "searchable by others") || !strstr(err.msg, "chmod o+x"))
            fail_msg("message: %s", err.msg);
        assert_int_equal(chmod(p, 0711), 0);
        assert_int_equal(dlt_topo_dir_check(p, dlt_err_fresh(&err)), 0);
    }
}

/* Above topo_dir, every folder is root's and writable by nobody else unless sticky, and every link
 * on the way is root's: a user who made /tmp/n1 first (topo_dir=/tmp/%n/dltrain) cannot point
 * root's step folders anywhere. Needs root (chown). */
static void test_topo_dir_parents_trusted(void **state)
{
    fixture *fx = *state;
    char p[PATH_MAX + 64], q[PATH_MAX + 64], l[PATH_MAX + 64];
    dlt_err err = DLT_ERR_INIT;
    if (getuid() != 0)
        skip();
    /* a user's folder on the way */
    snprintf(p, sizeof(p), "%s/users", fx->base);
    assert_int_equal(mkdir(p, 0755), 0);
    assert_int_equal(chown(p, 65534, 65534), 0);
    snprintf(q, sizeof(q), "%s/users/dltrain", fx->base);
    assert_int_equal(dlt_topo_dir_check(q, dlt_err_fresh(&err)), -EPERM);
    if (!strstr(err.msg, "'users' on its way is not root's") || !strstr(err.msg, "uid 65534"))
        fail_msg("message: %s", err.msg);
    assert_false(_exists(q)); /* nothing made inside it */
    /* root's, group-writable: refused; sticky and world-writable (as /tmp): accepted */
    snprintf(p, sizeof(p), "%s/shared", fx->base);
    assert_int_equal(mkdir(p, 0755), 0);
    assert_int_equal(chmod(p, 0775), 0);
    snprintf(q, sizeof(q), "%s/shared/dltrain", fx->base);
    assert_int_equal(dlt_topo_dir_check(q, dlt_err_fresh(&err)), -EPERM);
    assert_non_null(strstr(err.msg, "mode 0775"));
    assert_int_equal(chmod(p, 01777), 0);
    assert_int_equal(dlt_topo_dir_check(q, dlt_err_fresh(&err)), 0);
    /* a root's link on the way is followed; a user's is refused */
    snprintf(l, sizeof(l), "%s/via", fx->base);
    assert_int_equal(symlink(p, l), 0);
    snprintf(q, sizeof(q), "%s/via/dltrain", fx->base);
    if (dlt_topo_dir_check(q, dlt_err_fresh(&err)) != 0)
        fail_msg("a root's link on the way: %s", err.msg);
    assert_int_equal(lchown(l, 65534, 65534), 0);
    assert_int_equal(dlt_topo_dir_check(q, dlt_err_fresh(&err)), -EPERM);
    assert_non_null(strstr(err.msg, "the link 'via' on its way is not root's"));
    /* a relative link, root's */
    snprintf(l, sizeof(l), "%s/rel", fx->base);
    assert_int_equal(symlink("shared", l), 0);
    snprintf(q, sizeof(q), "%s/rel/dltrain", fx->base);
    if (dlt_topo_dir_check(q, dlt_err_fresh(&err)) != 0)
        fail_msg("a relative root's link on the way: %s", err.msg);
    snprintf(q, sizeof(q), "%s/shared/../shared/dltrain", fx->base);
    assert_int_equal(dlt_topo_dir_check(q, dlt_err_fresh(&err)), -EINVAL);
}

/* Names from a user's tree reach slurmd's log and other users' terminals only escaped. */
static void test_escape_name(void **state)
{
    char out[64];
    (void)state;
    dlt_name_escape("plain-name_1.0", out, sizeof(out));
    assert_string_equal(out, "plain-name_1.0");
    dlt_name_escape("forged\ndltrain: line", out, sizeof(out));
    assert_string_equal(out, "forged\\x0adltrain: line");
    dlt_name_escape("\x1b[31mred\x7f\\", out, sizeof(out));
    assert_string_equal(out, "\\x1b[31mred\\x7f\\\\");
    dlt_name_escape("caf\xc3\xa9", out, sizeof(out));
    assert_string_equal(out, "caf\\xc3\\xa9");
    dlt_name_escape("\n\n\n\n\n\n", out, 12); /* never a cut escape: whole ones, then "..." */
    assert_string_equal(out, "\\x0a\\x0a...");
    dlt_name_escape("abcdefghijklmnop", out, 8);
    assert_string_equal(out, "abcd...");
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

/* A folder of the same id whose lock a live slurmstepd holds (the same job.step from another slurmd
 * of this host, topo_dir without %n) is refused and left whole; once its holder is gone (a crash),
 * the same folder is a leftover and is replaced. The lock file is root's alone (0600). */
static void test_live_step_folder_not_taken(void **state)
{
    fixture *fx = *state;
    char file[PATH_MAX], file2[PATH_MAX], p[PATH_MAX + 32], note[NOTE_LEN];
    dlt_err err = DLT_ERR_INIT;
    int stale = -1, held = -1, held2 = -1;
    struct stat st;
    assert_int_equal(dlt_step_dir_create(fx->top, "11.0", "nccl_topo.xml", "<system/>", 9, getgid(), file, PATH_MAX,
                                         &stale, note, NOTE_LEN, &held, dlt_err_fresh(&err)),
                     0);
    assert_true(held >= 0);
    snprintf(p, sizeof(p), "%s/11.0/" DLT_STEP_DIR_LOCK, fx->top);
    assert_int_equal(lstat(p, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    assert_int_equal(dlt_step_dir_create(fx->top, "11.0", "nccl_topo.xml", "<other/>", 8, getgid(), file2, PATH_MAX,
                                         &stale, note, NOTE_LEN, &held2, dlt_err_fresh(&err)),
                     -EBUSY);
    assert_int_equal(held2, -1);
    assert_non_null(strstr(err.msg, "a live step of the same id"));
    assert_non_null(strstr(err.msg, "%n"));
    assert_int_equal(stat(file, &st), 0); /* the live step's file is still its own */
    assert_int_equal(st.st_size, 9);
    close(held); /* its slurmstepd is gone: the folder is a leftover now */
    assert_int_equal(dlt_step_dir_create(fx->top, "11.0", "nccl_topo.xml", "<other/>", 8, getgid(), file2, PATH_MAX,
                                         &stale, note, NOTE_LEN, &held2, dlt_err_fresh(&err)),
                     0);
    assert_int_equal(stale, 1);
    assert_int_equal(stat(file2, &st), 0);
    assert_int_equal(st.st_size, 8);
    assert_int_equal(dlt_step_dir_remove(fx->top, "11.0", held2, dlt_err_fresh(&err)), 0);
    snprintf(p, sizeof(p), "%s/11.0", fx->top);
    assert_false(_exists(p));
}

/* At the step's end only the folder holding this step's lock is removed: another one put at the name
 * meanwhile is left, said (-ESTALE). */
static void test_remove_only_own_folder(void **state)
{
    fixture *fx = *state;
    char file[PATH_MAX], p[PATH_MAX + 32], q[PATH_MAX + 32], note[NOTE_LEN];
    dlt_err err = DLT_ERR_INIT;
    int stale = -1, held = -1;
    assert_int_equal(dlt_step_dir_create(fx->top, "13.0", "nccl_topo.xml", "<system/>", 9, getgid(), file, PATH_MAX,
                                         &stale, note, NOTE_LEN, &held, dlt_err_fresh(&err)),
                     0);
    snprintf(p, sizeof(p), "%s/13.0", fx->top);
    snprintf(q, sizeof(q), "%s/13.0-mine", fx->top);
    assert_int_equal(rename(p, q), 0);
    assert_int_equal(mkdir(p, 0700), 0);
    assert_int_equal(dlt_step_dir_remove(fx->top, "13.0", held, dlt_err_fresh(&err)), -ESTALE);
    assert_non_null(strstr(err.msg, "no longer the folder this step made"));
    assert_true(_exists(p));
    assert_int_equal(dlt_step_dir_remove(fx->top, "13.0", -1, dlt_err_fresh(&err)), 0);
    assert_int_equal(dlt_step_dir_remove(fx->top, "13.0-mine", -1, dlt_err_fresh(&err)), 0);
    assert_false(_exists(p));
    assert_false(_exists(q));
}

/* A step folder whose slurmstepd died (its lock free) is swept by the next step; a live one (lock
 * held), the step's own, a young one, one of another owner and names that are not J.S stay. */
static void test_sweep_dead_steps_folders(void **state)
{
    fixture *fx = *state;
    char file[PATH_MAX], p[PATH_MAX + 64], note[NOTE_LEN];
    dlt_err err = DLT_ERR_INIT;
    int stale, dead = -1, live = -1, own = -1, removed = -1;
    const char *kept[] = {"22.0", "23.0", "x.1", "1.2.3", "work"};
    assert_int_equal(dlt_step_dir_create(fx->top, "21.0", "nccl_topo.xml", "<system/>", 9, getgid(), file, PATH_MAX,
                                         &stale, note, NOTE_LEN, &dead, dlt_err_fresh(&err)),
                     0);
    assert_int_equal(dlt_step_dir_create(fx->top, "22.0", "nccl_topo.xml", "<system/>", 9, getgid(), file, PATH_MAX,
                                         &stale, note, NOTE_LEN, &live, dlt_err_fresh(&err)),
                     0);
    assert_int_equal(dlt_step_dir_create(fx->top, "23.0", "nccl_topo.xml", "<system/>", 9, getgid(), file, PATH_MAX,
                                         &stale, note, NOTE_LEN, &own, dlt_err_fresh(&err)),
                     0);
    close(dead); /* 21.0's slurmstepd was killed: its lock went with it */
    close(own);  /* 23.0 is the sweeping step's own name: never touched */
    for (int i = 2; i < 5; i++) {
        snprintf(p, sizeof(p), "%s/%s", fx->top, kept[i]);
        assert_int_equal(mkdir(p, 0700), 0);
    }
    snprintf(p, sizeof(p), "%s/24.0", fx->top); /* another owner's: not the plugin's */
    assert_int_equal(mkdir(p, 0700), 0);
    assert_int_equal(chown(p, 12345, 12345), 0);
    /* Too young yet (a folder being made has no lock for a moment). */
    assert_int_equal(dlt_step_dir_sweep(fx->top, "23.0", 3600, &removed, note, NOTE_LEN, dlt_err_fresh(&err)), 0);
    assert_int_equal(removed, 0);
    snprintf(p, sizeof(p), "%s/21.0", fx->top);
    assert_true(_exists(p));
    assert_int_equal(dlt_step_dir_sweep(fx->top, "23.0", 0, &removed, note, NOTE_LEN, dlt_err_fresh(&err)), 0);
    assert_int_equal(removed, 1);
    assert_string_equal(note, "");
    assert_false(_exists(p));
    for (int i = 0; i < 5; i++) {
        snprintf(p, sizeof(p), "%s/%s", fx->top, kept[i]);
        assert_true(_exists(p));
    }
    snprintf(p, sizeof(p), "%s/24.0", fx->top);
    assert_true(_exists(p));
    assert_int_equal(dlt_step_dir_remove(fx->top, "22.0", live, dlt_err_fresh(&err)), 0);
    assert_int_equal(
        dlt_step_dir_sweep("/nonexistent-topo-dir", NULL, 0, &removed, note, NOTE_LEN, dlt_err_fresh(&err)), -ENOENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_sweep_dead_steps_folders, setup, teardown),
        cmocka_unit_test_setup_teardown(test_live_step_folder_not_taken, setup, teardown),
        cmocka_unit_test_setup_teardown(test_remove_only_own_folder, setup, teardown),
        cmocka_unit_test(test_expand_node),
        cmocka_unit_test_setup_teardown(test_user_tree_removed_links_not_followed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stale_directory_of_same_id_replaced, setup, teardown),
        cmocka_unit_test_setup_teardown(test_link_at_step_path_removed_not_followed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_any_depth_removed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deep_stale_does_not_block, setup, teardown),
        cmocka_unit_test_setup_teardown(test_step_dir_not_user_writable, setup, teardown),
        cmocka_unit_test_setup_teardown(test_foreign_folder_in_stale_tree_kept, setup, teardown),
        cmocka_unit_test_setup_teardown(test_foreign_folder_in_root_step_dir_kept, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lift_names_taken_in_advance, setup, teardown),
        cmocka_unit_test_setup_teardown(test_topo_dir_searchable_by_tasks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_topo_dir_parents_trusted, setup, teardown),
        cmocka_unit_test(test_escape_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
