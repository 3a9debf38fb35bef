/* SPDX-License-Identifier: Apache-2.0 */
/* test_cli_parse: the command line's numbers: every real option refuses NaN, infinities, hex
 * floats, blanks on either side, trailing text and values out of range, naming the option, the
 * value and the range; whole numbers are decimal digits only (no blank, sign, point or exponent),
 * and a value beyond 64 bits is out of range, not "not a whole number". */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "trainer/cli/parse.h"

static void test_real(void **state)
{
    static const char *const bad[] = {"nan",   "NaN",    "-nan",   "inf", "-inf", "+Infinity", "infinity", "0x1p-3",
                                      "1e999", "-1e999", "1e-999", "",    " ",    "0.1x",      "x",        "1,5",
                                      ".",     "e5",     "--1",    "1e",  "1e+",  "0.1 ",      " 0.1",     "\t1"};
    dlt_err err = DLT_ERR_INIT;
    double v = -7;
    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_not_equal(dlt_parse_real("--lr", bad[i], 0, 1e9, &v, dlt_err_fresh(&err)), 0);
        assert_true(v == -7); /* untouched */
        assert_non_null(strstr(err.msg, "--lr"));
        assert_non_null(strstr(err.msg, "[0, 1000000000]"));
        if (bad[i][0] && bad[i][0] != ' ')
            assert_non_null(strstr(err.msg, bad[i]));
    }
    assert_int_not_equal(dlt_parse_real("--lr", "nan", 0, 1e9, &v, dlt_err_fresh(&err)), 0);
    assert_non_null(strstr(err.msg, "not a finite number"));
    assert_int_not_equal(dlt_parse_real("--momentum", "1.5", 0, 1, &v, dlt_err_fresh(&err)), 0);
    assert_non_null(strstr(err.msg, "out of range"));
    assert_int_equal(dlt_parse_real("--lr", "0.1", 0, 1e9, &v, dlt_err_fresh(&err)), 0);
    assert_true(v == 0.1);
    assert_int_equal(dlt_parse_real("--lr", "2.5e-3", 0, 1e9, &v, dlt_err_fresh(&err)), 0);
    assert_true(v == 2.5e-3);
    assert_int_equal(dlt_parse_real("--lr", "+.5", 0, 1e9, &v, dlt_err_fresh(&err)), 0);
    assert_true(v == 0.5);
    assert_int_equal(dlt_parse_real("--lr", "0", 0, 1e9, &v, dlt_err_fresh(&err)), 0);
    assert_true(v == 0);
}

static void test_whole(void **state)
{
    static const char *const bad[] = {"1.5",  "nan",   "inf",
                                      "0x10", "1e999", "1e-999",
                                      "",     "32 ",   "3e-1",
                                      "-1",   "65537", "99999999999999999999",
                                      " 8",   "\t8",   "+8",
                                      "1e1",  "7.0",   "1e6",
                                      "-",    "8-",    "-99999999999999999999"};
    dlt_err err = DLT_ERR_INIT;
    int64_t n = -7;
    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_not_equal(dlt_parse_whole("--batch", bad[i], 1, 65536, &n, dlt_err_fresh(&err)), 0);
        assert_true(n == -7);
        assert_non_null(strstr(err.msg, "--batch"));
        assert_non_null(strstr(err.msg, "[1, 65536]"));
    }
    assert_int_equal(dlt_parse_whole("--batch", "32", 1, 65536, &n, dlt_err_fresh(&err)), 0);
    assert_true(n == 32);
    /* What each refusal says: out of range for numbers too large (for 64 bits too), not a whole
     * number for anything that is not plain digits. */
    assert_int_not_equal(dlt_parse_whole("--batch", "99999999999999999999", 1, 65536, &n, dlt_err_fresh(&err)), 0);
    assert_non_null(strstr(err.msg, "out of range"));
    assert_int_not_equal(dlt_parse_whole("--batch", "-99999999999999999999", 1, 65536, &n, dlt_err_fresh(&err)), 0);
    assert_non_null(strstr(err.msg, "out of range"));
    assert_int_not_equal(dlt_parse_whole("--batch", "65537", 1, 65536, &n, dlt_err_fresh(&err)), 0);
    assert_non_null(strstr(err.msg, "out of range"));
    assert_int_not_equal(dlt_parse_whole("--batch", "-1", 1, 65536, &n, dlt_err_fresh(&err)), 0);
    assert_non_null(strstr(err.msg, "out of range"));
    assert_int_not_equal(dlt_parse_whole("--batch", " 8", 1, 65536, &n, dlt_err_fresh(&err)), 0);
    assert_non_null(strstr(err.msg, "--batch ' 8': not a whole number"));
    assert_int_not_equal(dlt_parse_whole("--batch", "1e1", 1, 65536, &n, dlt_err_fresh(&err)), 0);
    assert_non_null(strstr(err.msg, "not a whole number"));
    assert_int_equal(dlt_parse_whole("--seed", "0", 0, INT64_MAX, &n, dlt_err_fresh(&err)), 0);
    assert_true(n == 0);
    assert_int_equal(dlt_parse_whole("--seed", "9223372036854775807", 0, INT64_MAX, &n, dlt_err_fresh(&err)), 0);
    assert_true(n == INT64_MAX);
    assert_int_equal(dlt_parse_whole("--seed", "123456789012345678", 0, INT64_MAX, &n, dlt_err_fresh(&err)), 0);
    assert_true(n == 123456789012345678LL); /* exact, not through a double */
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_real), cmocka_unit_test(test_whole)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
