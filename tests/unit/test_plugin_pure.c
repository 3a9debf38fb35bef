/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the plugin's pure helpers on hand-built inputs: CPU lists, bus ids, %n paths,
 * PCI distances on a synthetic tree, CUDA_VISIBLE_DEVICES composition, and (where nvml.h is
 * installed) the plugin's own NVML declarations against NVIDIA's. */
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
#include "plugin/nvml_loader.h"
#include "plugin/step_dir.h"
#include "plugin/topology.h"

#ifdef DLT_HAVE_NVML_H
#include <nvml.h>
_Static_assert(sizeof(dlt_nvmlPciInfo_t) == sizeof(nvmlPciInfo_t), "nvmlPciInfo_t size");
_Static_assert(offsetof(dlt_nvmlPciInfo_t, busId) == offsetof(nvmlPciInfo_t, busId), "nvmlPciInfo_t.busId");
_Static_assert(offsetof(dlt_nvmlPciInfo_t, pciSubSystemId) == offsetof(nvmlPciInfo_t, pciSubSystemId), "subsys");
_Static_assert(DLT_NVML_NVLINK_MAX_LINKS == NVML_NVLINK_MAX_LINKS, "max links");
_Static_assert(DLT_NVML_NVLINK_DEVICE_TYPE_SWITCH == NVML_NVLINK_DEVICE_TYPE_SWITCH, "switch type");
_Static_assert(DLT_NVML_P2P_CAPS_INDEX_READ == NVML_P2P_CAPS_INDEX_READ, "p2p read");
#endif

static void test_cpuset(void **state)
{
    dlt_cpuset s;
    char buf[256];
    (void)state;
    assert_int_equal(dlt_cpuset_parse("0-3,8,10-11\n", &s), 0);
    assert_int_equal(dlt_cpuset_count(&s), 7);
    assert_int_equal(dlt_cpuset_format(&s, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "0-3,8,10-11");
    assert_int_equal(dlt_cpuset_format_mask(&s, 40, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "00000000,00000d0f");
    assert_int_equal(dlt_cpuset_parse("1023", &s), 0);
    assert_int_equal(dlt_cpuset_count(&s), 1);
    assert_int_equal(dlt_cpuset_parse("1024", &s), -1);
    assert_int_equal(dlt_cpuset_parse("3-1", &s), -1);
    assert_int_equal(dlt_cpuset_parse("a", &s), -1);
    assert_int_equal(dlt_cpuset_parse("1,,2", &s), -1);
    assert_int_equal(dlt_cpuset_parse("1-", &s), -1);
    assert_int_equal(dlt_cpuset_parse("0-1023", &s), 0);
    assert_int_equal(dlt_cpuset_format(&s, buf, 4), -1); /* too small: refused, not cut */
}

static void test_busid(void **state)
{
    char out[DLT_BUSID_LEN];
    (void)state;
    assert_int_equal(dlt_pci_busid_normalize("00000000:1A:00.0", out, DLT_BUSID_LEN), 0);
    assert_string_equal(out, "0000:1a:00.0");
    assert_int_equal(dlt_pci_busid_normalize("0001:b3:1f.7", out, DLT_BUSID_LEN), 0);
    assert_string_equal(out, "0001:b3:1f.7");
    assert_int_equal(dlt_pci_busid_normalize("0000:1a:00.8", out, DLT_BUSID_LEN), -1);
    assert_int_equal(dlt_pci_busid_normalize("0000:1a:20.0", out, DLT_BUSID_LEN), -1);
    assert_int_equal(dlt_pci_busid_normalize("0000:1a:00.0x", out, DLT_BUSID_LEN), -1);
    assert_int_equal(dlt_pci_busid_normalize("garbage", out, DLT_BUSID_LEN), -1);
    assert_int_equal(dlt_pci_busid_normalize(NULL, out, DLT_BUSID_LEN), -1);
}

static void test_expand_node(void **state)
{
    char out[64];
    (void)state;
    assert_int_equal(dlt_expand_node("/run/%n/dlt", "n12", out, sizeof(out)), 0);
    assert_string_equal(out, "/run/n12/dlt");
    assert_int_equal(dlt_expand_node("/run/dlt", "n1", out, sizeof(out)), 0);
    assert_string_equal(out, "/run/dlt");
    assert_int_equal(dlt_expand_node("/run/%n", "../etc", out, sizeof(out)), -1);
    assert_int_equal(dlt_expand_node("/run/%n", "..", out, sizeof(out)), -1);
    assert_int_equal(dlt_expand_node("/run/%n", "", out, sizeof(out)), -1);
    assert_int_equal(dlt_expand_node("/a/very/long/path/%n", "node-name-that-is-long-enough", out, 20), -1);
}

/* root0 -> sw(1) -> {port(2) -> gpuA(3), port(4) -> gpuB(5)}; root0 -> port(6) -> nic(7);
 * other socket: root1 -> port(8) -> gpuC(9). */
static void _tree(dlt_topology *t)
{
    static const struct {
        const char *bus, *root;
        int parent, numa;
    } n[] = {{"0000:00:02.0", "pci0000:00", -1, 0}, {"0000:02:00.0", "pci0000:00", 0, 0},
             {"0000:03:08.0", "pci0000:00", 1, 0},  {"0000:04:00.0", "pci0000:00", 2, 0},
             {"0000:03:09.0", "pci0000:00", 1, 0},  {"0000:05:00.0", "pci0000:00", 4, 0},
             {"0000:00:03.0", "pci0000:00", -1, 0}, {"0000:06:00.0", "pci0000:00", 6, 0},
             {"0000:80:02.0", "pci0000:80", -1, 1}, {"0000:81:00.0", "pci0000:80", 8, 1}};
    memset(t, 0, sizeof(*t));
    for (size_t i = 0; i < sizeof(n) / sizeof(n[0]); i++) {
        snprintf(t->pci[i].busid, sizeof(t->pci[i].busid), "%s", n[i].bus);
        snprintf(t->pci[i].root, sizeof(t->pci[i].root), "%s", n[i].root);
        t->pci[i].parent = n[i].parent;
        t->pci[i].numa = n[i].numa;
    }
    t->npci = 10;
}

static void test_distance(void **state)
{
    dlt_topology t;
    (void)state;
    _tree(&t);
    assert_int_equal(dlt_topo_pci_distance(&t, 3, 3), DLT_DIST_SELF);
    assert_int_equal(dlt_topo_pci_distance(&t, 3, 5), DLT_DIST_PIX); /* one switch */
    assert_int_equal(dlt_topo_pci_distance(&t, 3, 7), DLT_DIST_PHB); /* different root ports */
    assert_int_equal(dlt_topo_pci_distance(&t, 3, 9), DLT_DIST_SYS); /* other socket */
    assert_int_equal(dlt_topo_pci_distance(&t, 3, 1), DLT_DIST_PIX);
    assert_int_equal(dlt_topo_pci_distance(&t, 3, -1), DLT_DIST_SYS);
    /* Two host bridges of one NUMA node. */
    snprintf(t.pci[6].root, sizeof(t.pci[6].root), "pci0000:40");
    snprintf(t.pci[7].root, sizeof(t.pci[7].root), "pci0000:40");
    assert_int_equal(dlt_topo_pci_distance(&t, 3, 7), DLT_DIST_NODE);
}

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpuset),      cmocka_unit_test(test_busid),    cmocka_unit_test(test_expand_node),
        cmocka_unit_test(test_distance),    cmocka_unit_test(test_cuda_visible), cmocka_unit_test(test_numa_spread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
