/* SPDX-License-Identifier: Apache-2.0 */
/* The data pipeline: crop parameters against their definitions, JPEG decode + transform on
 * images made here with libjpeg-turbo (RGB, grayscale, CMYK, progressive, odd sizes), refusal of
 * damaged data without poisoning the next decode, ImageFolder class order, RecordIO round trip
 * (including a record split around the magic number), and the loader's determinism, sharding and
 * bad-image handling. */
#include "config.h"

#include <errno.h>
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

#include "trainer/data/dataset.h"
#include "trainer/data/loader.h"
#include "trainer/data/transform.h"
#include "trainer/common/rng.h"

static char g_dir[256];

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

/* kind: 0 RGB 4:2:0, 1 grayscale, 2 CMYK, 3 progressive 4:2:0; + 16: sharp colour texture
 * (per-pixel noise: the chroma edges where cropped decoding could differ from a whole decode). */
static unsigned char *_jpeg(int w, int h, int kind, unsigned long *len)
{
    int textured = kind & 16;
    kind &= 15;
    tjhandle tj = tjInitCompress();
    unsigned char *rgb = malloc((size_t)w * h * 4), *out = NULL;
    int pf = kind == 2 ? TJPF_CMYK : TJPF_RGB, samp = kind == 1 ? TJSAMP_GRAY : kind == 2 ? TJSAMP_444 : TJSAMP_420;
    const int ps = tjPixelSize[pf];
    /* Smooth gradients (a photo survives DCT downscaling; a one-pixel pattern would average out). */
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int k = 0; k < ps; k++)
                rgb[((size_t)y * w + x) * ps + k] =
                    (unsigned char)(k == 3 ? 255
                                    : textured ? (int)(((uint32_t)x * 73856093u ^ (uint32_t)y * 19349663u ^ (uint32_t)k * 83492791u) >> 13) % 256
                                               : (x * 200 / w + y * 50 / h + 60 * k) % 256);
    assert_int_equal(tjCompress2(tj, rgb, w, w * ps, h, pf, &out, len, samp, 90,
                                 kind == 3 ? TJFLAG_PROGRESSIVE : 0),
                     0);
    tjDestroy(tj);
    free(rgb);
    return out;
}

static void _write(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    fclose(f);
}

static void test_crop_parameters(void **state)
{
    dlt_rng r;
    dlt_crop c;
    (void)state;
    dlt_rng_seed(&r, 1, 2);
    for (int i = 0; i < 20000; i++) {
        /* Aspect inside [3/4, 4/3]: the fallback then is the whole image, inside the bounds below. */
        int w = 32 + (int)dlt_rng_below(&r, 900), h = (int)(w * (0.75 + 0.58 * dlt_rng_uniform(&r)));
        double area, ratio;
        dlt_crop_random_resized(&r, w, h, &c);
        assert_true(c.x >= 0 && c.y >= 0 && c.w >= 1 && c.h >= 1 && c.x + c.w <= w && c.y + c.h <= h);
        area = (double)c.w * c.h / ((double)w * h);
        ratio = (double)c.w / c.h;
        /* Rounding to whole pixels moves area and ratio a little off the sampled values. */
        assert_true(area >= 0.08 * 0.9 && area <= 1.0);
        assert_true(ratio >= 0.75 * 0.9 && ratio <= 4.0 / 3.0 * 1.1);
    }
    dlt_crop_center(500, 375, 0.875, &c);
    assert_int_equal(c.w, 328);
    assert_int_equal(c.h, 328);
    assert_int_equal(c.x, 86);
    assert_int_equal(c.y, 23);
    /* A very narrow image: RandomResizedCrop falls back to the centre with the ratio clamped. */
    dlt_rng_seed(&r, 3, 4);
    dlt_crop_random_resized(&r, 1000, 40, &c);
    assert_true(c.w <= 1000 && c.h <= 40);
}

static void test_decode_transform(void **state)
{
    dlt_decoder *d = dlt_decoder_create();
    uint8_t out[64 * 64 * 3], again[64 * 64 * 3];
    char err[256];
    int num, den;
    (void)state;
    assert_non_null(d);
    for (int kind = 0; kind < 4; kind++) {
        unsigned long len;
        unsigned char *j = _jpeg(500, 375, kind, &len);
        dlt_rng r1, r2;
        int lo = 255, hi = 0;
        memset(out, 0xab, sizeof(out));
        assert_int_equal(dlt_decode_transform(d, j, len, 64, 0, NULL, out, err, sizeof(err)), 0);
        /* Centre crop 328 px -> 64: DCT scale 1/4 (82 px), not 1/8 (41 px < 64). */
        dlt_decoder_last_scale(d, &num, &den);
        assert_int_equal(num * 4, den);
        for (size_t i = 0; i < sizeof(out); i++) {
            lo = out[i] < lo ? out[i] : lo;
            hi = out[i] > hi ? out[i] : hi;
        }
        if (hi - lo <= 50)
            fail_msg("kind %d: output spans only %d..%d", kind, lo, hi); /* an image, not a constant fill */
        dlt_rng_seed(&r1, 9, 9);
        dlt_rng_seed(&r2, 9, 9);
        assert_int_equal(dlt_decode_transform(d, j, len, 64, 1, &r1, out, err, sizeof(err)), 0);
        assert_int_equal(dlt_decode_transform(d, j, len, 64, 1, &r2, again, err, sizeof(err)), 0);
        assert_memory_equal(out, again, sizeof(out)); /* deterministic for a seed */
        tjFree(j);
    }
    {
        /* Smaller than the output: upsampled at scale 1. */
        unsigned long len;
        unsigned char *j = _jpeg(20, 30, 0, &len);
        assert_int_equal(dlt_decode_transform(d, j, len, 64, 0, NULL, out, err, sizeof(err)), 0);
        dlt_decoder_last_scale(d, &num, &den);
        assert_int_equal(num, den);
        tjFree(j);
    }
    dlt_decoder_destroy(d);
}

