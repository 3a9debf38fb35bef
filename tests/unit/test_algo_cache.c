/* SPDX-License-Identifier: Apache-2.0 */
/* test_algo_cache: --cudnn-cache's file: a stored choice is found by its own key only (another GPU,
 * cuDNN version, type, determinism or geometry misses), the last line of a key wins, damaged lines
 * are skipped and counted, a missing file is an empty cache, an unreadable one an error. */
#include "config.h"

#include <errno.h>
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

#include "trainer/backend/algo_cache.h"

static char g_path[256];

static int _setup(void **state)
{
    (void)state;
    snprintf(g_path, sizeof(g_path), "/tmp/test_algo_cache.%d", (int)getpid());
    unlink(g_path);
    return 0;
}

static int _teardown(void **state)
{
    (void)state;
    unlink(g_path);
    return 0;
}

static dlt_algo_key _key(void)
{
    dlt_algo_key k;
    memset(&k, 0, sizeof(k));
    snprintf(k.device, sizeof(k.device), "NVIDIA H200");
    k.cc = 90;
    k.library = 91900;
    k.dtype = 2;
    k.math = 1;
    k.ws_limit = (size_t)1 << 30;
    k.s = (dlt_conv_shape){
        .n = 256, .c = 64, .h = 56, .w = 56, .k = 64, .r = 3, .s = 3, .stride = 1, .pad = 1, .oh = 56, .ow = 56};
    k.channels = 64;
    return k;
}

static void test_round_trip_and_misses(void **state)
{
    dlt_err err = DLT_ERR_INIT;
    dlt_algo_key k = _key(), other;
    dlt_algo_choice c = {1, 1, 4, 2, 1, 5, 1}, got;
    int damaged = -1;
    (void)state;
    /* No file yet: an empty cache, not an error. */
    assert_int_equal(dlt_algo_cache_lookup(g_path, &k, &got, &damaged, dlt_err_fresh(&err)), 0);
    assert_int_equal(dlt_algo_cache_store(g_path, &k, &c, dlt_err_fresh(&err)), 0);
    memset(&got, 0xff, sizeof(got));
    assert_int_equal(dlt_algo_cache_lookup(g_path, &k, &got, &damaged, dlt_err_fresh(&err)), 1);
    assert_memory_equal(&got, &c, sizeof(c));
    assert_int_equal(damaged, 0);
    /* Each part of the key matters. */
    other = k;
    other.library = 92000;
    assert_int_equal(dlt_algo_cache_lookup(g_path, &other, &got, NULL, dlt_err_fresh(&err)), 0);
    other = k;
    snprintf(other.device, sizeof(other.device), "NVIDIA H100 80GB HBM3");
    assert_int_equal(dlt_algo_cache_lookup(g_path, &other, &got, NULL, dlt_err_fresh(&err)), 0);
    other = k;
    other.deterministic = 1;
    assert_int_equal(dlt_algo_cache_lookup(g_path, &other, &got, NULL, dlt_err_fresh(&err)), 0);
    other = k;
    other.dtype = 1;
    assert_int_equal(dlt_algo_cache_lookup(g_path, &other, &got, NULL, dlt_err_fresh(&err)), 0);
    other = k;
    other.s.n = 128;
    assert_int_equal(dlt_algo_cache_lookup(g_path, &other, &got, NULL, dlt_err_fresh(&err)), 0);
    other = k;
    other.channels = 4;
    assert_int_equal(dlt_algo_cache_lookup(g_path, &other, &got, NULL, dlt_err_fresh(&err)), 0);
    other = k;
    other.ws_limit = 1;
    assert_int_equal(dlt_algo_cache_lookup(g_path, &other, &got, NULL, dlt_err_fresh(&err)), 0);
    /* A later line of the same key wins (a rerun that searched again). */
    c.fwd = 7;
    assert_int_equal(dlt_algo_cache_store(g_path, &k, &c, dlt_err_fresh(&err)), 0);
    assert_int_equal(dlt_algo_cache_lookup(g_path, &k, &got, NULL, dlt_err_fresh(&err)), 1);
    assert_int_equal(got.fwd, 7);
}

static void test_damaged_lines(void **state)
{
    dlt_err err = DLT_ERR_INIT;
    char line[1024];
    dlt_algo_key k = _key();
    dlt_algo_choice c = {1, 1, 4, 2, 1, 5, 1}, got;
    int damaged = 0;
    FILE *f;
    (void)state;
    assert_int_equal(dlt_algo_cache_store(g_path, &k, &c, dlt_err_fresh(&err)), 0);
    f = fopen(g_path, "r");
    assert_non_null(f);
    assert_non_null(fgets(line, sizeof(line), f));
    fclose(f);
    f = fopen(g_path, "w");
    assert_non_null(f);
    /* The key's line cut short, then with a negative algorithm, then garbage, then a torn tail. */
    fprintf(f, "%.*s\n", (int)(strlen(line) - 12), line);
    fprintf(f, "%.*s-3/1\n", (int)(strrchr(line, ' ') - line + 1), line);
    fprintf(f, "not a cache line\n# a comment\n\n");
    fprintf(f, "%.*s", (int)(strlen(line) - 5), line);
    fclose(f);
    assert_int_equal(dlt_algo_cache_lookup(g_path, &k, &got, &damaged, dlt_err_fresh(&err)), 0);
    assert_int_equal(damaged, 4);
    /* A good line appended after the damage is found (the torn tail joins it: that one is lost,
     * the next is whole). */
    assert_int_equal(dlt_algo_cache_store(g_path, &k, &c, dlt_err_fresh(&err)), 0);
    assert_int_equal(dlt_algo_cache_store(g_path, &k, &c, dlt_err_fresh(&err)), 0);
    assert_int_equal(dlt_algo_cache_lookup(g_path, &k, &got, &damaged, dlt_err_fresh(&err)), 1);
    assert_memory_equal(&got, &c, sizeof(c));
}

static void test_unusable_file(void **state)
{
    dlt_err err = DLT_ERR_INIT;
    dlt_algo_key k = _key();
    dlt_algo_choice c = {0}, got;
    (void)state;
    /* A directory is no cache file: reading and writing say which path and why. */
    assert_int_equal(dlt_algo_cache_store("/tmp", &k, &c, dlt_err_fresh(&err)), -EISDIR);
    assert_non_null(strstr(err.msg, "--cudnn-cache /tmp"));
    assert_true(dlt_algo_cache_store("/nonexistent-dir/x", &k, &c, dlt_err_fresh(&err)) == -ENOENT);
    if (getuid() != 0) {
        assert_int_equal(dlt_algo_cache_store(g_path, &k, &c, dlt_err_fresh(&err)), 0);
        chmod(g_path, 0);
        assert_int_equal(dlt_algo_cache_lookup(g_path, &k, &got, NULL, dlt_err_fresh(&err)), -EACCES);
        assert_non_null(strstr(err.msg, g_path));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip_and_misses, _setup, _teardown),
        cmocka_unit_test_setup_teardown(test_damaged_lines, _setup, _teardown),
        cmocka_unit_test_setup_teardown(test_unusable_file, _setup, _teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
