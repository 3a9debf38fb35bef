/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of dltpmix key naming and blob framing: round trip, and every refusal. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/crc32.h"
#include "pmix/dltpmix_blob.h"

static void test_key_names(void **state)
{
    char key[DLTPMIX_KEY_MAX];
    (void)state;
    assert_int_equal(dltpmix_key(key, sizeof(key), DLTPMIX_OP_BCAST, 0), 0);
    assert_string_equal(key, "dltpmix.bcast.0");
    assert_int_equal(dltpmix_key(key, sizeof(key), DLTPMIX_OP_ALLGATHER, 18446744073709551615ull), 0);
    assert_string_equal(key, "dltpmix.allgather.18446744073709551615");
    assert_int_equal(dltpmix_key(key, sizeof(key), DLTPMIX_OP_ARRIVE, 7), 0);
    assert_string_equal(key, "dltpmix.arrive.7");
    assert_int_equal(dltpmix_key(key, 8, DLTPMIX_OP_BCAST, 1), -1);         /* too small: refused */
    assert_int_equal(dltpmix_key(key, sizeof(key), (dltpmix_op)99, 1), -1); /* unknown op */
}

static void test_crc32_reference(void **state)
{
    (void)state;
    /* The standard CRC-32 check value. */
    assert_int_equal(dltpmix_crc32("123456789", 9), 0xcbf43926u);
    assert_int_equal(dltpmix_crc32("", 0), 0u);
}

/* A bit at a time, the definition (reflected polynomial 0xedb88320): the independent reference. */
static uint32_t _crc32_bitwise(uint32_t crc, const unsigned char *p, size_t n)
{
    crc = ~crc;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int b = 0; b < 8; b++)
            crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
    }
    return ~crc;
}

/* dlt_crc32 (zlib's crc32_z) against the definition on a megabyte of random bytes, whole and
 * continued across uneven pieces, as checkpoints are checksummed while written. */
static void test_crc32_against_definition(void **state)
{
    size_t n = 1u << 20, at = 0, piece = 1;
    unsigned char *buf = malloc(n);
    uint32_t want, got = 0, x = 12345;
    (void)state;
    assert_non_null(buf);
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        buf[i] = (unsigned char)(x >> 16);
    }
    want = _crc32_bitwise(0, buf, n);
    assert_int_equal(dlt_crc32(0, buf, n), want);
    while (at < n) {
        size_t k = piece < n - at ? piece : n - at;
        got = dlt_crc32(got, buf + at, k);
        at += k;
        piece = piece * 3 + 1;
    }
    assert_int_equal(got, want);
    free(buf);
}

static void test_roundtrip(void **state)
{
    unsigned char payload[300], frame[DLTPMIX_BLOB_HEADER + 300];
    const char *why = NULL;
    const unsigned char *got;
    size_t n;
    (void)state;
    for (size_t i = 0; i < sizeof(payload); i++)
        payload[i] = (unsigned char)(i * 7 + 3);
    n = dltpmix_blob_encode(frame, sizeof(frame), 0x123456789ull, 5, payload, sizeof(payload));
    assert_int_equal(n, sizeof(frame));
    got = dltpmix_blob_decode(frame, n, 0x123456789ull, 5, sizeof(payload), &why);
    assert_non_null(got);
    assert_memory_equal(got, payload, sizeof(payload));
    /* Zero-length payloads are legal. */
    n = dltpmix_blob_encode(frame, sizeof(frame), 1, 0, NULL, 0);
    assert_int_equal(n, DLTPMIX_BLOB_HEADER);
    assert_non_null(dltpmix_blob_decode(frame, n, 1, 0, 0, &why));
}

static void test_refusals(void **state)
{
    unsigned char payload[64] = {1, 2, 3}, frame[DLTPMIX_BLOB_HEADER + 64], bad[sizeof(frame)];
    const char *why;
    size_t n;
    (void)state;
    n = dltpmix_blob_encode(frame, sizeof(frame), 9, 2, payload, sizeof(payload));
    assert_int_equal(n, sizeof(frame));
    /* output buffer too small */
    assert_int_equal(dltpmix_blob_encode(frame, sizeof(frame) - 1, 9, 2, payload, sizeof(payload)), 0);
    /* truncated */
    why = NULL;
    assert_null(dltpmix_blob_decode(frame, n - 1, 9, 2, 64, &why));
    assert_non_null(strstr(why, "truncated"));
    assert_null(dltpmix_blob_decode(frame, 10, 9, 2, 64, &why));
    assert_non_null(strstr(why, "shorter"));
    /* longer than its header says: bytes after the frame are not the frame's, refused */
    {
        unsigned char longer[sizeof(frame) + 1];
        memcpy(longer, frame, n);
        longer[n] = 0;
        why = NULL;
        assert_null(dltpmix_blob_decode(longer, n + 1, 9, 2, 64, &why));
        assert_non_null(why);
    }
    /* wrong sequence, rank, length */
    assert_null(dltpmix_blob_decode(frame, n, 10, 2, 64, &why));
    assert_non_null(strstr(why, "sequence"));
    assert_null(dltpmix_blob_decode(frame, n, 9, 3, 64, &why));
    assert_non_null(strstr(why, "rank"));
    assert_null(dltpmix_blob_decode(frame, n, 9, 2, 63, &why));
    assert_non_null(strstr(why, "different lengths"));
    why = NULL; /* a frame shorter than this rank's length, too (the reader would read past it) */
    assert_null(dltpmix_blob_decode(frame, n, 9, 2, 65, &why));
    assert_non_null(why);
    assert_non_null(strstr(why, "different lengths"));
    /* corrupted payload byte and magic */
    memcpy(bad, frame, n);
    bad[DLTPMIX_BLOB_HEADER + 10] ^= 0x40;
    assert_null(dltpmix_blob_decode(bad, n, 9, 2, 64, &why));
    assert_non_null(strstr(why, "checksum"));
    memcpy(bad, frame, n);
    bad[0] ^= 1;
    assert_null(dltpmix_blob_decode(bad, n, 9, 2, 64, &why));
    assert_non_null(strstr(why, "magic"));
    /* bad arguments to encode */
    assert_int_equal(dltpmix_blob_encode(frame, sizeof(frame), 9, -1, payload, 8), 0);
    assert_int_equal(dltpmix_blob_encode(frame, sizeof(frame), 9, 0, NULL, 8), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_key_names),
        cmocka_unit_test(test_crc32_reference),
        cmocka_unit_test(test_crc32_against_definition),
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
