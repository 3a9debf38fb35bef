/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of plugin/binding.c: CUDA_VISIBLE_DEVICES composition (own GPU first, NVLink order)
 * and a CPU step's spread over NUMA nodes within what Slurm allows. */
#include "config.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "plugin/binding.h"
#include "plugin/topology.h"

static void test_cuda_visible(void **state)
{
    dlt_step_gpus s;
    dlt_binding b;
    char buf[64];
    (void)state;
    memset(&s, 0, sizeof(s));
    s.n = 3;
    snprintf(s.label[0], 8, "4");
    snprintf(s.label[1], 8, "5");
    snprintf(s.label[2], 8, "7");
    s.order[0] = 0;
    s.order[1] = 2;
    s.order[2] = 1;
    memset(&b, 0, sizeof(b));
    b.gpu_pos = 2;
    assert_int_equal(dlt_binding_cuda_visible(&s, &b, 0, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "7");
    assert_int_equal(dlt_binding_cuda_visible(&s, &b, 1, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "7,4,5");
    assert_int_equal(dlt_binding_cuda_visible(&s, &b, 1, buf, 4), -ENOSPC);
    b.gpu_pos = -1;
    assert_int_equal(dlt_binding_cuda_visible(&s, &b, 0, buf, sizeof(buf)), -EINVAL);
}

/* The NIC a GPU's task gets: the nearest that is up. Two NICs: mlx5_0 on the GPU's own switch (PIX)
 * and mlx5_1 under the other root complex; a NIC that is down is never preferred to one that is up,
 * however near. */
static void test_nearest_nic_that_is_up(void **state)
{
    static dlt_topology t;
    dlt_step_gpus s;
    dlt_binding b;
    dlt_cpuset all;
    dlt_err err = DLT_ERR_INIT;
    const struct {
        const char *bus, *root;
        int parent;
    } pci[5] = {{"0000:10:00.0", "pci0000:10", -1},
                {"0000:11:00.0", "pci0000:10", 0},
                {"0000:12:00.0", "pci0000:10", 0},
                {"0000:80:00.0", "pci0000:80", -1},
                {"0000:81:00.0", "pci0000:80", 3}};
    (void)state;
    memset(&t, 0, sizeof(t));
    for (int i = 0; i < 5; i++) {
        snprintf(t.pci[i].busid, sizeof(t.pci[i].busid), "%s", pci[i].bus);
        snprintf(t.pci[i].root, sizeof(t.pci[i].root), "%s", pci[i].root);
        t.pci[i].parent = pci[i].parent;
        t.pci[i].numa = i < 3 ? 0 : 1;
    }
    t.npci = 5;
    t.nnuma = 2;
    t.ngpus = 1;
    t.gpus[0].pci = 1;
    t.gpus[0].numa = 0;
    t.nnics = 2;
    for (int n = 0; n < 2; n++) {
        snprintf(t.nics[n].name, sizeof(t.nics[n].name), "mlx5_%d", n);
        t.nics[n].is_ib = 1;
        t.nics[n].up = 1;
        t.nics[n].speed_mbps = 100000;
        t.nics[n].pci = n == 0 ? 2 : 4;
        t.nics[n].numa = n;
    }
    memset(&s, 0, sizeof(s));
    s.n = 1;
    snprintf(s.label[0], sizeof(s.label[0]), "0");
    memset(&all, 0, sizeof(all));
    assert_int_equal(dlt_cpuset_parse("0-7", &all), 0);
    assert_int_equal(dlt_binding_choose(&t, &s, 0, &all, "", &b, dlt_err_fresh(&err)), 0);
    assert_int_equal(b.nic, 0); /* both up: the one on the GPU's switch */
    assert_int_equal(b.nic_distance, DLT_DIST_PIX);
    t.nics[0].up = 0;
    assert_int_equal(dlt_binding_choose(&t, &s, 0, &all, "", &b, dlt_err_fresh(&err)), 0);
    assert_int_equal(b.nic, 1); /* the near one is down: the far one that is up */
    assert_int_equal(dlt_binding_choose(&t, &s, 0, &all, "mlx5_0", &b, dlt_err_fresh(&err)), 0);
    assert_int_equal(b.nic, 0); /* named: taken as asked */
}

/* A CPU step's tasks (gpus=none) spread over the node's NUMA nodes, within what Slurm allows. */
static void test_numa_spread(void **state)
{
    static dlt_topology t;
    dlt_cpuset allowed, out;
    char txt[64];
    (void)state;
    memset(&t, 0, sizeof(t));
    t.nnuma = 2;
    assert_int_equal(dlt_cpuset_parse("0-7", &t.numa_cpus[0]), 0);
    assert_int_equal(dlt_cpuset_parse("8-15", &t.numa_cpus[1]), 0);
    assert_int_equal(dlt_cpuset_parse("0-15", &allowed), 0);
    /* Four tasks: two per NUMA node. */
    for (int r = 0; r < 4; r++) {
        assert_int_equal(dlt_binding_numa_cpus(&t, r, 4, &allowed, &out), r / 2);
        assert_int_equal(dlt_cpuset_format(&out, txt, sizeof(txt)), 0);
        assert_string_equal(txt, r < 2 ? "0-7" : "8-15");
    }
    /* Only NUMA node 1's CPUs 8-9 allowed: task 0 (NUMA 0) keeps Slurm's set, task 1 gets 8-9. */
    assert_int_equal(dlt_cpuset_parse("8-9", &allowed), 0);
    assert_int_equal(dlt_binding_numa_cpus(&t, 0, 2, &allowed, &out), -1);
    assert_int_equal(dlt_cpuset_format(&out, txt, sizeof(txt)), 0);
    assert_string_equal(txt, "8-9");
    assert_int_equal(dlt_binding_numa_cpus(&t, 1, 2, &allowed, &out), 1);
    /* One NUMA node: nothing to spread over. */
    t.nnuma = 1;
    assert_int_equal(dlt_binding_numa_cpus(&t, 0, 2, &allowed, &out), -1);
}

/* cpu_partitions= membership: whole names only. */
static void test_partition_listed(void **state)
{
    (void)state;
    assert_int_equal(dlt_partition_listed("cpu,debug", "cpu"), 1);
    assert_int_equal(dlt_partition_listed("cpu,debug", "debug"), 1);
    assert_int_equal(dlt_partition_listed("cpu,debug", "deb"), 0);
    assert_int_equal(dlt_partition_listed("cpu,debug", "cpu2"), 0);
    assert_int_equal(dlt_partition_listed("cpu2,debug", "cpu"), 0);
    assert_int_equal(dlt_partition_listed("", "cpu"), 0);
    assert_int_equal(dlt_partition_listed("cpu", ""), 0);
    assert_int_equal(dlt_partition_listed("cpu", NULL), 0);
}

/* gpus= on a node: the user's choice kept, or refused where it cannot hold; without one, gpus=none
 * on a node without GPUs and in a cpu_partitions partition, refused on a GPU node (every case). */
static void test_gpus_decide(void **state)
{
    dlt_site_conf site;
    dlt_user_opts o;
    dlt_gpus_mode m;
    char why[512];
    (void)state;
    dlt_site_conf_defaults(&site);
    snprintf(site.cpu_partitions, sizeof(site.cpu_partitions), "cpu,small");
    memset(&o, 0, sizeof(o));
    o.gpus = DLT_GPUS_TASK;

    /* No gpus= given. */
    assert_int_equal(dlt_gpus_decide(&o, &site, "gpu", 0, 0, 0, &m, why, sizeof(why)), 0);
    assert_int_equal(m, DLT_GPUS_NONE);
    assert_non_null(strstr(why, "no GPU on this node: gpus=none"));
    assert_non_null(strstr(why, "no NVML"));
    assert_int_equal(dlt_gpus_decide(&o, &site, NULL, 0, 1, 0, &m, why, sizeof(why)), 0);
    assert_int_equal(m, DLT_GPUS_NONE);
    assert_non_null(strstr(why, "NVML counts 0 GPUs"));
    assert_int_equal(dlt_gpus_decide(&o, &site, "gpu", 0, 1, 4, &m, why, sizeof(why)), -EINVAL);
    assert_non_null(strstr(why, "requests none and this node has 4 GPU(s)"));
    assert_non_null(strstr(why, "--gpus-per-node=N"));
    assert_non_null(strstr(why, "--dl-train=gpus=none"));
    assert_int_equal(dlt_gpus_decide(&o, &site, "small", 0, 1, 4, &m, why, sizeof(why)), 0);
    assert_int_equal(m, DLT_GPUS_NONE);
    assert_non_null(strstr(why, "partition small is one of the site's cpu_partitions: gpus=none"));
    assert_int_equal(dlt_gpus_decide(&o, &site, "gpu", 1, 1, 4, &m, why, sizeof(why)), 0);
    assert_int_equal(m, DLT_GPUS_TASK);
    assert_string_equal(why, "");
    o.gpus = DLT_GPUS_STEP; /* the site's default_gpus=step */
    assert_int_equal(dlt_gpus_decide(&o, &site, "gpu", 1, 1, 4, &m, why, sizeof(why)), 0);
    assert_int_equal(m, DLT_GPUS_STEP);

    /* gpus= given: kept, or refused naming why. */
    o.gpus_given = 1;
    o.gpus = DLT_GPUS_TASK;
    assert_int_equal(dlt_gpus_decide(&o, &site, "cpu", 1, 1, 2, &m, why, sizeof(why)), 0);
    assert_int_equal(m, DLT_GPUS_TASK);
    assert_int_equal(dlt_gpus_decide(&o, &site, "gpu", 0, 0, 0, &m, why, sizeof(why)), -EINVAL);
    assert_non_null(strstr(why, "--dl-train=gpus=task asks for GPUs but this step has none on this node"));
    assert_non_null(strstr(why, "leave gpus= out"));
    assert_int_equal(dlt_gpus_decide(&o, &site, "gpu", 1, 1, 0, &m, why, sizeof(why)), -EINVAL);
    assert_non_null(strstr(why, "this node has none (NVML counts 0)"));
    o.gpus = DLT_GPUS_NONE;
    assert_int_equal(dlt_gpus_decide(&o, &site, "gpu", 1, 1, 4, &m, why, sizeof(why)), 0);
    assert_int_equal(m, DLT_GPUS_NONE);
    assert_string_equal(why, "");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nearest_nic_that_is_up),
        cmocka_unit_test(test_cuda_visible),
        cmocka_unit_test(test_numa_spread),
        cmocka_unit_test(test_partition_listed),
        cmocka_unit_test(test_gpus_decide),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
