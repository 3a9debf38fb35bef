/* SPDX-License-Identifier: Apache-2.0 */
/* test_device_choice: the task's GPU over CUDA_VISIBLE_DEVICES / local rank / --device, and the
 * refusal of two ranks on one GPU. */
#include "config.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/pci_busid.h"
#include "trainer/backend/device_choice.h"

static void test_visible_list(void **state)
{
    char e[16];
    (void)state;
    assert_int_equal(dlt_device_visible_count(NULL), -1);
    assert_int_equal(dlt_device_visible_count(""), 0);
    assert_int_equal(dlt_device_visible_count("3"), 1);
    assert_int_equal(dlt_device_visible_count("0,1,3,2"), 4);
    assert_int_equal(dlt_device_visible_entry("0,1,3,2", 2, e, sizeof(e)), 0);
    assert_string_equal(e, "3");
    assert_int_equal(dlt_device_visible_entry("GPU-aa,GPU-bb", 1, e, sizeof(e)), 0);
    assert_string_equal(e, "GPU-bb");
    assert_int_equal(dlt_device_visible_entry("0,1", 2, e, sizeof(e)), -1);
}

/* Four ranks on a node that sees four GPUs (plain srun --gpus-per-node=4, no plugin): each its own. */
static void test_local_rank_rule(void **state)
{
    dlt_err err = DLT_ERR_INIT;
    int dev, seen[4] = {0};
    (void)state;
    for (int lr = 0; lr < 4; lr++) {
        assert_int_equal(dlt_device_choose(-1, 0, lr, 4, &dev, dlt_err_fresh(&err)), 0);
        assert_int_equal(dev, lr);
        seen[dev]++;
    }
    for (int d = 0; d < 4; d++)
        assert_int_equal(seen[d], 1);
    /* 8 ranks, 4 GPUs: two per GPU by the modulo (the distinct check then refuses). */
    assert_int_equal(dlt_device_choose(-1, 0, 6, 4, &dev, dlt_err_fresh(&err)), 0);
    assert_int_equal(dev, 2);
    /* One GPU visible (gpus-per-task, or the plugin's gpus=task): device 0. */
    assert_int_equal(dlt_device_choose(-1, 0, 3, 1, &dev, dlt_err_fresh(&err)), 0);
    assert_int_equal(dev, 0);
}

/* With the plugin (gpus=step keeps all GPUs visible, the task's own first) device 0 is the task's. */
static void test_plugin_bound_uses_device_zero(void **state)
{
    dlt_err err = DLT_ERR_INIT;
    int dev;
    (void)state;
    assert_int_equal(dlt_device_choose(-1, 1, 3, 4, &dev, dlt_err_fresh(&err)), 0);
    assert_int_equal(dev, 0);
}

static void test_explicit_device(void **state)
{
    dlt_err err = DLT_ERR_INIT;
    int dev;
    (void)state;
    assert_int_equal(dlt_device_choose(2, 1, 0, 4, &dev, dlt_err_fresh(&err)), 0);
    assert_int_equal(dev, 2);
    assert_int_equal(dlt_device_choose(4, 0, 0, 4, &dev, dlt_err_fresh(&err)), -ENODEV);
    assert_non_null(strstr(err.msg, "--device 4: this task sees 4 GPU(s) (0..3)"));
}

static void test_two_ranks_one_gpu_refused(void **state)
{
    dlt_err err = DLT_ERR_INIT;
    dlt_device_claim ok[4] = {
        {0, "n1", "0000:1a:00.0"}, {1, "n1", "0000:1b:00.0"}, {2, "n2", "0000:1a:00.0"}, {3, "n2", "0000:1b:00.0"}};
    dlt_device_claim bad[3] = {{0, "n1", "0000:1a:00.0"}, {1, "n2", "0000:1a:00.0"}, {2, "n1", "0000:1a:00.0"}};
    (void)state;
    assert_int_equal(dlt_device_check_distinct(ok, 4, dlt_err_fresh(&err)), 0);
    assert_int_equal(dlt_device_check_distinct(bad, 3, dlt_err_fresh(&err)), -EBUSY);
    assert_non_null(strstr(err.msg, "ranks 0 and 2 on n1 would both train on GPU 0000:1a:00.0"));
    assert_non_null(strstr(err.msg, "--gpus-per-task=1"));
    /* Unless NCCL is asked to run several ranks on one GPU (NCCL >= 2.30). */
    assert_true(dlt_device_sharing_allowed("1"));
    assert_false(dlt_device_sharing_allowed(NULL));
    assert_false(dlt_device_sharing_allowed("0"));
    assert_false(dlt_device_sharing_allowed(""));
}

/* At 1,024 ranks (128 nodes x 8 GPUs) against a naive double loop: every rank's GPU distinct
 * passes; planted duplicates are found, and the pair named is the one the loop over the ranks in
 * order meets first (its lowest rank, then that rank's lowest twin), wherever the groups sort. */
static int _naive_first_pair(const dlt_device_claim *c, int n, int *a, int *b)
{
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (!strcmp(c[i].host, c[j].host) && !strcmp(c[i].gpu, c[j].gpu)) {
                *a = c[i].rank;
                *b = c[j].rank;
                return 1;
            }
    return 0;
}

