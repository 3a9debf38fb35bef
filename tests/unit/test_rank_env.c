/* SPDX-License-Identifier: Apache-2.0 */
/* test_rank_env: the rank contract's pure rules: the first host of Slurm host lists (ranges, zero
 * padding, several entries, suffixes; malformed lists refused), and MASTER_PORT from the step's
 * reserved ports or derived from job and step (concurrent steps of one job differ, the range
 * holds). */
#include "config.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "plugin/rank_env.h"

static void test_hostlist_first(void **state)
{
    static const struct {
        const char *list, *first;
    } ok[] = {
        {"n1", "n1"},
        {"n[1-2]", "n1"},
        {"gpu[007-010,12],login1", "gpu007"},
        {"a1,b2", "a1"},
        {"node[3,5-7]", "node3"},
        {"rack1-n[10-11]-ib", "rack1-n10-ib"},
        {"x[09]", "x09"},
        {"n[1-2],m[3-4]", "n1"},
    };
    static const char *const bad[] = {"", "n[", "n]1", "n[-2]", "n[a-b]", ",n1", "n[1-2", "n[[1]]", "n[1]x[2]"};
    char out[64];
    (void)state;
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        if (dlt_hostlist_first(ok[i].list, out, sizeof(out)) != 0)
            fail_msg("'%s' refused", ok[i].list);
        if (strcmp(out, ok[i].first))
            fail_msg("'%s': first host '%s', expected '%s'", ok[i].list, out, ok[i].first);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (dlt_hostlist_first(bad[i], out, sizeof(out)) != -EINVAL)
            fail_msg("'%s' accepted as '%s'", bad[i], out);
    assert_int_equal(dlt_hostlist_first("averyveryverylonghostname[1-2]", out, 8), -ENOSPC);
    assert_int_equal(dlt_hostlist_first(NULL, out, sizeof(out)), -EINVAL);
}

static void test_port(void **state)
{
    int port = 0, reserved = -1, seen[64];
    (void)state;
    assert_int_equal(dlt_rank_port("12000-12003", 7, 0, &port, &reserved), 0);
    assert_int_equal(port, 12000);
    assert_int_equal(reserved, 1);
    assert_int_equal(dlt_rank_port("12005,12009", 7, 0, &port, &reserved), 0);
    assert_int_equal(port, 12005);
    assert_int_equal(dlt_rank_port("0", 7, 0, &port, &reserved), -EINVAL);
    assert_int_equal(dlt_rank_port("70000", 7, 0, &port, &reserved), -EINVAL);
    assert_int_equal(dlt_rank_port("abc", 7, 0, &port, &reserved), -EINVAL);
    assert_int_equal(dlt_rank_port("123x", 7, 0, &port, &reserved), -EINVAL);
    /* Derived: in range, and the 64 steps of one job all differ (whatever the job id). */
    for (uint32_t job = 1; job < 200000; job += 9973) {
        for (uint32_t step = 0; step < 64; step++) {
            assert_int_equal(dlt_rank_port(NULL, job, step, &port, &reserved), 0);
            assert_int_equal(reserved, 0);
            assert_true(port >= DLT_PORT_BASE && port < DLT_PORT_BASE + DLT_PORT_SPAN);
            seen[step] = port;
            for (uint32_t k = 0; k < step; k++)
                assert_int_not_equal(seen[k], port);
        }
    }
    assert_int_equal(dlt_rank_port("", 4294967295u, 4294967295u, &port, &reserved), 0);
    assert_true(port >= DLT_PORT_BASE && port < DLT_PORT_BASE + DLT_PORT_SPAN);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hostlist_first),
        cmocka_unit_test(test_port),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
