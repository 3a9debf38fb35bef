/* SPDX-License-Identifier: Apache-2.0 */
/* folder_list: the list one rank sends instead of every rank scanning. A data set built from the
 * list is the scanning rank's own (paths, labels, classes, what was left out, digest), and its list
 * is byte-identical; a list cut, flipped, or crafted with a valid checksum but bad contents is
 * refused; the sample check finds a file this node does not have. The listing itself reads the
 * entry kind from readdir (stat only for links), so the left-out counts are checked here too. */
#include "config.h"

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

#include "trainer/data/dataset.h"
#include "trainer/data/folder_list.h"

static char g_root[128], g_other[160];

static void _touch(const char *dir, const char *name)
{
    char p[PATH_MAX];
    FILE *f;
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    f = fopen(p, "w");
    assert_non_null(f);
    fputs("x", f);
    fclose(f);
}

/* ROOT/train-like tree: 3 classes (one with a shared-prefix run of names), and one of each kind the
 * reader leaves out. */
static int setup(void **state)
{
    char d[512], p[PATH_MAX], t[PATH_MAX];
    (void)state;
    snprintf(g_root, sizeof(g_root), "/tmp/dlt-folder-list-XXXXXX");
    if (!mkdtemp(g_root))
        return -1;
    const char *classes[] = {"apple", "banana", "cherry pie"};
    for (int c = 0; c < 3; c++) {
        snprintf(d, sizeof(d), "%s/%s", g_root, classes[c]);
        mkdir(d, 0755);
        for (int i = 0; i < 40 + 7 * c; i++) {
            char name[64];
            snprintf(name, sizeof(name), "n0144%04d_%d.JPEG", i * 37 % 1000, i);
            _touch(d, name);
        }
    }
    snprintf(d, sizeof(d), "%s/apple", g_root);
    _touch(d, "photo.webp"); /* another image kind */
    _touch(d, "notes.txt");  /* other */
    snprintf(p, sizeof(p), "%s/nested", d);
    mkdir(p, 0755); /* nested folder */
    snprintf(p, sizeof(p), "%s/dangling.JPEG", d);
    if (symlink("/nonexistent/x.JPEG", p) != 0) /* unreadable */
        return -1;
    snprintf(p, sizeof(p), "%s/fifo.JPEG", d);
    if (mkfifo(p, 0600) != 0) /* special */
        return -1;
    snprintf(p, sizeof(p), "%s/linked.JPEG", d);
    snprintf(t, sizeof(t), "%s/banana/n01440000_0.JPEG", g_root);
    if (symlink(t, p) != 0) /* a link to an image is an image (its target decides) */
        return -1;
    /* The same folder seen at another path (another mount point). */
    snprintf(g_other, sizeof(g_other), "%s-mnt", g_root);
    if (symlink(g_root, g_other) != 0)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    char cmd[PATH_MAX];
    (void)state;
    snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", g_root, g_other);
    return system(cmd) == 0 ? 0 : -1;
}