/* Decoding only the crop's region gives the pixels decoding the whole image and cutting gives:
 * every kind of JPEG (4:2:0, grayscale, CMYK, progressive), many random crops and scales. */
static void test_region_decode(void **state)
{
    dlt_decoder *whole = dlt_decoder_create(), *region = dlt_decoder_create();
    static uint8_t a[224 * 224 * 3], b[224 * 224 * 3];
    char err[256];
    (void)state;
    assert_non_null(whole);
    assert_non_null(region);
    dlt_decoder_decode_whole(whole, 1);
    for (int kind = 0; kind < 4; kind++) {
        unsigned long len;
        unsigned char *j = _jpeg(500, 375, kind | 16, &len);
        for (int i = 0; i < 40; i++) {
            dlt_rng r1, r2;
            int out = i % 2 ? 224 : 64, worst = 0; /* 224: mostly full scale, where chroma is upsampled */
            dlt_rng_seed(&r1, 77, (uint64_t)i);
            dlt_rng_seed(&r2, 77, (uint64_t)i);
            assert_int_equal(dlt_decode_transform(whole, j, len, out, 1, &r1, a, err, sizeof(err)), 0);
            assert_int_equal(dlt_decode_transform(region, j, len, out, 1, &r2, b, err, sizeof(err)), 0);
            for (size_t k = 0; k < (size_t)out * out * 3; k++)
                worst = abs(a[k] - b[k]) > worst ? abs(a[k] - b[k]) : worst;
            if (worst > 0)
                fail_msg("kind %d crop %d (out %d): region decode differs from whole decode by %d", kind, i, out,
                         worst);
        }
        tjFree(j);
    }
    dlt_decoder_destroy(whole);
    dlt_decoder_destroy(region);
}

static void test_damaged_data(void **state)
{
    dlt_decoder *d = dlt_decoder_create();
    uint8_t out[32 * 32 * 3], junk[2048];
    char err[256];
    unsigned long len;
    unsigned char *j = _jpeg(100, 80, 0, &len);
    (void)state;
    for (size_t i = 0; i < sizeof(junk); i++)
        junk[i] = (uint8_t)(i * 31 + 7);
    assert_int_equal(dlt_decode_transform(d, j, 0, 32, 0, NULL, out, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "empty"));
    assert_int_equal(dlt_decode_transform(d, junk, sizeof(junk), 32, 0, NULL, out, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "not a readable JPEG"));
    /* Right after a failure the next good image must decode (libjpeg-turbo 2.1 handle reuse bug). */
    assert_int_equal(dlt_decode_transform(d, j, len, 32, 0, NULL, out, err, sizeof(err)), 0);
    assert_int_equal(dlt_decode_transform(d, j, len / 2, 32, 0, NULL, out, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "JPEG"));
    assert_int_equal(dlt_decode_transform(d, j, len, 32, 0, NULL, out, err, sizeof(err)), 0);
    /* The first 10 bytes of a JPEG: truncated, not "dimensions out of range". */
    assert_int_equal(dlt_decode_transform(d, j, 10, 32, 0, NULL, out, err, sizeof(err)), -EINVAL);
    assert_true(strstr(err, "truncated") || strstr(err, "not a readable JPEG"));
    assert_null(strstr(err, "dimensions"));
    assert_int_equal(dlt_decode_transform(d, j, len, 32, 0, NULL, out, err, sizeof(err)), 0);
    memcpy(junk, j, len < sizeof(junk) ? len : sizeof(junk));
    junk[len / 2] ^= 0xff;
    junk[len / 2 + 1] ^= 0x5a;
    (void)dlt_decode_transform(d, junk, len < sizeof(junk) ? len : sizeof(junk), 32, 0, NULL, out, err, sizeof(err));
    assert_int_equal(dlt_decode_transform(d, j, len, 32, 0, NULL, out, err, sizeof(err)), 0);
    tjFree(j);
    dlt_decoder_destroy(d);
}

static void _make_folder(const char *root, const char *const *classes, int ncls, int per, int bad_in_first)
{
    char p[512];
    mkdir(root, 0755);
    for (int c = 0; c < ncls; c++) {
        snprintf(p, sizeof(p), "%s/%s", root, classes[c]);
        mkdir(p, 0755);
        for (int i = 0; i < per; i++) {
            unsigned long len;
            unsigned char *j = _jpeg(40 + 8 * c, 30 + 4 * i, i % 4, &len);
            snprintf(p, sizeof(p), "%s/%s/img%02d.JPEG", root, classes[c], i);
            _write(p, j, (c == 0 && i < bad_in_first) ? len / 3 : len);
            tjFree(j);
        }
    }
    snprintf(p, sizeof(p), "%s/%s/README.txt", root, classes[0]);
    _write(p, "not an image", 12); /* ignored: not a .JPEG/.jpg */
}

