/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of trainer/data/dataset.c: ImageFolder class order and what a folder leaves out,
 * labels files, class mapping, RecordIO round trip (including a record split around the magic
 * number) and damaged indexes, and every allocation failing in turn while a folder is listed. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <turbojpeg.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/unit/data_fixture.h"
#include "trainer/data/dataset.h"
#include "trainer/data/transform.h"

/* strdup fails on its g_strdup_fail-th call from now (-1: never): linked with -Wl,--wrap=strdup,
 * so the data set's own copies of names and paths go through here. */
static long g_strdup_fail = -1, g_strdup_calls;
char *__real_strdup(const char *s);
char *__wrap_strdup(const char *s);
char *__wrap_strdup(const char *s)
{
    g_strdup_calls++;
    if (g_strdup_fail >= 0 && g_strdup_fail-- == 0)
        return NULL;
    return __real_strdup(s);
}

static void test_folder_and_recordio(void **state)
{
    static const char *const classes[] = {"b", "A", "a", "n01440764"};
    char root[512], rec[512], name[1024];
    dlt_err err = DLT_ERR_INIT;
    dlt_dataset *ds, *rs;
    uint8_t *buf = NULL, *buf2 = NULL;
    size_t cap = 0, cap2 = 0, len, len2;
    int32_t label, label2;
    dlt_recordio_writer w;
    (void)state;
    snprintf(root, sizeof(root), "%s/folder", g_dir);
    dlt_test_make_folder(root, classes, 4, 3, 0);
    assert_int_equal(dlt_dataset_open_folder(&ds, root, NULL, dlt_err_fresh(&err)), 0);
    assert_int_equal(dlt_dataset_classes(ds), 4);
    assert_int_equal(dlt_dataset_count(ds), 12);
    /* torchvision: sorted(os.scandir names) = code point order. */
    assert_string_equal(dlt_dataset_class_name(ds, 0), "A");
    assert_string_equal(dlt_dataset_class_name(ds, 1), "a");
    assert_string_equal(dlt_dataset_class_name(ds, 2), "b");
    assert_string_equal(dlt_dataset_class_name(ds, 3), "n01440764");
    assert_int_equal(dlt_dataset_read(ds, 0, &buf, &cap, &len, &label, name, sizeof(name), dlt_err_fresh(&err)), 0);
    assert_int_equal(label, 0);
    assert_non_null(strstr(name, "/A/img00.JPEG"));

    snprintf(rec, sizeof(rec), "%s/data.rec", g_dir);
    assert_int_equal(dlt_recordio_create(&w, rec, dlt_err_fresh(&err)), 0);
    for (int64_t i = 0; i < dlt_dataset_count(ds); i++) {
        assert_int_equal(dlt_dataset_read(ds, i, &buf, &cap, &len, &label, name, sizeof(name), dlt_err_fresh(&err)), 0);
        assert_int_equal(dlt_recordio_append(&w, (uint64_t)i, (float)label, buf, len, dlt_err_fresh(&err)), 0);
    }
    assert_int_equal(dlt_recordio_close(&w, dlt_err_fresh(&err)), 0);
    assert_int_equal(dlt_dataset_open_recordio(&rs, rec, dlt_err_fresh(&err)), 0);
    assert_int_equal(dlt_dataset_count(rs), 12);
    assert_int_equal(dlt_dataset_classes(rs), 4);
    for (int64_t i = 0; i < 12; i++) {
        assert_int_equal(dlt_dataset_read(ds, i, &buf, &cap, &len, &label, name, sizeof(name), dlt_err_fresh(&err)), 0);
        assert_int_equal(dlt_dataset_read(rs, i, &buf2, &cap2, &len2, &label2, name, sizeof(name), dlt_err_fresh(&err)),
                         0);
        assert_int_equal(len, len2);
        assert_int_equal(label, label2);
        assert_memory_equal(buf, buf2, len);
    }
    dlt_dataset_close(rs);

    {
        /* A record split by a writer that cut the magic out of the data: parts 1, 2, 3. */
        char rec2[512], idx[512];
        uint32_t magic = 0xced7230au;
        uint8_t payload_hdr[24] = {0};
        float lab = 2.0f;
        uint8_t file[256] = {0}; /* zero padding between parts, as im2rec writes */
        size_t o = 0;
        const uint8_t a[8] = {1, 2, 3, 4, 5, 6, 7, 8}, b[4] = {9, 9, 9, 9}, c[3] = {7, 7, 7};
        memcpy(payload_hdr + 4, &lab, 4);
#define PART(cflag, data, n)                                                                                           \
    do {                                                                                                               \
        uint32_t l = ((uint32_t)(cflag) << 29) | (uint32_t)(n);                                                        \
        memcpy(file + o, &magic, 4);                                                                                   \
        memcpy(file + o + 4, &l, 4);                                                                                   \
        memcpy(file + o + 8, data, n);                                                                                 \
        o += 8 + (((n) + 3u) & ~3u);                                                                                   \
    } while (0)
        {
            uint8_t first[32];
            memcpy(first, payload_hdr, 24);
            memcpy(first + 24, a, 8);
            PART(1, first, 32);
        }
        PART(2, b, 4);
        PART(3, c, 3);
#undef PART
        snprintf(rec2, sizeof(rec2), "%s/split.rec", g_dir);
        snprintf(idx, sizeof(idx), "%s/split.idx", g_dir);
        dlt_test_write(rec2, file, o);
        dlt_test_write(idx, "0\t0\n", 4);
        assert_int_equal(dlt_dataset_open_recordio(&rs, rec2, dlt_err_fresh(&err)), 0);
        assert_int_equal(dlt_dataset_read(rs, 0, &buf2, &cap2, &len2, &label2, name, sizeof(name), dlt_err_fresh(&err)),
                         0);
        assert_int_equal(label2, 2);
        assert_int_equal(len2, 8 + 4 + 4 + 4 + 3); /* a | magic | b | magic | c */
        assert_memory_equal(buf2, a, 8);
        assert_memory_equal(buf2 + 8, &magic, 4);
        assert_memory_equal(buf2 + 12, b, 4);
        assert_memory_equal(buf2 + 20, c, 3);
        dlt_dataset_close(rs);
        /* A bad magic is refused when the pair is opened, with the index line and the offset. */
        file[0] ^= 1;
        dlt_test_write(rec2, file, o);
        assert_int_not_equal(dlt_dataset_open_recordio(&rs, rec2, dlt_err_fresh(&err)), 0);
        assert_non_null(strstr(err.msg, "line 1: no record starts at offset 0"));
    }
    free(buf);
    free(buf2);
    dlt_dataset_close(ds);
}