static uint64_t _fnv(const uint8_t *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* Rewrites the checksum after a deliberate edit, so the contents' checks are what refuses. */
static void _reseal(uint8_t *b, size_t len)
{
    uint64_t h = _fnv(b, len - 8);
    for (int k = 0; k < 8; k++)
        b[len - 8 + k] = (uint8_t)(h >> (8 * k));
}

static void test_round_trip_identical(void **state)
{
    dlt_dataset *a = NULL, *b = NULL;
    uint8_t *la = NULL, *lb = NULL;
    size_t na = 0, nb = 0;
    uint64_t fa, ca, fb, cb;
    dlt_err err = DLT_ERR_INIT;
    char text_a[1024], text_b[1024];
    (void)state;
    assert_int_equal(dlt_dataset_open_folder(&a, g_root, NULL, dlt_err_fresh(&err)), 0);
    assert_int_equal(dlt_dataset_count(a), 40 + 47 + 54 + 1);
    assert_int_equal(dlt_folder_list_pack(a, &la, &na, dlt_err_fresh(&err)), 0);
    /* Front coding: far smaller than the paths themselves. */
    assert_true(na < (size_t)dlt_dataset_count(a) * 16);
    assert_int_equal(dlt_folder_list_open(&b, g_other, la, na, dlt_err_fresh(&err)), 0);
    assert_int_equal(dlt_dataset_count(b), dlt_dataset_count(a));
    assert_int_equal(dlt_dataset_classes(b), 3);
    for (int c = 0; c < 3; c++)
        assert_string_equal(dlt_dataset_class_name(b, c), dlt_dataset_class_name(a, c));
    dlt_dataset_digest(a, &fa, &ca);
    dlt_dataset_digest(b, &fb, &cb);
    assert_true(fa == fb && ca == cb);
    /* What was left out, said the same way on every rank. */
    assert_int_equal(dlt_dataset_describe_left_out(a, text_a, sizeof(text_a)),
                     dlt_dataset_describe_left_out(b, text_b, sizeof(text_b)));
    assert_string_equal(text_a, text_b);
    assert_int_equal(dlt_dataset_left(b)->images, 1);
    assert_int_equal(dlt_dataset_left(b)->other, 1);
    assert_int_equal(dlt_dataset_left(b)->nested, 1);
    assert_int_equal(dlt_dataset_left(b)->unreadable, 1);
    assert_int_equal(dlt_dataset_left(b)->special, 1);
    /* The list of the list is the list. */
    assert_int_equal(dlt_folder_list_pack(b, &lb, &nb, dlt_err_fresh(&err)), 0);
    assert_int_equal(nb, na);
    assert_memory_equal(la, lb, na);
    /* Reads go to the receiving rank's path. */
    {
        uint8_t *buf = NULL;
        size_t cap = 0, len = 0;
        int32_t label = -1;
        char name[PATH_MAX];
        assert_int_equal(dlt_dataset_read(b, 5, &buf, &cap, &len, &label, name, sizeof(name), dlt_err_fresh(&err)), 0);
        assert_int_equal(strncmp(name, g_other, strlen(g_other)), 0);
        assert_int_equal(len, 1);
        free(buf);
    }
    free(la);
    free(lb);
    dlt_dataset_close(a);
    dlt_dataset_close(b);
}

static void test_damaged_lists_refused(void **state)
{
    dlt_dataset *a = NULL, *b = NULL;
    uint8_t *l = NULL, *c;
    size_t n = 0;
    dlt_err err = DLT_ERR_INIT;
    (void)state;
    assert_int_equal(dlt_dataset_open_folder(&a, g_root, NULL, dlt_err_fresh(&err)), 0);
    assert_int_equal(dlt_folder_list_pack(a, &l, &n, dlt_err_fresh(&err)), 0);
    c = malloc(n);
    assert_non_null(c);
    /* Every single flipped byte, and every cut. */
    for (size_t i = 0; i < n; i++) {
        memcpy(c, l, n);
        c[i] ^= 0x20;
        assert_int_equal(dlt_folder_list_open(&b, g_root, c, n, dlt_err_fresh(&err)), -EBADMSG);
        assert_null(b);
    }
    for (size_t cut = 0; cut < n; cut += 7) {
        assert_int_not_equal(dlt_folder_list_open(&b, g_root, l, cut, dlt_err_fresh(&err)), 0);
        assert_null(b);
    }
    assert_non_null(strstr(err.msg, "damaged"));
    /* A valid checksum over bad contents: the last entry's label made 3 (of 3 classes). */
    memcpy(c, l, n);
    {
        /* The last entry is "cherry pie/..." with label 2: find that varint from the end. */
        size_t i = n - 9;
        while (i > 0 && c[i] != 2)
            i--;
        assert_true(i > 0);
        c[i] = 3;
        _reseal(c, n);
        if (dlt_folder_list_open(&b, g_root, c, n, dlt_err_fresh(&err)) == 0) {
            /* the byte was not the label after all: still a consistent list */
            dlt_dataset_close(b);
            b = NULL;
        } else {
            assert_non_null(strstr(err.msg, "damaged"));
        }
    }
    /* A count far beyond the bytes there. */
    memcpy(c, l, n);
    c[10] = 0x7f; /* the image count's first byte (after magic, numbered, classes) */
    _reseal(c, n);
    assert_int_equal(dlt_folder_list_open(&b, g_root, c, n, dlt_err_fresh(&err)), -EBADMSG);
    free(c);
    free(l);
    dlt_dataset_close(a);
}

/* A list made here byte by byte: one class "a", one image at path, with a valid checksum. */
static size_t _craft(uint8_t *b, size_t cap, uint64_t ncls, const char *path)
{
    size_t o = 0, n = strlen(path);
    static const char magic[8] = {'D', 'L', 'T', 'L', 'I', 'S', 'T', '1'};
    assert_true(n < 120 && cap >= 200);
    memcpy(b, magic, 8), o = 8;
    b[o++] = 0; /* numbered */
    do {        /* ncls as a varint */
        b[o++] = (uint8_t)((ncls & 0x7f) | (ncls >= 0x80 ? 0x80 : 0));
        ncls >>= 7;
    } while (ncls);
    b[o++] = 1; /* one image */
    for (int k = 0; k < 7; k++)
        b[o++] = 0, b[o++] = 0; /* nothing left out */
    b[o++] = 1, b[o++] = 'a';
    b[o++] = 0, b[o++] = 0, b[o++] = (uint8_t)n; /* label 0, shared 0, the path */
    memcpy(b + o, path, n), o += n;
    o += 8;
    _reseal(b, o);
    return o;
}

/* Lists whose checksum holds (anyone can compute FNV) but whose contents a lister never makes:
 * paths that leave the folder, class counts beyond the bytes. */
static void test_crafted_lists_refused(void **state)
{
    static const char *const bad[] = {"../x.JPEG", "/etc/x.JPEG", "a/../../x.JPEG", "a/./x.JPEG",
                                      "a//x.JPEG", "a/..",        "a/\x01.JPEG"};
    uint8_t b[256];
    dlt_err err = DLT_ERR_INIT;
    dlt_dataset *d = NULL;
    size_t n;
    (void)state;
    n = _craft(b, sizeof(b), 1, "a/x.JPEG");
    assert_int_equal(dlt_folder_list_open(&d, g_root, b, n, dlt_err_fresh(&err)), 0); /* the crafting is right */
    assert_int_equal(dlt_dataset_count(d), 1);
    dlt_dataset_close(d);
    d = NULL;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        n = _craft(b, sizeof(b), 1, bad[i]);
        assert_int_equal(dlt_folder_list_open(&d, g_root, b, n, dlt_err_fresh(&err)), -EBADMSG);
        assert_null(d);
        assert_non_null(strstr(err.msg, "not below the folder"));
    }
    n = _craft(b, sizeof(b), (uint64_t)1 << 30, "a/x.JPEG"); /* 2^30 classes in a 60-byte list */
    assert_int_equal(dlt_folder_list_open(&d, g_root, b, n, dlt_err_fresh(&err)), -EBADMSG);
    assert_null(d);
}

