/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of plugin/nvml_loader.c: its own NVML declarations against NVIDIA's nvml.h (where it is
 * installed: compile-time checks), and a library that cannot be loaded named in the error. */
#include "config.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "plugin/nvml_loader.h"

#ifdef DLT_HAVE_NVML_H
#include <nvml.h>
_Static_assert(sizeof(dlt_nvmlPciInfo_t) == sizeof(nvmlPciInfo_t), "nvmlPciInfo_t size");
_Static_assert(offsetof(dlt_nvmlPciInfo_t, busId) == offsetof(nvmlPciInfo_t, busId), "nvmlPciInfo_t.busId");
_Static_assert(offsetof(dlt_nvmlPciInfo_t, pciSubSystemId) == offsetof(nvmlPciInfo_t, pciSubSystemId), "subsys");
_Static_assert(DLT_NVML_NVLINK_MAX_LINKS == NVML_NVLINK_MAX_LINKS, "max links");
_Static_assert(DLT_NVML_NVLINK_DEVICE_TYPE_SWITCH == NVML_NVLINK_DEVICE_TYPE_SWITCH, "switch type");
_Static_assert(DLT_NVML_P2P_CAPS_INDEX_READ == NVML_P2P_CAPS_INDEX_READ, "p2p read");
#endif

static void test_missing_library_named(void **state)
{
    dlt_nvml nvml;
    dlt_err err = DLT_ERR_INIT;
    (void)state;
    assert_int_not_equal(dlt_nvml_open(&nvml, "/nonexistent/libnvidia-ml.so.1", dlt_err_fresh(&err)), 0);
    assert_non_null(strstr(err.msg, "/nonexistent/libnvidia-ml.so.1"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_missing_library_named),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