/* A damaged .rec/.idx pair is refused at open, naming the index line and why; an intact one gives
 * the class count of every record's label. */
static void test_recordio_index_damage(void **state)
{
    char rec[512], idx[512], text[4096];
    dlt_err err = DLT_ERR_INIT;
    uint64_t off[10];
    size_t o = 0, total;
    dlt_recordio_writer w;
    dlt_dataset *rs;
    uint8_t img[100];
    FILE *f;
    (void)state;
    memset(img, 0x5a, sizeof(img));
    snprintf(rec, sizeof(rec), "%s/dmg.rec", g_dir);
    snprintf(idx, sizeof(idx), "%s/dmg.idx", g_dir);
    assert_int_equal(dlt_recordio_create(&w, rec, dlt_err_fresh(&err)), 0);
    for (int i = 0; i < 10; i++) {
        off[i] = w.offset;
        assert_int_equal(
            dlt_recordio_append(&w, (uint64_t)i, (float)(i % 5), img, sizeof(img) - (size_t)i, dlt_err_fresh(&err)), 0);
    }
    total = w.offset;
    assert_int_equal(dlt_recordio_close(&w, dlt_err_fresh(&err)), 0);
    assert_int_equal(dlt_dataset_open_recordio(&rs, rec, dlt_err_fresh(&err)), 0);
    assert_int_equal(dlt_dataset_count(rs), 10);
    assert_int_equal(dlt_dataset_classes(rs), 5);
    dlt_dataset_close(rs);

    /* The index cut mid-line (its last line without an end). */
    for (int i = 0; i < 10; i++)
        o += (size_t)snprintf(text + o, sizeof(text) - o, "%d\t%llu\n", i, (unsigned long long)off[i]);
    dlt_test_write(idx, text, o - 2);
    assert_int_not_equal(dlt_dataset_open_recordio(&rs, rec, dlt_err_fresh(&err)), 0);
    assert_non_null(strstr(err.msg, "line 10: cut short"));
    assert_non_null(strstr(err.msg, "dmg.idx"));
    /* A garbage line. */
    snprintf(text, sizeof(text), "0\t%llu\n1\t%llu\nhello world\n", (unsigned long long)off[0],
             (unsigned long long)off[1]);
    dlt_test_write_str(idx, text);
    assert_int_not_equal(dlt_dataset_open_recordio(&rs, rec, dlt_err_fresh(&err)), 0);
    assert_non_null(strstr(err.msg, "line 3: 'hello world' is not \"KEY<TAB>OFFSET\""));
    /* A duplicated offset (the same record twice). */
    snprintf(text, sizeof(text), "0\t%llu\n1\t%llu\n2\t%llu\n", (unsigned long long)off[0], (unsigned long long)off[1],
             (unsigned long long)off[1]);
    dlt_test_write_str(idx, text);
    assert_int_not_equal(dlt_dataset_open_recordio(&rs, rec, dlt_err_fresh(&err)), 0);
    assert_non_null(strstr(err.msg, "line 3: the same offset as the line before"));
    /* Lines out of order. */
    snprintf(text, sizeof(text), "0\t%llu\n1\t%llu\n", (unsigned long long)off[1], (unsigned long long)off[0]);
    dlt_test_write_str(idx, text);
    assert_int_not_equal(dlt_dataset_open_recordio(&rs, rec, dlt_err_fresh(&err)), 0);
    assert_non_null(strstr(err.msg, "line 2: before the end of the record"));
    /* An offset inside a record (no magic there). */
    snprintf(text, sizeof(text), "0\t%llu\n1\t%llu\n", (unsigned long long)off[0], (unsigned long long)off[1] + 4);
    dlt_test_write_str(idx, text);
    assert_int_not_equal(dlt_dataset_open_recordio(&rs, rec, dlt_err_fresh(&err)), 0);
    assert_non_null(strstr(err.msg, "line 2: no record starts at offset"));
    /* The whole index, the .rec cut in the 7th record: refused at line 7, not "3 classes". */
    o = 0;
    for (int i = 0; i < 10; i++)
        o += (size_t)snprintf(text + o, sizeof(text) - o, "%d\t%llu\n", i, (unsigned long long)off[i]);
    dlt_test_write(idx, text, o);
    assert_int_equal(truncate(rec, (off_t)(off[6] + 40)), 0);
    assert_int_not_equal(dlt_dataset_open_recordio(&rs, rec, dlt_err_fresh(&err)), 0);
    assert_non_null(strstr(err.msg, "line 7: the record at offset"));
    assert_non_null(strstr(err.msg, "the .rec was truncated"));
    /* Cut between records: the offsets past the end are named. */
    assert_int_equal(truncate(rec, (off_t)off[3]), 0);
    assert_int_not_equal(dlt_dataset_open_recordio(&rs, rec, dlt_err_fresh(&err)), 0);
    assert_non_null(strstr(err.msg, "line 4: offset"));
    assert_non_null(strstr(err.msg, "past the end of the .rec"));
    (void)total;
    f = fopen(rec, "rb");
    assert_non_null(f);
    fclose(f);
}