static void test_sample_check_finds_missing_file(void **state)
{
    dlt_dataset *a = NULL;
    dlt_err err = DLT_ERR_INIT;
    char p[512];
    (void)state;
    assert_int_equal(dlt_dataset_open_folder(&a, g_root, NULL, dlt_err_fresh(&err)), 0);
    assert_int_equal(dlt_folder_list_check_sample(a, 16, 42, dlt_err_fresh(&err)), 0);
    snprintf(p, sizeof(p), "%s/banana", g_root);
    /* This node's copy lacks a whole class: any sample large enough finds it. */
    {
        char cmd[PATH_MAX + 16];
        snprintf(cmd, sizeof(cmd), "mv '%s' '%s.gone'", p, p);
        assert_int_equal(system(cmd), 0);
        assert_int_equal(dlt_folder_list_check_sample(a, 64, 42, dlt_err_fresh(&err)), -ENOENT);
        assert_non_null(strstr(err.msg, "/banana/"));
        assert_non_null(strstr(err.msg, "No such file"));
        snprintf(cmd, sizeof(cmd), "mv '%s.gone' '%s'", p, p);
        assert_int_equal(system(cmd), 0);
    }
    dlt_dataset_close(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_identical),
        cmocka_unit_test(test_damaged_lists_refused),
        cmocka_unit_test(test_crafted_lists_refused),
        cmocka_unit_test(test_sample_check_finds_missing_file),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
