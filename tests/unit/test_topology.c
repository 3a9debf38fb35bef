/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of plugin/topology.c on hand-built inputs: CPU lists (parse, format, masks, refusals)
 * and PCI distances on a synthetic tree (PIX, PHB, NODE, SYS). */
#include "config.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "plugin/topology.h"

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpuset),
        cmocka_unit_test(test_distance),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
