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

#include "plugin/nccl_topo_xml.h"
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

/* The <pci> line of busid in xml, or NULL. */
static const char *_pci_line(const char *xml, const char *busid, char *line, size_t len)
{
    char key[64];
    const char *p, *e;
    snprintf(key, sizeof(key), "<pci busid=\"%s\"", busid);
    if (!(p = strstr(xml, key)))
        return NULL;
    e = strchr(p, '\n');
    snprintf(line, len, "%.*s", (int)(e ? e - p : (long)strlen(p)), p);
    return line;
}

/* A link is as fast as the slower of a device and its upstream port, in speed and in width alike
 * (NCCL takes min(device, its parent's)): a Gen4 x8 switch port above a Gen3 x16 GPU gives Gen3
 * x8, and a Gen4 x16 GPU under a Gen3 x4 port gives Gen3 x4. */
static void test_xml_link_is_the_slower_side(void **state)
{
    static dlt_topology t;
    static char xml[16384];
    char line[256];
    (void)state;
    memset(&t, 0, sizeof(t));
    snprintf(t.arch, sizeof(t.arch), "x86_64");
    snprintf(t.cpu_vendor, sizeof(t.cpu_vendor), "GenuineIntel");
    t.cpu_family = 6;
    t.cpu_model = 85;
    t.nnuma = 1;
    assert_int_equal(dlt_cpuset_parse("0-3", &t.numa_cpus[0]), 0);
    const struct {
        const char *bus, *speed;
        int width, parent;
    } pci[4] = {{"0000:10:00.0", "16.0 GT/s PCIe", 8, -1},
                {"0000:11:00.0", "8.0 GT/s PCIe", 16, 0},
                {"0000:20:00.0", "8.0 GT/s PCIe", 4, -1},
                {"0000:21:00.0", "16.0 GT/s PCIe", 16, 2}};
    for (int i = 0; i < 4; i++) {
        snprintf(t.pci[i].busid, sizeof(t.pci[i].busid), "%s", pci[i].bus);
        snprintf(t.pci[i].link_speed, sizeof(t.pci[i].link_speed), "%s", pci[i].speed);
        snprintf(t.pci[i].root, sizeof(t.pci[i].root), "pci0000:%c0", pci[i].bus[5]);
        t.pci[i].link_width = pci[i].width;
        t.pci[i].parent = pci[i].parent;
        t.pci[i].numa = 0;
    }
    t.npci = 4;
    t.ngpus = 2;
    for (int g = 0; g < 2; g++) {
        t.gpus[g].pci = g == 0 ? 1 : 3;
        t.gpus[g].sm = 70;
        t.gpus[g].numa = 0;
        snprintf(t.gpus[g].busid, sizeof(t.gpus[g].busid), "%s", pci[g == 0 ? 1 : 3].bus);
    }
    assert_true(dlt_nccl_topo_xml(&t, xml, sizeof(xml)) > 0);
    assert_non_null(_pci_line(xml, "0000:11:00.0", line, sizeof(line)));
    assert_non_null(strstr(line, "link_speed=\"8.0 GT/s PCIe\" link_width=\"8\""));
    assert_non_null(_pci_line(xml, "0000:21:00.0", line, sizeof(line)));
    assert_non_null(strstr(line, "link_speed=\"8.0 GT/s PCIe\" link_width=\"4\""));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_xml_link_is_the_slower_side),
        cmocka_unit_test(test_cpuset),
        cmocka_unit_test(test_distance),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
