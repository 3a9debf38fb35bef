/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of trainer/data/transform.c: crop parameters against their definitions, JPEG decode +
 * transform on images made here with libjpeg-turbo (RGB, grayscale, CMYK, progressive, odd sizes),
 * region decode against a whole decode, refusal of damaged data without poisoning the next, and
 * PNG (every colour type, 8 and 16 bits, written here by tests/fixtures/png_write.c) decoded to
 * the pixels the writer was given, the format told by content whatever the name. */
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
#include <zlib.h>

#include <cmocka.h>

#include "common/rng.h"
#include "tests/fixtures/png_write.h"
#include "tests/unit/data_fixture.h"
#include "trainer/data/transform.h"

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

/* torchvision's RandomResizedCrop.get_params (scale 0.08..1, ratio 3/4..4/3, 10 tries, then the
 * centre with the ratio clamped), written from its documentation with its own generator
 * (splitmix64): the reference the crop areas' histogram is held to. */
static uint64_t _sm_state;
static double _sm_uniform(void)
{
    uint64_t z = (_sm_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (double)(z >> 11) / 9007199254740992.0;
}

static double _torchvision_area(int width, int height)
{
    double area = (double)width * height, lo = log(3.0 / 4.0), hi = log(4.0 / 3.0);
    for (int i = 0; i < 10; i++) {
        double target = area * (0.08 + 0.92 * _sm_uniform()), ratio = exp(lo + (hi - lo) * _sm_uniform());
        long w = lround(sqrt(target * ratio)), h = lround(sqrt(target / ratio));
        if (w > 0 && h > 0 && w <= width && h <= height)
            return (double)w * h / area;
    }
    return 1.0; /* 500x375 is inside the ratios: the fallback is the whole image */
}

static void test_crop_areas_as_torchvision(void **state)
{
    enum { DRAWS = 40000, BINS = 5 };
    double ours[BINS] = {0}, theirs[BINS] = {0};
    dlt_rng r;
    dlt_crop c;
    (void)state;
    dlt_rng_seed(&r, 5, 6);
    _sm_state = 12345;
    for (int i = 0; i < DRAWS; i++) {
        double a;
        dlt_crop_random_resized(&r, 500, 375, &c);
        a = (double)c.w * c.h / (500.0 * 375.0);
        ours[a >= 1.0 ? BINS - 1 : (int)(a * BINS)] += 1.0 / DRAWS;
        a = _torchvision_area(500, 375);
        theirs[a >= 1.0 ? BINS - 1 : (int)(a * BINS)] += 1.0 / DRAWS;
    }
    for (int b = 0; b < BINS; b++)
        if (fabs(ours[b] - theirs[b]) > 0.015)
            fail_msg("crop area %.1f..%.1f: %.4f of the crops, torchvision's sampling %.4f", b / (double)BINS,
                     (b + 1) / (double)BINS, ours[b], theirs[b]);
    assert_true(ours[0] > 0.1); /* small crops occur: a fifth of the image or less, often */
}

static void test_decode_transform(void **state)
{
    dlt_decoder *d = dlt_decoder_create();
    uint8_t out[64 * 64 * 3], again[64 * 64 * 3];
    dlt_err err = DLT_ERR_INIT;
    int num, den;
    (void)state;
    assert_non_null(d);
    for (int kind = 0; kind < 4; kind++) {
        unsigned long len;
        unsigned char *j = dlt_test_jpeg(500, 375, kind, &len);
        dlt_rng r1, r2;
        int lo = 255, hi = 0;
        memset(out, 0xab, sizeof(out));
        assert_int_equal(dlt_decode_transform(d, j, len, 64, 0, NULL, out, dlt_err_fresh(&err)), 0);
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
        assert_int_equal(dlt_decode_transform(d, j, len, 64, 1, &r1, out, dlt_err_fresh(&err)), 0);
        assert_int_equal(dlt_decode_transform(d, j, len, 64, 1, &r2, again, dlt_err_fresh(&err)), 0);
        assert_memory_equal(out, again, sizeof(out)); /* deterministic for a seed */
        tjFree(j);
    }
    {
        /* Smaller than the output: upsampled at scale 1. */
        unsigned long len;
        unsigned char *j = dlt_test_jpeg(20, 30, 0, &len);
        assert_int_equal(dlt_decode_transform(d, j, len, 64, 0, NULL, out, dlt_err_fresh(&err)), 0);
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
    dlt_err err = DLT_ERR_INIT;
    (void)state;
    assert_non_null(whole);
    assert_non_null(region);
    dlt_decoder_decode_whole(whole, 1);
    for (int kind = 0; kind < 4; kind++) {
        unsigned long len;
        unsigned char *j = dlt_test_jpeg(500, 375, kind | 16, &len);
        for (int i = 0; i < 40; i++) {
            dlt_rng r1, r2;
            int out = i % 2 ? 224 : 64, worst = 0; /* 224: mostly full scale, where chroma is upsampled */
            dlt_rng_seed(&r1, 77, (uint64_t)i);
            dlt_rng_seed(&r2, 77, (uint64_t)i);
            assert_int_equal(dlt_decode_transform(whole, j, len, out, 1, &r1, a, dlt_err_fresh(&err)), 0);
            assert_int_equal(dlt_decode_transform(region, j, len, out, 1, &r2, b, dlt_err_fresh(&err)), 0);
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
    dlt_err err = DLT_ERR_INIT;
    unsigned long len;
    unsigned char *j = dlt_test_jpeg(100, 80, 0, &len);
    (void)state;
    for (size_t i = 0; i < sizeof(junk); i++)
        junk[i] = (uint8_t)(i * 31 + 7);
    assert_int_equal(dlt_decode_transform(d, j, 0, 32, 0, NULL, out, dlt_err_fresh(&err)), -EINVAL);
    assert_non_null(strstr(err.msg, "empty"));
    assert_int_equal(dlt_decode_transform(d, junk, sizeof(junk), 32, 0, NULL, out, dlt_err_fresh(&err)), -EINVAL);
    assert_non_null(strstr(err.msg, "not a readable JPEG"));
    /* Right after a failure the next good image must decode (libjpeg-turbo 2.1 handle reuse bug). */
    assert_int_equal(dlt_decode_transform(d, j, len, 32, 0, NULL, out, dlt_err_fresh(&err)), 0);
    assert_int_equal(dlt_decode_transform(d, j, len / 2, 32, 0, NULL, out, dlt_err_fresh(&err)), -EINVAL);
    assert_non_null(strstr(err.msg, "JPEG"));
    assert_int_equal(dlt_decode_transform(d, j, len, 32, 0, NULL, out, dlt_err_fresh(&err)), 0);
    /* The first 10 bytes of a JPEG: truncated, not "dimensions out of range". */
    assert_int_equal(dlt_decode_transform(d, j, 10, 32, 0, NULL, out, dlt_err_fresh(&err)), -EINVAL);
    assert_true(strstr(err.msg, "truncated") || strstr(err.msg, "not a readable JPEG"));
    assert_null(strstr(err.msg, "dimensions"));
    assert_int_equal(dlt_decode_transform(d, j, len, 32, 0, NULL, out, dlt_err_fresh(&err)), 0);
    memcpy(junk, j, len < sizeof(junk) ? len : sizeof(junk));
    junk[len / 2] ^= 0xff;
    junk[len / 2 + 1] ^= 0x5a;
    (void)dlt_decode_transform(d, junk, len < sizeof(junk) ? len : sizeof(junk), 32, 0, NULL, out, dlt_err_fresh(&err));
    assert_int_equal(dlt_decode_transform(d, j, len, 32, 0, NULL, out, dlt_err_fresh(&err)), 0);
    tjFree(j);
    dlt_decoder_destroy(d);
}

/* A w x h PNG of colour type `type` and depth with random samples (palette: 40 entries, the first
 * 10 with transparency), into *png, and the RGB a reader must make of it, by the PNG definition
 * (gray g -> g,g,g; a palette index -> its entry; 16-bit v -> v >> 8, the high byte, as stb and
 * PIL for RGB do; alpha dropped) into expect (w * h * 3). */
static void _png_case(int w, int h, int type, int depth, uint64_t seed, uint8_t **png, size_t *len, uint8_t *expect)
{
    const int ch = dlt_png_channels(type);
    size_t n = (size_t)w * h * ch;
    uint8_t *s8 = malloc(n), plte[40 * 3], trns[10];
    uint16_t *s16 = malloc(n * 2);
    dlt_rng r;
    assert_non_null(s8);
    assert_non_null(s16);
    dlt_rng_seed(&r, seed, 5);
    for (int i = 0; i < 40 * 3; i++)
        plte[i] = (uint8_t)dlt_rng_below(&r, 256);
    for (int i = 0; i < 10; i++)
        trns[i] = (uint8_t)(i * 25);
    for (size_t i = 0; i < n; i++) {
        s16[i] = (uint16_t)dlt_rng_below(&r, 65536);
        s8[i] = (uint8_t)(type == DLT_PNG_PALETTE ? dlt_rng_below(&r, 40) : dlt_rng_below(&r, 256));
    }
    for (size_t p = 0; p < (size_t)w * h; p++)
        for (int k = 0; k < 3; k++) {
            int c = type == DLT_PNG_RGB || type == DLT_PNG_RGBA ? k : 0; /* the channel that gives k */
            expect[3 * p + k] = type == DLT_PNG_PALETTE ? plte[3 * s8[p] + k]
                                : depth == 16           ? (uint8_t)(s16[p * ch + c] >> 8)
                                                        : s8[p * ch + c];
        }
    assert_int_equal(dlt_png_encode(depth == 16 ? (const void *)s16 : (const void *)s8, w, h, type, depth, plte, 40,
                                    trns, type == DLT_PNG_PALETTE ? 10 : 0, png, len),
                     0);
    free(s8);
    free(s16);
}

/* Every colour type and depth decodes to the pixels the writer was given, exactly. */
static void test_png_decode(void **state)
{
    static const int cases[][2] = {{DLT_PNG_RGB, 8},        {DLT_PNG_GRAY, 8},  {DLT_PNG_PALETTE, 8},
                                   {DLT_PNG_GRAY_ALPHA, 8}, {DLT_PNG_RGBA, 8},  {DLT_PNG_RGB, 16},
                                   {DLT_PNG_GRAY, 16},      {DLT_PNG_RGBA, 16}, {DLT_PNG_GRAY_ALPHA, 16}};
    dlt_decoder *d = dlt_decoder_create();
    dlt_err err = DLT_ERR_INIT;
    const int w = 37, h = 23;
    uint8_t expect[37 * 23 * 3];
    (void)state;
    assert_non_null(d);
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        uint8_t *png;
        size_t len;
        const uint8_t *rgb;
        int gw = 0, gh = 0;
        _png_case(w, h, cases[c][0], cases[c][1], c + 1, &png, &len, expect);
        assert_int_equal(dlt_image_sniff(png, len), DLT_IMAGE_PNG);
        if (dlt_decode_rgb(d, png, len, &rgb, &gw, &gh, dlt_err_fresh(&err)) != 0)
            fail_msg("type %d depth %d: %s", cases[c][0], cases[c][1], err.msg);
        assert_int_equal(gw, w);
        assert_int_equal(gh, h);
        assert_int_equal(dlt_decoder_last_format(d), DLT_IMAGE_PNG);
        for (size_t i = 0; i < sizeof(expect); i++)
            if (rgb[i] != expect[i])
                fail_msg("type %d depth %d: pixel %zu channel %zu is %d, the writer gave %d", cases[c][0], cases[c][1],
                         i / 3, i % 3, rgb[i], expect[i]);
        free(png);
    }
    dlt_decoder_destroy(d);
}

/* The transform of a PNG: the evaluation crop at its own size is the image's centre, pixel for
 * pixel; training crops are deterministic for a seed; a JPEG after a PNG is a JPEG again. */
static void test_png_transform(void **state)
{
    dlt_decoder *d = dlt_decoder_create();
    dlt_err err = DLT_ERR_INIT;
    static uint8_t expect[64 * 64 * 3], out[56 * 56 * 3], again[56 * 56 * 3];
    uint8_t *png;
    size_t len;
    unsigned long jlen;
    unsigned char *j;
    dlt_rng r1, r2;
    dlt_crop c;
    (void)state;
    _png_case(64, 64, DLT_PNG_RGBA, 8, 99, &png, &len, expect);
    dlt_crop_center(64, 64, 0.875, &c); /* 56 x 56 at (4, 4): drawn at 56, bilinear is a copy */
    assert_int_equal(c.w, 56);
    assert_int_equal(dlt_decode_transform(d, png, len, 56, 0, NULL, out, dlt_err_fresh(&err)), 0);
    for (int y = 0; y < 56; y++)
        assert_memory_equal(out + (size_t)y * 56 * 3, expect + ((size_t)(y + c.y) * 64 + c.x) * 3, 56 * 3);
    dlt_rng_seed(&r1, 4, 4);
    dlt_rng_seed(&r2, 4, 4);
    assert_int_equal(dlt_decode_transform(d, png, len, 56, 1, &r1, out, dlt_err_fresh(&err)), 0);
    assert_int_equal(dlt_decode_transform(d, png, len, 56, 1, &r2, again, dlt_err_fresh(&err)), 0);
    assert_memory_equal(out, again, sizeof(out));
    assert_int_equal(dlt_decoder_last_format(d), DLT_IMAGE_PNG);
    j = dlt_test_jpeg(80, 60, 0, &jlen);
    assert_int_equal(dlt_decode_transform(d, j, jlen, 56, 0, NULL, out, dlt_err_fresh(&err)), 0);
    assert_int_equal(dlt_decoder_last_format(d), DLT_IMAGE_JPEG);
    tjFree(j);
    free(png);
    dlt_decoder_destroy(d);
}

/* Formats told by their bytes and by names; damaged PNGs, PNGs over the size limits and images of
 * formats not read are refused, saying which, and the decoder reads the next image. */
static void test_format_by_content(void **state)
{
    dlt_decoder *d = dlt_decoder_create();
    dlt_err err = DLT_ERR_INIT;
    static uint8_t expect[64 * 64 * 3], out[32 * 32 * 3], wide[20000];
    static const uint8_t gif[16] = {'G', 'I', 'F', '8', '9', 'a', 1, 0, 1, 0, 0, 0, 0, ';'};
    uint8_t *png, *big;
    size_t len, biglen;
    (void)state;
    assert_int_equal(dlt_image_format_of_name("/d/n01/x.JPEG"), DLT_IMAGE_JPEG);
    assert_int_equal(dlt_image_format_of_name("x.jpg"), DLT_IMAGE_JPEG);
    assert_int_equal(dlt_image_format_of_name("x.PnG"), DLT_IMAGE_PNG);
    assert_int_equal(dlt_image_format_of_name("x.png.gif"), DLT_IMAGE_UNKNOWN);
    assert_int_equal(dlt_image_format_of_name("dir.png/x"), DLT_IMAGE_UNKNOWN);
    assert_int_equal(dlt_image_format_of_name("/d/t.rec@1024"), DLT_IMAGE_UNKNOWN);
    assert_int_equal(dlt_image_sniff((const uint8_t *)"\xff\xd8\xff\xe0", 4), DLT_IMAGE_JPEG);
    assert_int_equal(dlt_image_sniff((const uint8_t *)"\x89PNG\r\n\x1a", 7), DLT_IMAGE_UNKNOWN); /* cut */
    _png_case(64, 64, DLT_PNG_RGB, 8, 7, &png, &len, expect);
    assert_int_equal(dlt_decode_transform(d, png, len / 2, 32, 0, NULL, out, dlt_err_fresh(&err)), -EINVAL);
    assert_non_null(strstr(err.msg, "corrupt PNG data"));
    assert_int_equal(dlt_decode_transform(d, png, 20, 32, 0, NULL, out, dlt_err_fresh(&err)), -EINVAL);
    assert_non_null(strstr(err.msg, "PNG"));
    assert_int_equal(dlt_decode_transform(d, png, len, 32, 0, NULL, out, dlt_err_fresh(&err)), 0);
    {
        /* The signature and IHDR, then an IDAT chunk that claims 2 GiB: refused before stb_image
         * would allocate them (what tests/fuzz found). */
        uint8_t claim[33 + 12];
        memcpy(claim, png, 33);
        memcpy(claim + 33, "\x7f\xff\xff\xffIDATxxxx", 12);
        assert_int_equal(dlt_decode_transform(d, claim, sizeof(claim), 32, 0, NULL, out, dlt_err_fresh(&err)), -EINVAL);
        assert_non_null(strstr(err.msg, "the chunk at byte 33 claims 2147483647 bytes, 0 are left"));
    }
    assert_int_equal(dlt_decode_transform(d, gif, sizeof(gif), 32, 0, NULL, out, dlt_err_fresh(&err)), -EINVAL);
    assert_non_null(strstr(err.msg, "a GIF image, which is not read here (JPEG and PNG are)"));
    /* 20000 x 1: over the side limit, refused from the header before the pixels are allocated. */
    assert_int_equal(dlt_png_encode(wide, 20000, 1, DLT_PNG_GRAY, 8, NULL, 0, NULL, 0, &big, &biglen), 0);
    assert_int_equal(dlt_decode_transform(d, big, biglen, 32, 0, NULL, out, dlt_err_fresh(&err)), -EINVAL);
    assert_non_null(strstr(err.msg, "20000x1 pixels is over the limits"));
    assert_int_equal(dlt_decode_transform(d, png, len, 32, 0, NULL, out, dlt_err_fresh(&err)), 0);
    free(big);
    free(png);
    dlt_decoder_destroy(d);
}

/* A 1x1 gray PNG whose pixel data inflates to `zeros` bytes: *len bytes at the returned malloc'd
 * pointer (signature, IHDR, one IDAT, IEND; CRCs by zlib). */
static uint8_t *_png_bomb(size_t zeros, size_t *len)
{
    static const uint8_t head[33] = {0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, 'I', 'H', 'D', 'R', 0,
                                     0,    0,   1,   0,   0,    0,    1,    8,    0, 0, 0, 0,  0,   0,   0,   0};
    static uint8_t zero[1 << 20];
    uLong cap = compressBound((uLong)zeros) / 512 + (1 << 16), crc;
    uint8_t *o = malloc(33 + 12 + cap + 12);
    z_stream zs;
    size_t z;
    assert_non_null(o);
    memcpy(o, head, 33);
    crc = crc32(0, o + 12, 17);
    for (int k = 0; k < 4; k++)
        o[29 + k] = (uint8_t)(crc >> (24 - 8 * k));
    memset(&zs, 0, sizeof(zs));
    assert_int_equal(deflateInit(&zs, 9), Z_OK);
    zs.next_out = o + 41;
    zs.avail_out = (uInt)cap;
    for (size_t done = 0; done < zeros; done += sizeof(zero)) {
        zs.next_in = zero;
        zs.avail_in = sizeof(zero);
        assert_int_equal(deflate(&zs, done + sizeof(zero) >= zeros ? Z_FINISH : Z_NO_FLUSH),
                         done + sizeof(zero) >= zeros ? Z_STREAM_END : Z_OK);
    }
    z = zs.total_out;
    deflateEnd(&zs);
    for (int k = 0; k < 4; k++)
        o[33 + k] = (uint8_t)(z >> (24 - 8 * k));
    memcpy(o + 37, "IDAT", 4);
    crc = crc32(0, o + 37, (uInt)(z + 4));
    for (int k = 0; k < 4; k++)
        o[41 + z + k] = (uint8_t)(crc >> (24 - 8 * k));
    memcpy(o + 45 + z, "\0\0\0\0IEND\xae\x42\x60\x82", 12);
    *len = 57 + z;
    return o;
}

/* Pixel data that inflates far past the image's size is refused before stb_image inflates it all;
 * an incompressible photo-sized PNG, which the same count looks at first, decodes exactly. The
 * slack is lowered to 1 MiB, so that an 8 MiB bomb (not 512 MiB) shows it: ~8 KB of IDAT that would
 * inflate 8 MiB, refused after 1 KB (a larger bomb proves no more and took 25 s under valgrind). */
static void test_png_inflate_bound(void **state)
{
    dlt_decoder *d = dlt_decoder_create();
    dlt_err err = DLT_ERR_INIT;
    static uint8_t expect[600 * 400 * 3], out[32 * 32 * 3];
    uint8_t *png;
    size_t len;
    const uint8_t *rgb;
    int w, h;
    (void)state;
    dlt_decoder_inflate_slack(d, 1u << 20);
    png = _png_bomb((size_t)8 << 20, &len); /* 8 MiB of zeros for a 1x1 image: ~8 KB of IDAT */
    assert_true(len > 6000 && len < 20000);
    assert_int_equal(dlt_decode_transform(d, png, len, 32, 0, NULL, out, dlt_err_fresh(&err)), -EINVAL);
    assert_non_null(
        strstr(err.msg, "its pixel data inflates to more than 1028 bytes, twice what a 1x1 image of 8 bits"));
    free(png);
    _png_case(600, 400, DLT_PNG_RGB, 8, 11, &png, &len, expect);
    assert_true(len * 1032 > (1u << 20) + 2 * 400 * (600 * 3 + 1)); /* the count runs */
    assert_int_equal(dlt_decode_rgb(d, png, len, &rgb, &w, &h, dlt_err_fresh(&err)), 0);
    assert_int_equal(w, 600);
    assert_memory_equal(rgb, expect, sizeof(expect));
    free(png);
    dlt_decoder_destroy(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crop_parameters),   cmocka_unit_test(test_crop_areas_as_torchvision),
        cmocka_unit_test(test_decode_transform),  cmocka_unit_test(test_region_decode),
        cmocka_unit_test(test_damaged_data),      cmocka_unit_test(test_png_decode),
        cmocka_unit_test(test_png_transform),     cmocka_unit_test(test_format_by_content),
        cmocka_unit_test(test_png_inflate_bound),
    };
    int rc;
    dlt_test_dir_make("transform");
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    return dlt_test_dir_remove() == 0 ? rc : 1;
}
