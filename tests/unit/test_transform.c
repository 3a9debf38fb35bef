/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of trainer/data/transform.c: crop parameters against their definitions, JPEG decode +
 * transform on images made here with libjpeg-turbo (RGB, grayscale, CMYK, progressive, odd sizes),
 * region decode against a whole decode, and refusal of damaged data without poisoning the next. */
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

#include "common/rng.h"
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crop_parameters),
        cmocka_unit_test(test_decode_transform),
        cmocka_unit_test(test_region_decode),
        cmocka_unit_test(test_damaged_data),
    };
    int rc;
    dlt_test_dir_make("transform");
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    return dlt_test_dir_remove() == 0 ? rc : 1;
}
