/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of common/topo_file.c: an NCCL_TOPO_FILE the task cannot read is named with its
 * cause and the read-only bind of its topo_dir; a readable one, or none, says nothing. */
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

#include "common/topo_file.h"

static void test_topo_file(void **state)
{
    char dir[] = "/tmp/dlt_topo_file_XXXXXX", step[256], file[300], msg[1024];
    FILE *f;
    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(step, sizeof(step), "%s/7.0", dir);
    snprintf(file, sizeof(file), "%s/nccl_topo.xml", step);
    assert_int_equal(mkdir(step, 0750), 0);

    assert_int_equal(dlt_topo_file_check(NULL, msg, sizeof(msg)), 0);
    assert_int_equal(dlt_topo_file_check("", msg, sizeof(msg)), 0);
    assert_string_equal(msg, "");

    /* Not there (a container without the bind): named, with the cause and the bind of topo_dir. */
    assert_int_equal(dlt_topo_file_check(file, msg, sizeof(msg)), -ENOENT);
    print_message("# %s\n", msg);
    assert_non_null(strstr(msg, file));
    assert_non_null(strstr(msg, "No such file or directory"));
    assert_non_null(strstr(msg, "NCCL_DEBUG=INFO"));
    {
        char want[700];
        snprintf(want, sizeof(want), "--container-mounts=%s:%s:ro", dir, dir);
        assert_non_null(strstr(msg, want));
        snprintf(want, sizeof(want), "Apptainer --bind %s:%s:ro", dir, dir);
        assert_non_null(strstr(msg, want));
        snprintf(want, sizeof(want), "'bind path = %s'", dir);
        assert_non_null(strstr(msg, want));
        snprintf(want, sizeof(want), "Charliecloud ch-run -b %s ", dir);
        assert_non_null(strstr(msg, want));
        snprintf(want, sizeof(want), "podman run -v %s:%s:ro", dir, dir);
        assert_non_null(strstr(msg, want));
    }

    /* There and readable: nothing to say. */
    assert_non_null(f = fopen(file, "w"));
    fputs("<system version=\"1\">\n</system>\n", f);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(dlt_topo_file_check(file, msg, sizeof(msg)), 0);
    assert_string_equal(msg, "");

    /* A folder where the file should be: refused too (NCCL's fopen would fail reading it). */
    assert_int_equal(dlt_topo_file_check(step, msg, sizeof(msg)), -EISDIR);

    /* Unreadable by this user (root reads anything: then only the other cases). */
    if (geteuid() != 0) {
        assert_int_equal(chmod(file, 0), 0);
        assert_int_equal(dlt_topo_file_check(file, msg, sizeof(msg)), -EACCES);
        assert_non_null(strstr(msg, "Permission denied"));
        assert_int_equal(chmod(file, 0644), 0);
    }

    /* The path is the task's environment: control characters never reach the message. */
    assert_int_equal(dlt_topo_file_check("/run/x\n/y\x1b/nccl_topo.xml", msg, sizeof(msg)), -ENOENT);
    assert_null(strchr(msg, '\n'));
    assert_null(strchr(msg, '\x1b'));
    assert_non_null(strstr(msg, "/run/x?/y?/nccl_topo.xml"));

    /* A short buffer is cut, never overrun. */
    assert_int_equal(dlt_topo_file_check(file + 1, msg, 16), -ENOENT);
    assert_int_equal(strlen(msg), 15);

    assert_int_equal(unlink(file), 0);
    assert_int_equal(rmdir(step), 0);
    assert_int_equal(rmdir(dir), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_topo_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
