/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of oci_container: which srun command lines ask for Slurm's own OCI container (and
 * which only look alike: pyxis's --container-* options), from which Slurm release a containerized
 * task keeps its own environment, and the refusal's words. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "plugin/oci_container.h"

/* A command line as /proc/self/cmdline has it: the words, each ending in NUL. */
static int _asked(const char *const *words)
{
    char buf[1024];
    size_t n = 0;
    for (; *words; words++) {
        size_t len = strlen(*words) + 1;
        assert_true(n + len <= sizeof(buf));
        memcpy(buf + n, *words, len);
        n += len;
    }
    return dlt_oci_container_asked(buf, n);
}

static void test_asked(void **state)
{
    (void)state;
    const char *eq[] = {"srun", "-N2", "--container=/b/bundle", "--dl-train", "true", NULL};
    const char *sep[] = {"srun", "--container", "/b/bundle", "--dl-train", "true", NULL};
    const char *pyxis[] = {
        "srun", "--container-image=ubuntu", "--container-mounts=/run/dltrain:/run/dltrain:ro", "--dl-train", "true",
        NULL};
    const char *none[] = {"srun", "--dl-train", "true", NULL};
    const char *empty[] = {"srun", "--container=", "true", NULL};
    const char *prefix[] = {"srun", "--containe", "--container_x", "x--container", NULL};
    assert_int_equal(_asked(eq), 1);
    assert_int_equal(_asked(sep), 1);
    assert_int_equal(_asked(pyxis), 0);
    assert_int_equal(_asked(none), 0);
    assert_int_equal(_asked(empty), 0);
    assert_int_equal(_asked(prefix), 0);
    /* a last word without its NUL (a cut read) is still one word */
    assert_int_equal(dlt_oci_container_asked("srun\0--container", 16), 1);
    assert_int_equal(dlt_oci_container_asked("srun\0--containe", 15), 0);
    assert_int_equal(dlt_oci_container_asked("", 0), 0);
}

static void test_release(void **state)
{
    (void)state;
    assert_int_equal(dlt_oci_task_env(21, 8), 0);
    assert_int_equal(dlt_oci_task_env(22, 5), 0);
    assert_int_equal(dlt_oci_task_env(23, 1), 0);
    assert_int_equal(dlt_oci_task_env(23, 2), 1);
    assert_int_equal(dlt_oci_task_env(23, 11), 1);
    assert_int_equal(dlt_oci_task_env(24, 0), 1);
    assert_int_equal(dlt_oci_task_env(25, 5), 1);
}

static void test_refusal_words(void **state)
{
    (void)state;
    char msg[1024];
    dlt_oci_refusal(msg, sizeof(msg), 22, 5);
    assert_non_null(strstr(msg, "Slurm 22.05"));
    assert_non_null(strstr(msg, "SLURM_PROCID"));
    assert_non_null(strstr(msg, "one task per node"));
    assert_non_null(strstr(msg, "ch-run -b TOPO_DIR"));
    assert_non_null(strstr(msg, "23.02 or later"));
    assert_true(strlen(msg) < sizeof(msg) - 1); /* whole, not cut */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_asked),
        cmocka_unit_test(test_release),
        cmocka_unit_test(test_refusal_words),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