static void test_folder_and_recordio(void **state)
{
    static const char *const classes[] = {"b", "A", "a", "n01440764"};
    char root[512], rec[512], name[1024], err[512];
    dlt_dataset *ds, *rs;
    uint8_t *buf = NULL, *buf2 = NULL;
    size_t cap = 0, cap2 = 0, len, len2;
    int32_t label, label2;
    dlt_recordio_writer w;
    (void)state;
    snprintf(root, sizeof(root), "%s/folder", g_dir);
    _make_folder(root, classes, 4, 3, 0);
    assert_int_equal(dlt_dataset_open_folder(&ds, root, NULL, err, sizeof(err)), 0);
    assert_int_equal(dlt_dataset_classes(ds), 4);
    assert_int_equal(dlt_dataset_count(ds), 12);
    /* torchvision: sorted(os.scandir names) = code point order. */
    assert_string_equal(dlt_dataset_class_name(ds, 0), "A");
    assert_string_equal(dlt_dataset_class_name(ds, 1), "a");
    assert_string_equal(dlt_dataset_class_name(ds, 2), "b");
    assert_string_equal(dlt_dataset_class_name(ds, 3), "n01440764");
    assert_int_equal(dlt_dataset_read(ds, 0, &buf, &cap, &len, &label, name, sizeof(name), err, sizeof(err)), 0);
    assert_int_equal(label, 0);
    assert_non_null(strstr(name, "/A/img00.JPEG"));

    snprintf(rec, sizeof(rec), "%s/data.rec", g_dir);
    assert_int_equal(dlt_recordio_create(&w, rec, err, sizeof(err)), 0);
    for (int64_t i = 0; i < dlt_dataset_count(ds); i++) {
        assert_int_equal(dlt_dataset_read(ds, i, &buf, &cap, &len, &label, name, sizeof(name), err, sizeof(err)), 0);
        assert_int_equal(dlt_recordio_append(&w, (uint64_t)i, (float)label, buf, len, err, sizeof(err)), 0);
    }
    assert_int_equal(dlt_recordio_close(&w, err, sizeof(err)), 0);
    assert_int_equal(dlt_dataset_open_recordio(&rs, rec, err, sizeof(err)), 0);
    assert_int_equal(dlt_dataset_count(rs), 12);
    assert_int_equal(dlt_dataset_classes(rs), 4);
    for (int64_t i = 0; i < 12; i++) {
        assert_int_equal(dlt_dataset_read(ds, i, &buf, &cap, &len, &label, name, sizeof(name), err, sizeof(err)), 0);
        assert_int_equal(dlt_dataset_read(rs, i, &buf2, &cap2, &len2, &label2, name, sizeof(name), err, sizeof(err)), 0);
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
#define PART(cflag, data, n)                                                                                   \
    do {                                                                                                       \
        uint32_t l = ((uint32_t)(cflag) << 29) | (uint32_t)(n);                                                \
        memcpy(file + o, &magic, 4);                                                                           \
        memcpy(file + o + 4, &l, 4);                                                                           \
        memcpy(file + o + 8, data, n);                                                                         \
        o += 8 + (((n) + 3u) & ~3u);                                                                           \
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
        _write(rec2, file, o);
        _write(idx, "0\t0\n", 4);
        assert_int_equal(dlt_dataset_open_recordio(&rs, rec2, err, sizeof(err)), 0);
        assert_int_equal(dlt_dataset_read(rs, 0, &buf2, &cap2, &len2, &label2, name, sizeof(name), err, sizeof(err)),
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
        _write(rec2, file, o);
        assert_int_not_equal(dlt_dataset_open_recordio(&rs, rec2, err, sizeof(err)), 0);
        assert_non_null(strstr(err, "line 1: no record starts at offset 0"));
    }
    free(buf);
    free(buf2);
    dlt_dataset_close(ds);
}

/* Writes text to path (the index under test). */
static void _write_str(const char *path, const char *text)
{
    _write(path, text, strlen(text));
}

/* A damaged .rec/.idx pair is refused at open, naming the index line and why; an intact one gives
 * the class count of every record's label. */
static void test_recordio_index_damage(void **state)
{
    char rec[512], idx[512], err[512], text[4096];
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
    assert_int_equal(dlt_recordio_create(&w, rec, err, sizeof(err)), 0);
    for (int i = 0; i < 10; i++) {
        off[i] = w.offset;
        assert_int_equal(dlt_recordio_append(&w, (uint64_t)i, (float)(i % 5), img, sizeof(img) - (size_t)i, err,
                                             sizeof(err)), 0);
    }
    total = w.offset;
    assert_int_equal(dlt_recordio_close(&w, err, sizeof(err)), 0);
    assert_int_equal(dlt_dataset_open_recordio(&rs, rec, err, sizeof(err)), 0);
    assert_int_equal(dlt_dataset_count(rs), 10);
    assert_int_equal(dlt_dataset_classes(rs), 5);
    dlt_dataset_close(rs);

    /* The index cut mid-line (its last line without an end). */
    for (int i = 0; i < 10; i++)
        o += (size_t)snprintf(text + o, sizeof(text) - o, "%d\t%llu\n", i, (unsigned long long)off[i]);
    _write(idx, text, o - 2);
    assert_int_not_equal(dlt_dataset_open_recordio(&rs, rec, err, sizeof(err)), 0);
    assert_non_null(strstr(err, "line 10: cut short"));
    assert_non_null(strstr(err, "dmg.idx"));
    /* A garbage line. */
    snprintf(text, sizeof(text), "0\t%llu\n1\t%llu\nhello world\n", (unsigned long long)off[0],
             (unsigned long long)off[1]);
    _write_str(idx, text);
    assert_int_not_equal(dlt_dataset_open_recordio(&rs, rec, err, sizeof(err)), 0);
    assert_non_null(strstr(err, "line 3: 'hello world' is not \"KEY<TAB>OFFSET\""));
    /* A duplicated offset (the same record twice). */
    snprintf(text, sizeof(text), "0\t%llu\n1\t%llu\n2\t%llu\n", (unsigned long long)off[0],
             (unsigned long long)off[1], (unsigned long long)off[1]);
    _write_str(idx, text);
    assert_int_not_equal(dlt_dataset_open_recordio(&rs, rec, err, sizeof(err)), 0);
    assert_non_null(strstr(err, "line 3: the same offset as the line before"));
    /* Lines out of order. */
    snprintf(text, sizeof(text), "0\t%llu\n1\t%llu\n", (unsigned long long)off[1], (unsigned long long)off[0]);
    _write_str(idx, text);
    assert_int_not_equal(dlt_dataset_open_recordio(&rs, rec, err, sizeof(err)), 0);
    assert_non_null(strstr(err, "line 2: before the end of the record"));
    /* An offset inside a record (no magic there). */
    snprintf(text, sizeof(text), "0\t%llu\n1\t%llu\n", (unsigned long long)off[0], (unsigned long long)off[1] + 4);
    _write_str(idx, text);
    assert_int_not_equal(dlt_dataset_open_recordio(&rs, rec, err, sizeof(err)), 0);
    assert_non_null(strstr(err, "line 2: no record starts at offset"));
    /* The whole index, the .rec cut in the 7th record: refused at line 7, not "3 classes". */
    o = 0;
    for (int i = 0; i < 10; i++)
        o += (size_t)snprintf(text + o, sizeof(text) - o, "%d\t%llu\n", i, (unsigned long long)off[i]);
    _write(idx, text, o);
    assert_int_equal(truncate(rec, (off_t)(off[6] + 40)), 0);
    assert_int_not_equal(dlt_dataset_open_recordio(&rs, rec, err, sizeof(err)), 0);
    assert_non_null(strstr(err, "line 7: the record at offset"));
    assert_non_null(strstr(err, "the .rec was truncated"));
    /* Cut between records: the offsets past the end are named. */
    assert_int_equal(truncate(rec, (off_t)off[3]), 0);
    assert_int_not_equal(dlt_dataset_open_recordio(&rs, rec, err, sizeof(err)), 0);
    assert_non_null(strstr(err, "line 4: offset"));
    assert_non_null(strstr(err, "past the end of the .rec"));
    (void)total;
    f = fopen(rec, "rb");
    assert_non_null(f);
    fclose(f);
}

/* What a folder holds beyond its JPEGs is counted (nested folders, other images, dangling links,
 * other files); an empty class folder is refused; labels-file lines naming no file and images
 * without a line are left out and counted, never read (a failed read is replaced by another image:
 * an evaluation would score that one twice). */
static void test_folder_left_out(void **state)
{
    static const char *const classes[] = {"c0", "c1", "c2"};
    char root[512], p[700], q[700], err[512], what[2048];
    const dlt_dataset_left_out *lo;
    dlt_dataset *ds;
    (void)state;
    snprintf(root, sizeof(root), "%s/leftout", g_dir);
    _make_folder(root, classes, 3, 2, 0); /* and c0/README.txt */
    snprintf(p, sizeof(p), "%s/c1/sub", root);
    mkdir(p, 0755);
    snprintf(p, sizeof(p), "%s/c1/photo.png", root);
    _write(p, "png", 3);
    snprintf(p, sizeof(p), "%s/c2/gone.JPEG", root);
    assert_int_equal(symlink("/nonexistent/x.JPEG", p), 0);
    assert_int_equal(dlt_dataset_open_folder(&ds, root, NULL, err, sizeof(err)), 0);
    assert_int_equal(dlt_dataset_count(ds), 6);
    lo = dlt_dataset_left(ds);
    assert_non_null(lo);
    assert_int_equal(lo->nested, 1);
    assert_int_equal(lo->images, 1);
    assert_int_equal(lo->unreadable, 1);
    assert_int_equal(lo->other, 1);
    assert_non_null(strstr(lo->first_images, "c1/photo.png"));
    assert_int_equal(dlt_dataset_describe_left_out(ds, what, sizeof(what)), 3); /* README.txt aside */
    assert_non_null(strstr(what, "1 dangling symbolic link(s) or unreadable entries (first: "));
    assert_non_null(strstr(what, "c2/gone.JPEG"));
    dlt_dataset_close(ds);
    /* A class folder with no JPEG in it. */
    snprintf(p, sizeof(p), "%s/c3", root);
    mkdir(p, 0755);
    assert_int_not_equal(dlt_dataset_open_folder(&ds, root, NULL, err, sizeof(err)), 0);
    assert_non_null(strstr(err, "class folder"));
    assert_non_null(strstr(err, "leftout/c3 holds no .JPEG/.jpg images"));

    /* A flat folder and a labels file: one line names a missing file, one image has no line. */
    snprintf(root, sizeof(root), "%s/flat", g_dir);
    mkdir(root, 0755);
    for (int i = 0; i < 4; i++) {
        unsigned long len;
        unsigned char *j = _jpeg(40, 40, 0, &len);
        snprintf(p, sizeof(p), "%s/i%d.JPEG", root, i);
        _write(p, j, len);
        tjFree(j);
    }
    snprintf(q, sizeof(q), "%s/flat.txt", g_dir);
    _write_str(q, "i0.JPEG a\ni1.JPEG b\ni2.JPEG a\nnothere.JPEG b\n");
    assert_int_equal(dlt_dataset_open_folder(&ds, root, q, err, sizeof(err)), 0);
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
        assert_int_equal(dlt_dataset_read(ds, i, &buf, &cap, &len, &label, name, sizeof(name), err, sizeof(err)), 0);
        free(buf);
    }
    dlt_dataset_close(ds);
}

/* A labels file: comments and blank lines skipped, classes numbered in sorted order; a malformed or
 * too long line, a file named twice, no lines, lines naming only missing files and a read error
 * are each refused with their own reason (none gives a smaller data set or another message). */
static void test_labels_file(void **state)
{
    char root[512], p[700], q[700], err[512], name[1024], longline[1200];
    dlt_dataset *ds;
    uint8_t *buf = NULL;
    size_t cap = 0, len;
    int32_t label;
    (void)state;
    snprintf(root, sizeof(root), "%s/labels", g_dir);
    mkdir(root, 0755);
    for (int i = 0; i < 3; i++) {
        unsigned long jl;
        unsigned char *j = _jpeg(40, 40, 0, &jl);
        snprintf(p, sizeof(p), "%s/x%d.jpg", root, i);
        _write(p, j, jl);
        tjFree(j);
    }
    snprintf(q, sizeof(q), "%s/labels.txt", g_dir);
    _write_str(q, "# file class\n\nx0.jpg zebra\n  x1.jpg ant\nx2.jpg zebra\n");
    assert_int_equal(dlt_dataset_open_folder(&ds, root, q, err, sizeof(err)), 0);
    assert_int_equal(dlt_dataset_count(ds), 3);
    assert_int_equal(dlt_dataset_classes(ds), 2);
    assert_string_equal(dlt_dataset_class_name(ds, 0), "ant");
    assert_string_equal(dlt_dataset_class_name(ds, 1), "zebra");
    for (int64_t i = 0; i < 3; i++) {
        assert_int_equal(dlt_dataset_read(ds, i, &buf, &cap, &len, &label, name, sizeof(name), err, sizeof(err)), 0);
        assert_int_equal(label, strstr(name, "x1.jpg") ? 0 : 1);
    }
    free(buf);
    dlt_dataset_close(ds);

    _write_str(q, "x0.jpg zebra\nx1.jpg ant extra\n");
    assert_int_equal(dlt_dataset_open_folder(&ds, root, q, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "line 2: 'x1.jpg ant extra' is not \"FILENAME CLASS\""));
    memset(longline, 'a', sizeof(longline) - 2);
    longline[sizeof(longline) - 2] = '\n';
    longline[sizeof(longline) - 1] = '\0';
    _write_str(q, longline);
    assert_int_equal(dlt_dataset_open_folder(&ds, root, q, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "line 1: longer than 1022 characters"));
    _write_str(q, "x0.jpg zebra\nx1.jpg ant\nx0.jpg ant\n");
    assert_int_equal(dlt_dataset_open_folder(&ds, root, q, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "lists x0.jpg more than once"));
    _write_str(q, "# nothing\n\n");
    assert_int_equal(dlt_dataset_open_folder(&ds, root, q, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "lists no \"FILENAME CLASS\" lines"));
    /* Lines there, files not: said so, not "no lines". */
    _write_str(q, "gone0.jpg zebra\ngone1.jpg ant\n");
    assert_int_not_equal(dlt_dataset_open_folder(&ds, root, q, err, sizeof(err)), 0);
    assert_non_null(strstr(err, "none of the 2 file(s) labels file"));
    assert_non_null(strstr(err, "(first: gone0.jpg)"));
    /* A read error (a regular file that cannot be read: /proc/self/mem at offset 0) is not an
     * empty or shorter list. */
    if (access("/proc/self/mem", R_OK) == 0) {
        assert_int_equal(dlt_dataset_open_folder(&ds, root, "/proc/self/mem", err, sizeof(err)), -EIO);
        assert_non_null(strstr(err, "reading labels file /proc/self/mem after line 0"));
    }
}

/* Out of memory while a folder is read (each copy of a name or a path failing in turn, for the
 * class folders and for a labels file): always refused with -ENOMEM, never a data set with fewer
 * images or classes. */
static void test_folder_out_of_memory(void **state)
{
    static const char *const classes[] = {"c0", "c1", "c2"};
    char root[512], flat[512], q[700], p[700], err[512];
    const char *labels[2] = {NULL, q};
    const char *roots[2] = {root, flat};
    dlt_dataset *ds;
    (void)state;
    snprintf(root, sizeof(root), "%s/oom", g_dir);
    _make_folder(root, classes, 3, 3, 0);
    snprintf(flat, sizeof(flat), "%s/oom/c1", g_dir);
    snprintf(q, sizeof(q), "%s/oom.txt", g_dir);
    _write_str(q, "img00.JPEG b\nimg01.JPEG a\nimg02.JPEG c\n");
    for (int kind = 0; kind < 2; kind++) {
        long calls;
        g_strdup_calls = 0;
        assert_int_equal(dlt_dataset_open_folder(&ds, roots[kind], labels[kind], err, sizeof(err)), 0);
        dlt_dataset_close(ds);
        calls = g_strdup_calls;
        assert_true(calls >= 9);
        for (long k = 0; k < calls; k++) {
            int rc;
            g_strdup_fail = k;
            rc = dlt_dataset_open_folder(&ds, roots[kind], labels[kind], err, sizeof(err));
            g_strdup_fail = -1;
            snprintf(p, sizeof(p), "%s: copy %ld of %ld failing: rc %d (%s)", kind ? "labels file" : "class folders",
                     k, calls, rc, rc ? err : "opened");
            if (rc != -ENOMEM || !strstr(err, "out of memory")) {
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
    char root[512], p[700], err[512], note[512], name[1024];
    dlt_dataset *ds;
    uint8_t *buf = NULL;
    size_t cap = 0, len;
    int32_t label;
    char *list;
    (void)state;
    snprintf(root, sizeof(root), "%s/mapval", g_dir);
    _make_folder(root, val_classes, 2, 2, 0);
    assert_int_equal(dlt_dataset_open_folder(&ds, root, NULL, err, sizeof(err)), 0);
    list = dlt_dataset_class_list(ds);
    assert_string_equal(list, "a\nc");
    free(list);
    assert_int_equal(dlt_dataset_map_classes(ds, "a\nb\nc\nd", note, sizeof(note), err, sizeof(err)), 0);
    assert_string_equal(note, "");
    assert_int_equal(dlt_dataset_classes(ds), 4);
    assert_string_equal(dlt_dataset_class_name(ds, 2), "c");
    for (int64_t i = 0; i < dlt_dataset_count(ds); i++) {
        assert_int_equal(dlt_dataset_read(ds, i, &buf, &cap, &len, &label, name, sizeof(name), err, sizeof(err)), 0);
        assert_int_equal(label, strstr(name, "/a/") ? 0 : 2);
    }
    dlt_dataset_close(ds);
    /* A class that is not in the list. */
    assert_int_equal(dlt_dataset_open_folder(&ds, root, NULL, err, sizeof(err)), 0);
    assert_int_not_equal(dlt_dataset_map_classes(ds, "a\nb", note, sizeof(note), err, sizeof(err)), 0);
    assert_non_null(strstr(err, "1 of its 2 class(es) are not among the 2 classes it is scored against (a...b): 'c'"));
    dlt_dataset_close(ds);
    /* A labels file with numbers: positions; 1-based ones refused with the reason. */
    snprintf(p, sizeof(p), "%s/num.txt", g_dir);
    _write_str(p, "c/img00.JPEG 0\nc/img01.JPEG 2\na/img00.JPEG 2\n");
    assert_int_equal(dlt_dataset_open_folder(&ds, root, p, err, sizeof(err)), 0);
    assert_int_equal(dlt_dataset_map_classes(ds, "x\ny\nz", note, sizeof(note), err, sizeof(err)), 0);
    assert_non_null(strstr(note, "2 class(es) given as numbers are taken as positions 0..2"));
    assert_int_equal(dlt_dataset_read(ds, 1, &buf, &cap, &len, &label, name, sizeof(name), err, sizeof(err)), 0);
    assert_int_equal(label, 2);
    dlt_dataset_close(ds);
    _write_str(p, "c/img00.JPEG 1\nc/img01.JPEG 2\na/img00.JPEG 3\n");
    assert_int_equal(dlt_dataset_open_folder(&ds, root, p, err, sizeof(err)), 0);
    assert_int_not_equal(dlt_dataset_map_classes(ds, "x\ny\nz", note, sizeof(note), err, sizeof(err)), 0);
    assert_non_null(strstr(err, "'3'"));
    assert_non_null(strstr(err, "numbers count from 0"));
    dlt_dataset_close(ds);
    /* A folder's classes are names, never positions. */
    {
        static const char *const numbered[] = {"0", "1"};
        char root2[512];
        snprintf(root2, sizeof(root2), "%s/mapnum", g_dir);
        _make_folder(root2, numbered, 2, 1, 0);
        assert_int_equal(dlt_dataset_open_folder(&ds, root2, NULL, err, sizeof(err)), 0);
        assert_int_not_equal(dlt_dataset_map_classes(ds, "x\ny", note, sizeof(note), err, sizeof(err)), 0);
        dlt_dataset_close(ds);
    }
    /* RecordIO: the names from PATH.classes; the class count is theirs. */
    {
        char rec[512];
        dlt_recordio_writer w;
        dlt_dataset *rs;
        snprintf(rec, sizeof(rec), "%s/named.rec", g_dir);
        assert_int_equal(dlt_dataset_open_folder(&ds, root, NULL, err, sizeof(err)), 0);
        assert_int_equal(dlt_recordio_create(&w, rec, err, sizeof(err)), 0);
        assert_int_equal(dlt_dataset_read(ds, 0, &buf, &cap, &len, &label, name, sizeof(name), err, sizeof(err)), 0);
        assert_int_equal(dlt_recordio_append(&w, 0, 0.f, buf, len, err, sizeof(err)), 0);
        assert_int_equal(dlt_recordio_close(&w, err, sizeof(err)), 0);
        assert_int_equal(dlt_recordio_write_classes(rec, ds, err, sizeof(err)), 0);
        assert_int_equal(dlt_dataset_open_recordio(&rs, rec, err, sizeof(err)), 0);
        assert_int_equal(dlt_dataset_classes(rs), 2); /* labels say 1 class; the names 2 */
        assert_string_equal(dlt_dataset_class_name(rs, 1), "c");
        assert_int_equal(dlt_dataset_map_classes(rs, "c\na", note, sizeof(note), err, sizeof(err)), 0);
        assert_int_equal(dlt_dataset_read(rs, 0, &buf, &cap, &len, &label, name, sizeof(name), err, sizeof(err)), 0);
        assert_int_equal(label, 1);
        dlt_dataset_close(rs);
        dlt_dataset_close(ds);
        /* A name twice in PATH.classes: matching by name would be ambiguous. */
        snprintf(p, sizeof(p), "%s/named.classes", g_dir);
        _write_str(p, "a\na\n");
        assert_int_not_equal(dlt_dataset_open_recordio(&rs, rec, err, sizeof(err)), 0);
        assert_non_null(strstr(err, "names the class 'a' more than once"));
    }
    free(buf);
}

static void _epoch(dlt_dataset *ds, int workers, int rank, int world, int strict, uint8_t *images, int32_t *labels,
                   int *rc_out, int64_t *bad)
{
    dlt_loader *l;
    dlt_loader_config c = {.batch = 4, .out = 32, .train = 1, .seed = 5, .rank = rank, .world = world,
                           .workers = workers, .depth = 2, .strict = strict};
    char err[512];
    int rc = 0;
    assert_int_equal(dlt_loader_create(&l, ds, &c, err, sizeof(err)), 0);
    assert_int_equal(dlt_loader_start(l, 1, 0), 0);
    for (int64_t s = 0; s < dlt_loader_steps_per_epoch(l) && rc == 0; s++)
        rc = dlt_loader_next(l, images + (size_t)s * 4 * 32 * 32 * 3, labels + s * 4, err, sizeof(err));
    *rc_out = rc;
    *bad = dlt_loader_bad_images(l);
    dlt_loader_destroy(l);
}

static void test_loader(void **state)
{
    static const char *const classes[] = {"c0", "c1", "c2", "c3"};
    char root[512], err[512];
    dlt_dataset *ds;
    uint8_t *a = calloc(16 * 32 * 32 * 3, 1), *b = calloc(16 * 32 * 32 * 3, 1);
    int32_t la[16], lb[16], counts[4] = {0};
    int rc;
    int64_t bad;
    (void)state;
    snprintf(root, sizeof(root), "%s/loader", g_dir);
    _make_folder(root, classes, 4, 4, 0);
    assert_int_equal(dlt_dataset_open_folder(&ds, root, NULL, err, sizeof(err)), 0);
    _epoch(ds, 1, 0, 1, 0, a, la, &rc, &bad);
    assert_int_equal(rc, 0);
    _epoch(ds, 3, 0, 1, 0, b, lb, &rc, &bad);
    assert_int_equal(rc, 0);
    assert_memory_equal(a, b, 16 * 32 * 32 * 3); /* thread count does not change the batches */
    assert_memory_equal(la, lb, sizeof(la));
    for (int i = 0; i < 16; i++)
        counts[la[i]]++;
    for (int c = 0; c < 4; c++)
        assert_int_equal(counts[c], 4); /* one epoch: every image once */
    /* Two ranks: disjoint halves, together the whole epoch. */
    _epoch(ds, 2, 0, 2, 0, a, la, &rc, &bad);
    _epoch(ds, 2, 1, 2, 0, b, lb, &rc, &bad);
    memset(counts, 0, sizeof(counts));
    for (int i = 0; i < 8; i++)
        counts[la[i]]++, counts[lb[i]]++;
    for (int c = 0; c < 4; c++)
        assert_int_equal(counts[c], 4);
    dlt_dataset_close(ds);

    /* Damaged images: replaced and counted; with strict the run fails naming the file. */
    snprintf(root, sizeof(root), "%s/loader_bad", g_dir);
    _make_folder(root, classes, 4, 4, 2);
    assert_int_equal(dlt_dataset_open_folder(&ds, root, NULL, err, sizeof(err)), 0);
    _epoch(ds, 2, 0, 1, 0, a, la, &rc, &bad);
    assert_int_equal(rc, 0);
    assert_true(bad >= 2);
    _epoch(ds, 2, 0, 1, 1, a, la, &rc, &bad);
    assert_int_equal(rc, -EIO);
    dlt_dataset_close(ds);
    free(a);
    free(b);
}

/* The zero-copy path the trainer uses: acquire hands out the ring slot itself (in memory from the
 * given allocator), held until released in order; the batches are those next() copies out; a ring
 * with every slot held refuses another acquire instead of waiting forever. */
static int g_allocs, g_frees;

static void *_count_alloc(void *arg, size_t bytes)
{
    (void)arg;
    g_allocs++;
    return malloc(bytes);
}

static void _count_free(void *arg, void *p)
{
    (void)arg;
    g_frees++;
    free(p);
}

static void test_loader_acquire(void **state)
{
    static const char *const classes[] = {"c0", "c1", "c2", "c3"};
    const size_t bb = 4 * 32 * 32 * 3;
    char root[512], err[512];
    dlt_dataset *ds;
    dlt_loader *l;
    dlt_loader_config c = {.batch = 4, .out = 32, .train = 1, .seed = 5, .rank = 0, .world = 1, .workers = 2,
                           .depth = 3, .alloc = _count_alloc, .release = _count_free};
    uint8_t *ref = calloc(4 * bb, 1);
    int32_t lref[16];
    const uint8_t *im[3];
    const int32_t *lb[3];
    int rc;
    int64_t bad;
    (void)state;
    snprintf(root, sizeof(root), "%s/loader_acq", g_dir);
    _make_folder(root, classes, 4, 4, 0);
    assert_int_equal(dlt_dataset_open_folder(&ds, root, NULL, err, sizeof(err)), 0);
    _epoch(ds, 2, 0, 1, 0, ref, lref, &rc, &bad); /* epoch 1 through next() */
    assert_int_equal(rc, 0);
    assert_int_equal(dlt_loader_create(&l, ds, &c, err, sizeof(err)), 0);
    assert_int_equal(g_allocs, 3); /* the ring's images come from the allocator */
    assert_int_equal(dlt_loader_start(l, 1, 0), 0);
    /* Hold two (the step's and the next), release the older, hold the third, and so on. */
    assert_int_equal(dlt_loader_acquire(l, &im[0], &lb[0], err, sizeof(err)), 0);
    assert_int_equal(dlt_loader_acquire(l, &im[1], &lb[1], err, sizeof(err)), 0);
    assert_ptr_not_equal(im[0], im[1]);
    assert_memory_equal(im[0], ref, bb);
    assert_memory_equal(im[1], ref + bb, bb);
    assert_memory_equal(lb[1], lref + 4, 4 * sizeof(int32_t));
    assert_int_equal(dlt_loader_acquire(l, &im[2], &lb[2], err, sizeof(err)), 0);
    assert_memory_equal(im[2], ref + 2 * bb, bb);
    /* Every slot held: refused, and the message says what to do. */
    assert_int_equal(dlt_loader_acquire(l, &im[0], &lb[0], err, sizeof(err)), -EBUSY);
    assert_non_null(strstr(err, "release"));
    dlt_loader_release(l);
    assert_int_equal(dlt_loader_acquire(l, &im[0], &lb[0], err, sizeof(err)), 0);
    assert_memory_equal(im[0], ref + 3 * bb, bb); /* decoded into the slot just given back */
    assert_memory_equal(im[1], ref + bb, bb);     /* still held: untouched */
    assert_memory_equal(lb[0], lref + 12, 4 * sizeof(int32_t));
    dlt_loader_destroy(l);
    assert_int_equal(g_frees, 3);
    dlt_dataset_close(ds);
    free(ref);
}

/* Evaluation scores every image exactly once whatever the batch and rank count: each rank's last
 * batch is short (its valid count says how short), a rank may have none; training with too few
 * images for one batch per rank is refused with the count, the batch, the ranks and the fix. */
static void test_loader_eval_exact(void **state)
{
    static const char *const classes[] = {"c0", "c1", "c2"};
    char root[512], err[512];
    dlt_dataset *ds;
    dlt_loader *l;
    uint8_t *img = calloc(4 * 32 * 32 * 3, 1);
    int32_t lab[4];
    (void)state;
    snprintf(root, sizeof(root), "%s/evalset", g_dir);
    _make_folder(root, classes, 3, 3, 0); /* 9 images: divides by neither batch 4 nor 2 or 4 ranks */
    assert_int_equal(dlt_dataset_open_folder(&ds, root, NULL, err, sizeof(err)), 0);
    for (int world = 1; world <= 16; world *= 2) {
        int seen[9] = {0}, total = 0;
        for (int rank = 0; rank < world; rank++) {
            dlt_loader_config c = {.batch = 4, .out = 32, .train = 0, .seed = 5, .rank = rank, .world = world,
                                   .workers = 2, .depth = 2};
            int64_t steps;
            assert_int_equal(dlt_loader_create(&l, ds, &c, err, sizeof(err)), 0);
            steps = dlt_loader_steps_per_epoch(l);
            assert_int_equal(dlt_loader_images_per_epoch(l), (9 - rank + world - 1) / world);
            assert_int_equal(steps, (dlt_loader_images_per_epoch(l) + 3) / 4);
            assert_int_equal(dlt_loader_start(l, 0, 0), 0);
            for (int64_t s = 0; s < steps; s++) {
                int nv;
                assert_int_equal(dlt_loader_next(l, img, lab, err, sizeof(err)), 0);
                nv = dlt_loader_last_valid(l);
                assert_true(nv >= 1 && nv <= 4);
                assert_true(s + 1 == steps || nv == 4); /* only the last batch is short */
                for (int j = 0; j < nv; j++) {
                    /* in order: rank r's k-th image is dataset index r + k * world (labels: 3 per class) */
                    int64_t idx = rank + (s * 4 + j) * world;
                    assert_true(idx < 9);
                    assert_int_equal(lab[j], idx / 3);
                    seen[idx]++;
                }
                total += nv;
            }
            if (steps == 0) /* fewer images than ranks: this rank has none, and says so if asked */
                assert_int_not_equal(dlt_loader_next(l, img, lab, err, sizeof(err)), 0);
            dlt_loader_destroy(l);
        }
        assert_int_equal(total, 9);
        for (int i = 0; i < 9; i++)
            assert_int_equal(seen[i], 1);
    }
    {
        /* Training: 9 images, batch 4 on 4 ranks: no full batch anywhere. */
        dlt_loader_config c = {.batch = 4, .out = 32, .train = 1, .seed = 5, .rank = 0, .world = 4, .workers = 1};
        assert_int_not_equal(dlt_loader_create(&l, ds, &c, err, sizeof(err)), 0);
        assert_non_null(strstr(err, "9 image(s)"));
        assert_non_null(strstr(err, "batch of 4 on each of 4 rank(s)"));
        assert_non_null(strstr(err, "--batch 2"));
        c.world = 16;
        assert_int_not_equal(dlt_loader_create(&l, ds, &c, err, sizeof(err)), 0);
        assert_non_null(strstr(err, "fewer ranks"));
        c.world = 2;
        assert_int_equal(dlt_loader_create(&l, ds, &c, err, sizeof(err)), 0);
        assert_int_equal(dlt_loader_steps_per_epoch(l), 1);
        dlt_loader_destroy(l);
    }
    dlt_dataset_close(ds);
    free(img);
}

/* Bad files once per run across ranks: what each rank found, exchanged, gives every rank the same
 * distinct total and nothing left to report. */
static void test_loader_bad_exchange(void **state)
{
    static const char *const classes[] = {"c0", "c1", "c2", "c3"};
    char root[512], err[512];
    dlt_dataset *ds;
    dlt_loader *l[2];
    uint8_t *img = calloc(4 * 32 * 32 * 3, 1);
    int32_t lab[4];
    int64_t found[2][16];
    int n[2];
    (void)state;
    snprintf(root, sizeof(root), "%s/badx", g_dir);
    _make_folder(root, classes, 4, 4, 2); /* c0/img00 and c0/img01 (indices 0 and 1) are damaged */
    assert_int_equal(dlt_dataset_open_folder(&ds, root, NULL, err, sizeof(err)), 0);
    for (int r = 0; r < 2; r++) {
        dlt_loader_config c = {.batch = 4, .out = 32, .train = 1, .seed = 5, .rank = r, .world = 2, .workers = 1};
        assert_int_equal(dlt_loader_create(&l[r], ds, &c, err, sizeof(err)), 0);
        assert_int_equal(dlt_loader_start(l[r], 0, 0), 0);
        for (int s = 0; s < 2; s++)
            assert_int_equal(dlt_loader_next(l[r], img, lab, err, sizeof(err)), 0);
    }
    for (int r = 0; r < 2; r++)
        n[r] = dlt_loader_bad_take(l[r], found[r], 16);
    assert_int_equal(n[0] + n[1] >= 2, 1); /* every damaged file met by some rank (replacements may add none) */
    for (int r = 0; r < 2; r++) {
        dlt_loader_bad_merge(l[r], found[1 - r], n[1 - r]);
        dlt_loader_bad_merge(l[r], found[r], n[r]); /* own indices again: no double count */
        assert_int_equal(dlt_loader_bad_files(l[r]), 2);
        assert_int_equal(dlt_loader_bad_take(l[r], found[r], 16), 0); /* handed out once */
    }
    {
        int64_t junk[2] = {-1, 99};
        dlt_loader_bad_merge(l[0], junk, 2); /* out of range: ignored */
        assert_int_equal(dlt_loader_bad_files(l[0]), 2);
    }
    dlt_loader_destroy(l[0]);
    dlt_loader_destroy(l[1]);
    dlt_dataset_close(ds);
    free(img);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crop_parameters), cmocka_unit_test(test_decode_transform),
        cmocka_unit_test(test_region_decode),
        cmocka_unit_test(test_damaged_data),   cmocka_unit_test(test_folder_and_recordio),
        cmocka_unit_test(test_recordio_index_damage),
        cmocka_unit_test(test_folder_left_out),
        cmocka_unit_test(test_labels_file),
        cmocka_unit_test(test_folder_out_of_memory),
        cmocka_unit_test(test_map_classes),
        cmocka_unit_test(test_loader),
        cmocka_unit_test(test_loader_acquire),         cmocka_unit_test(test_loader_eval_exact),
        cmocka_unit_test(test_loader_bad_exchange),
    };
    char cmd[300];
    int rc;
    snprintf(g_dir, sizeof(g_dir), "/tmp/dlt-test-data-%d", (int)getpid());
    mkdir(g_dir, 0755);
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", g_dir);
    if (system(cmd) != 0)
        return 1;
    return rc;
}
