/* SPDX-License-Identifier: Apache-2.0 */
/* test_node_name: the node name the plugin, libdltpmix and the trainer share
 * (common/node_name.c): SLURMD_NODENAME when set and not empty, else the host name;
 * always terminated within the buffer, however long the name. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/node_name.h"

static void test_slurm_name_first(void **state)
{
    char buf[64];
    (void)state;
    setenv("SLURMD_NODENAME", "n7", 1);
    assert_string_equal(dlt_node_name(buf, sizeof(buf)), "n7");
}

static void test_host_name_otherwise(void **state)
{
    char buf[64], host[64] = "";
    (void)state;
    assert_int_equal(gethostname(host, sizeof(host) - 1), 0);
    unsetenv("SLURMD_NODENAME");
    assert_string_equal(dlt_node_name(buf, sizeof(buf)), host);
    setenv("SLURMD_NODENAME", "", 1); /* set but empty: no name */
    assert_string_equal(dlt_node_name(buf, sizeof(buf)), host);
}

static void test_truncated_within_buffer(void **state)
{
    char buf[8];
    (void)state;
    setenv("SLURMD_NODENAME", "a-very-long-node-name", 1);
    memset(buf, 'x', sizeof(buf));
    assert_string_equal(dlt_node_name(buf, sizeof(buf)), "a-very-");
    unsetenv("SLURMD_NODENAME");
    memset(buf, 'x', sizeof(buf));
    dlt_node_name(buf, sizeof(buf));
    assert_true(memchr(buf, '\0', sizeof(buf)) != NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slurm_name_first),
        cmocka_unit_test(test_host_name_otherwise),
        cmocka_unit_test(test_truncated_within_buffer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
