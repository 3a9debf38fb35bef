/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of common/pci_busid.c: PCI bus ids as NVML, sysfs and CUDA write them,
 * normalised, and malformed ones refused. */
#include "config.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/pci_busid.h"
#include "plugin/topology.h" /* DLT_BUSID_LEN */

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_busid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