static void test_distinct_at_scale(void **state)
{
    enum { N = 1024 };
    static dlt_device_claim c[N];
    dlt_err err = DLT_ERR_INIT;
    char want[128];
    int a = -1, b = -1;
    (void)state;
    for (int r = 0; r < N; r++) {
        c[r].rank = r;
        snprintf(c[r].host, sizeof(c[r].host), "gpu%03d", r / 8);
        snprintf(c[r].gpu, sizeof(c[r].gpu), "0000:%02x:00.0", 0x1a + r % 8);
    }
    assert_int_equal(dlt_device_check_distinct(c, N, dlt_err_fresh(&err)), 0);
    assert_int_equal(dlt_device_check_distinct(c, 1, dlt_err_fresh(&err)), 0);
    assert_int_equal(dlt_device_check_distinct(c, 0, dlt_err_fresh(&err)), 0);
    /* Three groups of twins: on gpu005 (ranks 41 and 47), on a host that sorts before every other
     * but holds late ranks (950 and 951, moved there) and on gpu120 (ranks 961, 966, 967). */
    strcpy(c[47].gpu, c[41].gpu);
    strcpy(c[950].host, "aaa");
    strcpy(c[951].host, "aaa");
    strcpy(c[951].gpu, c[950].gpu);
    strcpy(c[966].gpu, c[961].gpu);
    strcpy(c[967].gpu, c[961].gpu);
    for (int round = 0; round < 3; round++) {
        assert_int_equal(_naive_first_pair(c, N, &a, &b), 1);
        assert_int_equal(dlt_device_check_distinct(c, N, dlt_err_fresh(&err)), -EBUSY);
        snprintf(want, sizeof(want), "ranks %d and %d on %s would both train", a, b, c[a].host);
        if (!strstr(err.msg, want))
            fail_msg("expected '%s' in: %s", want, err.msg);
        /* take the named pair away: the next one is found */
        snprintf(c[b].gpu, sizeof(c[b].gpu), "spare-%d", b);
    }
    assert_int_equal(dlt_device_check_distinct(c, N, dlt_err_fresh(&err)), -EBUSY); /* 961 and 967 left */
    assert_non_null(strstr(err.msg, "ranks 961 and 967 on gpu120"));
}

/* The plugin's GPU against the one opened: the bus id forms of NVML, the CUDA runtime and sysfs
 * are one GPU; another GPU is refused naming both. */
static void test_plugin_gpu_is_the_opened_one(void **state)
{
    dlt_err err = DLT_ERR_INIT;
    char n[32];
    (void)state;
    assert_int_equal(dlt_pci_busid_normalize("00000000:1A:00.0", n, sizeof(n)), 0);
    assert_string_equal(n, "0000:1a:00.0");
    assert_int_equal(dlt_pci_busid_normalize("0000:1A:00.0", n, sizeof(n)), 0);
    assert_string_equal(n, "0000:1a:00.0");
    assert_int_equal(dlt_pci_busid_normalize("0000:1a:00.0x", n, sizeof(n)), -1);
    assert_int_equal(dlt_pci_busid_normalize("GPU-1234", n, sizeof(n)), -1);
    /* NVML's form from the plugin against the runtime's form: the same GPU. */
    assert_int_equal(dlt_device_pci_check("0000:1a:00.0", "0000:1A:00.0", 0, dlt_err_fresh(&err)), 0);
    assert_int_equal(dlt_device_pci_check("00000000:3B:00.0", "0000:3b:00.0", 0, dlt_err_fresh(&err)), 0);
    /* Nothing to compare: no plugin, or no bus id from the runtime. */
    assert_int_equal(dlt_device_pci_check(NULL, "0000:1A:00.0", 0, dlt_err_fresh(&err)), 1);
    assert_int_equal(dlt_device_pci_check("", "0000:1A:00.0", 0, dlt_err_fresh(&err)), 1);
    assert_int_equal(dlt_device_pci_check("0000:1a:00.0", NULL, 0, dlt_err_fresh(&err)), 1);
    /* Another GPU: refused, naming both in one form. */
    assert_int_equal(dlt_device_pci_check("0000:1a:00.0", "0000:3B:00.0", 1, dlt_err_fresh(&err)), -ENODEV);
    assert_non_null(
        strstr(err.msg, "bound this task to GPU 0000:1a:00.0 (DLT_GPU_PCI) but CUDA device 1 is GPU 0000:3b:00.0"));
    assert_int_equal(dlt_device_pci_check("GPU-1234", "0000:3B:00.0", 0, dlt_err_fresh(&err)), -EINVAL);
    assert_non_null(strstr(err.msg, "DLT_GPU_PCI='GPU-1234'"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_visible_list),
        cmocka_unit_test(test_local_rank_rule),
        cmocka_unit_test(test_plugin_bound_uses_device_zero),
        cmocka_unit_test(test_explicit_device),
        cmocka_unit_test(test_two_ranks_one_gpu_refused),
        cmocka_unit_test(test_distinct_at_scale),
        cmocka_unit_test(test_plugin_gpu_is_the_opened_one),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
