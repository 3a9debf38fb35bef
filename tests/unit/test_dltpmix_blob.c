/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of dltpmix key naming and blob framing: round trip, and every refusal. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

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
    /* wrong sequence, rank, length */
    assert_null(dltpmix_blob_decode(frame, n, 10, 2, 64, &why));
    assert_non_null(strstr(why, "sequence"));
    assert_null(dltpmix_blob_decode(frame, n, 9, 3, 64, &why));
    assert_non_null(strstr(why, "rank"));
    assert_null(dltpmix_blob_decode(frame, n, 9, 2, 63, &why));
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
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