/* A JPEG named name in the folder dir_fd (openat: its whole path may be longer than PATH_MAX). */
static void _jpeg_at(int dir_fd, const char *name)
{
    unsigned long len;
    unsigned char *j = dlt_test_jpeg(16, 16, 0, &len);
    int fd = openat(dir_fd, name, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        fail_msg("openat %s (%zu bytes): %s", name, strlen(name), strerror(errno));
    assert_int_equal(write(fd, j, len), (ssize_t)len);
    close(fd);
    tjFree(j);
}

/* Paths at PATH_MAX: an image whose path is exactly PATH_MAX - 1 bytes is read; one a byte longer
 * cannot be opened and is counted and named (never dropped without a word); a class whose images
 * all are too long is refused, naming it, instead of being a class without images. */
static void test_folder_long_paths(void **state)
{
    char *root = malloc(PATH_MAX + 512), name[256], what[2048];
    size_t r;
    dlt_err err = DLT_ERR_INIT;
    dlt_dataset *ds;
    int fa, fb;
    (void)state;
    assert_non_null(root);
    r = (size_t)snprintf(root, PATH_MAX, "%s/long", g_dir);
    assert_int_equal(mkdir(root, 0755), 0);
    while (r + 200 < 3848) { /* folders of 199-byte names, then one to 3,850 bytes */
        memset(root + r, 'd', 200);
        root[r] = '/';
        root[r + 200] = '\0';
        r += 200;
        assert_int_equal(mkdir(root, 0755), 0);
    }
    /* then one folder to exactly 3,850 bytes, and "/r" */
    memset(root + r, 'e', 3850 - r);
    root[r] = '/';
    root[3850] = '\0';
    r = 3850;
    assert_int_equal(mkdir(root, 0755), 0);
    snprintf(root + r, PATH_MAX - r, "/r");
    r += 2;
    assert_int_equal(mkdir(root, 0755), 0);
    snprintf(root + r, PATH_MAX - r, "/a");
    assert_int_equal(mkdir(root, 0755), 0);
    fa = open(root, O_RDONLY | O_DIRECTORY);
    snprintf(root + r, PATH_MAX - r, "/b");
    assert_int_equal(mkdir(root, 0755), 0);
    fb = open(root, O_RDONLY | O_DIRECTORY);
    root[r] = '\0';
    assert_true(fa >= 0 && fb >= 0);
    _jpeg_at(fa, "x.JPEG");
    /* ROOT/a/NAME: r + 3 + strlen(NAME) bytes */
    memset(name, 'n', sizeof(name));
    snprintf(name + (PATH_MAX - 1 - r - 3) - 5, 6, ".JPEG");
    assert_int_equal(r + 3 + strlen(name), PATH_MAX - 1);
    _jpeg_at(fa, name);
    memset(name, 'o', sizeof(name));
    snprintf(name + (PATH_MAX - r - 3) - 5, 6, ".JPEG");
    assert_int_equal(r + 3 + strlen(name), PATH_MAX);
    _jpeg_at(fa, name);
    _jpeg_at(fb, name);
    /* b's only image is too long: refused, naming the class folder and why. */
    assert_int_not_equal(dlt_dataset_open_folder(&ds, root, NULL, dlt_err_fresh(&err)), 0);
    assert_non_null(strstr(err.msg, "/b: all 1 of its images have paths longer than PATH_MAX"));
    assert_int_equal(unlinkat(fb, name, 0), 0);
    _jpeg_at(fb, "y.JPEG");
    assert_int_equal(dlt_dataset_open_folder(&ds, root, NULL, dlt_err_fresh(&err)), 0);
    /* x.JPEG and the PATH_MAX - 1 one of a, y.JPEG of b; a's longer one counted */
    assert_int_equal(dlt_dataset_count(ds), 3);
    assert_int_equal(dlt_dataset_left(ds)->unreadable, 1);
    assert_int_equal(dlt_dataset_describe_left_out(ds, what, sizeof(what)), 1);
    assert_non_null(strstr(what, "1 dangling symbolic link(s), unreadable entries or paths longer than PATH_MAX"));
    assert_non_null(strstr(what, "(path longer than PATH_MAX, 4095 bytes)"));
    {
        /* the PATH_MAX - 1 image reads */
        unsigned char *buf = NULL;
        size_t cap = 0, len = 0;
        int32_t label = -1;
        int found = 0;
        for (int64_t i = 0; i < dlt_dataset_count(ds); i++) {
            char nm[PATH_MAX + 16];
            assert_int_equal(dlt_dataset_read(ds, i, &buf, &cap, &len, &label, nm, sizeof(nm), dlt_err_fresh(&err)), 0);
            found += strlen(nm) == PATH_MAX - 1;
        }
        assert_int_equal(found, 1);
        free(buf);
    }
    dlt_dataset_close(ds);
    close(fa);
    close(fb);
    free(root);
}

/* What a folder holds beyond its JPEGs and PNGs is counted (nested folders, other images, dangling links,
 * other files); an empty class folder is refused; labels-file lines naming no file and images
 * without a line are left out and counted, never read (a failed read is replaced by another image:
 * an evaluation would score that one twice). */
static void test_folder_left_out(void **state)
{
    static const char *const classes[] = {"c0", "c1", "c2"};
    char root[512], p[700], q[700], what[2048];
    dlt_err err = DLT_ERR_INIT;
    const dlt_dataset_left_out *lo;
    dlt_dataset *ds;
    (void)state;
    snprintf(root, sizeof(root), "%s/leftout", g_dir);
    dlt_test_make_folder(root, classes, 3, 2, 0); /* and c0/README.txt */
    snprintf(p, sizeof(p), "%s/c1/sub", root);
    mkdir(p, 0755);
    snprintf(p, sizeof(p), "%s/c1/photo.webp", root);
    dlt_test_write(p, "webp", 4);
    snprintf(p, sizeof(p), "%s/c1/shot.PNG", root); /* listed (any case): the reader goes by content */
    dlt_test_write(p, "png", 3);
    snprintf(p, sizeof(p), "%s/c2/gone.JPEG", root);
    assert_int_equal(symlink("/nonexistent/x.JPEG", p), 0);
    assert_int_equal(dlt_dataset_open_folder(&ds, root, NULL, dlt_err_fresh(&err)), 0);
    assert_int_equal(dlt_dataset_count(ds), 7);
    lo = dlt_dataset_left(ds);
    assert_non_null(lo);
    assert_int_equal(lo->nested, 1);
    assert_int_equal(lo->images, 1);
    assert_int_equal(lo->unreadable, 1);
    assert_int_equal(lo->other, 1);
    assert_non_null(strstr(lo->first_images, "c1/photo.webp"));
    assert_int_equal(dlt_dataset_describe_left_out(ds, what, sizeof(what)), 3); /* README.txt aside */
    assert_non_null(
        strstr(what, "1 dangling symbolic link(s), unreadable entries or paths longer than PATH_MAX (first: "));
    assert_non_null(strstr(what, "c2/gone.JPEG"));
    dlt_dataset_close(ds);
    /* A class folder with no JPEG in it. */
    snprintf(p, sizeof(p), "%s/c3", root);
    mkdir(p, 0755);
    assert_int_not_equal(dlt_dataset_open_folder(&ds, root, NULL, dlt_err_fresh(&err)), 0);
    assert_non_null(strstr(err.msg, "class folder"));
    assert_non_null(strstr(err.msg, "leftout/c3 holds no .JPEG/.jpg/.png images"));

    /* A flat folder and a labels file: one line names a missing file, one image has no line. */
    snprintf(root, sizeof(root), "%s/flat", g_dir);
    mkdir(root, 0755);
    for (int i = 0; i < 4; i++) {
        unsigned long len;
        unsigned char *j = dlt_test_jpeg(40, 40, 0, &len);
        snprintf(p, sizeof(p), "%s/i%d.JPEG", root, i);
        dlt_test_write(p, j, len);
        tjFree(j);
    }
    snprintf(q, sizeof(q), "%s/flat.txt", g_dir);
    dlt_test_write_str(q, "i0.JPEG a\ni1.JPEG b\ni2.JPEG a\nnothere.JPEG b\n");
    assert_int_equal(dlt_dataset_open_folder(&ds, root, q, dlt_err_fresh(&err)), 0);
    assert_int_equal(dlt_dataset_count(ds), 3);
    assert_int_equal(dlt_dataset_classes(ds), 2);
    lo = dlt_dataset_left(ds);
    assert_int_equal(lo->missing, 1);
    assert_int_equal(lo->unlisted, 1);
    assert_non_null(strstr(lo->first_missing, "nothere.JPEG"));
    assert_non_null(strstr(lo->first_unlisted, "i3.JPEG"));
    assert_int_equal(dlt_dataset_describe_left_out(ds, what, sizeof(what)), 2);
    assert_non_null(strstr(what, "1 labels-file line(s) naming a file that is not there"));
    assert_non_null(strstr(what, "1 image(s) without a line in the labels file"));
    for (int64_t i = 0; i < dlt_dataset_count(ds); i++) {
        uint8_t *buf = NULL;
        size_t cap = 0, len;
        int32_t label;
        char name[1024];
        assert_int_equal(dlt_dataset_read(ds, i, &buf, &cap, &len, &label, name, sizeof(name), dlt_err_fresh(&err)), 0);
        free(buf);
    }
    dlt_dataset_close(ds);
}

/* A labels file: comments and blank lines skipped, classes numbered in sorted order; a malformed or
 * too long line, a file named twice, no lines, lines naming only missing files and a read error
 * are each refused with their own reason (none gives a smaller data set or another message). */
static void test_labels_file(void **state)
{
    char root[512], p[700], q[700], name[1024], longline[1200];
    dlt_err err = DLT_ERR_INIT;
    dlt_dataset *ds;
    uint8_t *buf = NULL;
    size_t cap = 0, len;
    int32_t label;
    (void)state;
    snprintf(root, sizeof(root), "%s/labels", g_dir);
    mkdir(root, 0755);
    for (int i = 0; i < 3; i++) {
        unsigned long jl;
        unsigned char *j = dlt_test_jpeg(40, 40, 0, &jl);
        snprintf(p, sizeof(p), "%s/x%d.jpg", root, i);
        dlt_test_write(p, j, jl);
        tjFree(j);
    }
    snprintf(q, sizeof(q), "%s/labels.txt", g_dir);
    dlt_test_write_str(q, "# file class\n\nx0.jpg zebra\n  x1.jpg ant\nx2.jpg zebra\n");
    assert_int_equal(dlt_dataset_open_folder(&ds, root, q, dlt_err_fresh(&err)), 0);
    assert_int_equal(dlt_dataset_count(ds), 3);
    assert_int_equal(dlt_dataset_classes(ds), 2);
    assert_string_equal(dlt_dataset_class_name(ds, 0), "ant");
    assert_string_equal(dlt_dataset_class_name(ds, 1), "zebra");
    for (int64_t i = 0; i < 3; i++) {
        assert_int_equal(dlt_dataset_read(ds, i, &buf, &cap, &len, &label, name, sizeof(name), dlt_err_fresh(&err)), 0);
        assert_int_equal(label, strstr(name, "x1.jpg") ? 0 : 1);
    }
    free(buf);
    dlt_dataset_close(ds);

    dlt_test_write_str(q, "x0.jpg zebra\nx1.jpg ant extra\n");
    assert_int_equal(dlt_dataset_open_folder(&ds, root, q, dlt_err_fresh(&err)), -EINVAL);
    assert_non_null(strstr(err.msg, "line 2: 'x1.jpg ant extra' is not \"FILENAME CLASS\""));
    memset(longline, 'a', sizeof(longline) - 2);
    longline[sizeof(longline) - 2] = '\n';
    longline[sizeof(longline) - 1] = '\0';
    dlt_test_write_str(q, longline);
    assert_int_equal(dlt_dataset_open_folder(&ds, root, q, dlt_err_fresh(&err)), -EINVAL);
    assert_non_null(strstr(err.msg, "line 1: longer than 1022 characters"));
    dlt_test_write_str(q, "x0.jpg zebra\nx1.jpg ant\nx0.jpg ant\n");
    assert_int_equal(dlt_dataset_open_folder(&ds, root, q, dlt_err_fresh(&err)), -EINVAL);
    assert_non_null(strstr(err.msg, "lists x0.jpg more than once"));
    dlt_test_write_str(q, "# nothing\n\n");
    assert_int_equal(dlt_dataset_open_folder(&ds, root, q, dlt_err_fresh(&err)), -EINVAL);
    assert_non_null(strstr(err.msg, "lists no \"FILENAME CLASS\" lines"));
    /* Lines there, files not: said so, not "no lines". */
    dlt_test_write_str(q, "gone0.jpg zebra\ngone1.jpg ant\n");
    assert_int_not_equal(dlt_dataset_open_folder(&ds, root, q, dlt_err_fresh(&err)), 0);
    assert_non_null(strstr(err.msg, "none of the 2 file(s) labels file"));
    assert_non_null(strstr(err.msg, "(first: gone0.jpg)"));
    /* A read error (a regular file that cannot be read: /proc/self/mem at offset 0) is not an
     * empty or shorter list. */
    if (access("/proc/self/mem", R_OK) == 0) {
        assert_int_equal(dlt_dataset_open_folder(&ds, root, "/proc/self/mem", dlt_err_fresh(&err)), -EIO);
        assert_non_null(strstr(err.msg, "reading labels file /proc/self/mem after line 0"));
    }
}

/* Out of memory while a folder is read (each copy of a name or a path failing in turn, for the
 * class folders and for a labels file): always refused with -ENOMEM, never a data set with fewer
 * images or classes. */
static void test_folder_out_of_memory(void **state)
{
    static const char *const classes[] = {"c0", "c1", "c2"};
    char root[512], flat[512], q[700], p[700];
    dlt_err err = DLT_ERR_INIT;
    const char *labels[2] = {NULL, q};
    const char *roots[2] = {root, flat};
    dlt_dataset *ds;
    (void)state;
    snprintf(root, sizeof(root), "%s/oom", g_dir);
    dlt_test_make_folder(root, classes, 3, 3, 0);
    snprintf(flat, sizeof(flat), "%s/oom/c1", g_dir);
    snprintf(q, sizeof(q), "%s/oom.txt", g_dir);
    dlt_test_write_str(q, "img00.JPEG b\nimg01.JPEG a\nimg02.JPEG c\n");
    for (int kind = 0; kind < 2; kind++) {
        long calls;
        g_strdup_calls = 0;
        assert_int_equal(dlt_dataset_open_folder(&ds, roots[kind], labels[kind], dlt_err_fresh(&err)), 0);
        dlt_dataset_close(ds);
        calls = g_strdup_calls;
        assert_true(calls >= 9);
        for (long k = 0; k < calls; k++) {
            int rc;
            g_strdup_fail = k;
            rc = dlt_dataset_open_folder(&ds, roots[kind], labels[kind], dlt_err_fresh(&err));
            g_strdup_fail = -1;
            snprintf(p, sizeof(p), "%s: copy %ld of %ld failing: rc %d (%.500s)",
                     kind ? "labels file" : "class folders", k, calls, rc, rc ? err.msg : "opened");
            if (rc != -ENOMEM || !strstr(err.msg, "out of memory")) {
                if (rc == 0)
                    dlt_dataset_close(ds);
                fail_msg("%s", p);
            }
        }
    }
}

/* Validation classes mapped by name onto the training class list: another order, a subset, numbers
 * as positions for a labels file, unknown names and 1-based numbers refused; RecordIO's names from
 * PATH.classes. */
static void test_map_classes(void **state)
{
    static const char *const val_classes[] = {"c", "a"};
    char root[512], p[700], note[512], name[1024];
    dlt_err err = DLT_ERR_INIT;
    dlt_dataset *ds;
    uint8_t *buf = NULL;
    size_t cap = 0, len;
    int32_t label;
    char *list;
    (void)state;
    snprintf(root, sizeof(root), "%s/mapval", g_dir);
    dlt_test_make_folder(root, val_classes, 2, 2, 0);
    assert_int_equal(dlt_dataset_open_folder(&ds, root, NULL, dlt_err_fresh(&err)), 0);
    list = dlt_dataset_class_list(ds);
    assert_string_equal(list, "a\nc");
    free(list);
    assert_int_equal(dlt_dataset_map_classes(ds, "a\nb\nc\nd", note, sizeof(note), dlt_err_fresh(&err)), 0);
    assert_string_equal(note, "");
    assert_int_equal(dlt_dataset_classes(ds), 4);
    assert_string_equal(dlt_dataset_class_name(ds, 2), "c");
    for (int64_t i = 0; i < dlt_dataset_count(ds); i++) {
        assert_int_equal(dlt_dataset_read(ds, i, &buf, &cap, &len, &label, name, sizeof(name), dlt_err_fresh(&err)), 0);
        assert_int_equal(label, strstr(name, "/a/") ? 0 : 2);
    }
    dlt_dataset_close(ds);
    /* A class that is not in the list. */
    assert_int_equal(dlt_dataset_open_folder(&ds, root, NULL, dlt_err_fresh(&err)), 0);
    assert_int_not_equal(dlt_dataset_map_classes(ds, "a\nb", note, sizeof(note), dlt_err_fresh(&err)), 0);
    assert_non_null(
        strstr(err.msg, "1 of its 2 class(es) are not among the 2 classes it is scored against (a...b): 'c'"));
    dlt_dataset_close(ds);
    /* A labels file with numbers: positions; 1-based ones refused with the reason. */
    snprintf(p, sizeof(p), "%s/num.txt", g_dir);
    dlt_test_write_str(p, "c/img00.JPEG 0\nc/img01.JPEG 2\na/img00.JPEG 2\n");
    assert_int_equal(dlt_dataset_open_folder(&ds, root, p, dlt_err_fresh(&err)), 0);
    assert_int_equal(dlt_dataset_map_classes(ds, "x\ny\nz", note, sizeof(note), dlt_err_fresh(&err)), 0);
    assert_non_null(strstr(note, "2 class(es) given as numbers are taken as positions 0..2"));
    assert_int_equal(dlt_dataset_read(ds, 1, &buf, &cap, &len, &label, name, sizeof(name), dlt_err_fresh(&err)), 0);
    assert_int_equal(label, 2);
    dlt_dataset_close(ds);
    dlt_test_write_str(p, "c/img00.JPEG 1\nc/img01.JPEG 2\na/img00.JPEG 3\n");
    assert_int_equal(dlt_dataset_open_folder(&ds, root, p, dlt_err_fresh(&err)), 0);
    assert_int_not_equal(dlt_dataset_map_classes(ds, "x\ny\nz", note, sizeof(note), dlt_err_fresh(&err)), 0);
    assert_non_null(strstr(err.msg, "'3'"));
    assert_non_null(strstr(err.msg, "numbers count from 0"));
    dlt_dataset_close(ds);
    /* A folder's classes are names, never positions. */
    {
        static const char *const numbered[] = {"0", "1"};
        char root2[512];
        snprintf(root2, sizeof(root2), "%s/mapnum", g_dir);
        dlt_test_make_folder(root2, numbered, 2, 1, 0);
        assert_int_equal(dlt_dataset_open_folder(&ds, root2, NULL, dlt_err_fresh(&err)), 0);
        assert_int_not_equal(dlt_dataset_map_classes(ds, "x\ny", note, sizeof(note), dlt_err_fresh(&err)), 0);
        dlt_dataset_close(ds);
    }
    /* RecordIO: the names from PATH.classes; the class count is theirs. */
    {
        char rec[512];
        dlt_recordio_writer w;
        dlt_dataset *rs;
        snprintf(rec, sizeof(rec), "%s/named.rec", g_dir);
        assert_int_equal(dlt_dataset_open_folder(&ds, root, NULL, dlt_err_fresh(&err)), 0);
        assert_int_equal(dlt_recordio_create(&w, rec, dlt_err_fresh(&err)), 0);
        assert_int_equal(dlt_dataset_read(ds, 0, &buf, &cap, &len, &label, name, sizeof(name), dlt_err_fresh(&err)), 0);
        assert_int_equal(dlt_recordio_append(&w, 0, 0.f, buf, len, dlt_err_fresh(&err)), 0);
        assert_int_equal(dlt_recordio_close(&w, dlt_err_fresh(&err)), 0);
        assert_int_equal(dlt_recordio_write_classes(rec, ds, dlt_err_fresh(&err)), 0);
        assert_int_equal(dlt_dataset_open_recordio(&rs, rec, dlt_err_fresh(&err)), 0);
        assert_int_equal(dlt_dataset_classes(rs), 2); /* labels say 1 class; the names 2 */
        assert_string_equal(dlt_dataset_class_name(rs, 1), "c");
        assert_int_equal(dlt_dataset_map_classes(rs, "c\na", note, sizeof(note), dlt_err_fresh(&err)), 0);
        assert_int_equal(dlt_dataset_read(rs, 0, &buf, &cap, &len, &label, name, sizeof(name), dlt_err_fresh(&err)), 0);
        assert_int_equal(label, 1);
        dlt_dataset_close(rs);
        dlt_dataset_close(ds);
        /* A name twice in PATH.classes: matching by name would be ambiguous. */
        snprintf(p, sizeof(p), "%s/named.classes", g_dir);
        dlt_test_write_str(p, "a\na\n");
        assert_int_not_equal(dlt_dataset_open_recordio(&rs, rec, dlt_err_fresh(&err)), 0);
        assert_non_null(strstr(err.msg, "names the class 'a' more than once"));
    }
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_folder_and_recordio), cmocka_unit_test(test_recordio_index_damage),
        cmocka_unit_test(test_folder_left_out),     cmocka_unit_test(test_folder_long_paths),
        cmocka_unit_test(test_labels_file),         cmocka_unit_test(test_folder_out_of_memory),
        cmocka_unit_test(test_map_classes),
    };
    int rc;
    dlt_test_dir_make("dataset");
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    return dlt_test_dir_remove() == 0 ? rc : 1;
}
