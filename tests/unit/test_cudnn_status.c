/* SPDX-License-Identifier: Apache-2.0 */
/* test_cudnn_status: cuDNN statuses read by category. cuDNN 9 answers a configuration it has no
 * kernel for with a sub-code (cudnn_graph.h: CUDNN_STATUS_NOT_SUPPORTED_SHAPE = 3002, ...), which
 * an == test against CUDNN_STATUS_NOT_SUPPORTED misses: the batch-norm probe would then fail the
 * run instead of falling back to another mode; and a sub-code that describes the installation must
 * stay an error. Status values from cudnn_graph.h, no library, no GPU. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/cudnn_status.h"

static void test_categories(void **state)
{
    (void)state;
    assert_true(dlt_cudnn_is(CUDNN_STATUS_NOT_SUPPORTED, CUDNN_STATUS_NOT_SUPPORTED));
    assert_true(dlt_cudnn_is(CUDNN_STATUS_NOT_SUPPORTED_SHAPE, CUDNN_STATUS_NOT_SUPPORTED));
    assert_true(dlt_cudnn_is((cudnnStatus_t)3099, CUDNN_STATUS_NOT_SUPPORTED)); /* a sub-code of a later cuDNN */
    assert_true(dlt_cudnn_is(CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER, CUDNN_STATUS_BAD_PARAM));
    assert_false(dlt_cudnn_is(CUDNN_STATUS_INTERNAL_ERROR, CUDNN_STATUS_NOT_SUPPORTED));
    assert_false(dlt_cudnn_is(CUDNN_STATUS_NOT_SUPPORTED, CUDNN_STATUS_BAD_PARAM));
    assert_true(dlt_cudnn_ok(CUDNN_STATUS_SUCCESS));
    assert_false(dlt_cudnn_ok(CUDNN_STATUS_NOT_INITIALIZED));
}

/* The probe's reading: a NOT_SUPPORTED sub-code about the configuration is "not here" (1); one
 * about the installation (driver, runtime, architecture, sub-library), BAD_PARAM and every other
 * failure are errors (-1). */
static void test_probe_answer(void **state)
{
    static const cudnnStatus_t not_here[] = {
        CUDNN_STATUS_NOT_SUPPORTED,         CUDNN_STATUS_NOT_SUPPORTED_GRAPH_PATTERN,
        CUDNN_STATUS_NOT_SUPPORTED_SHAPE,   CUDNN_STATUS_NOT_SUPPORTED_DATA_TYPE,
        CUDNN_STATUS_NOT_SUPPORTED_LAYOUT,  CUDNN_STATUS_NOT_SUPPORTED_SHARED_MEMORY_INSUFFICIENT,
        CUDNN_STATUS_NOT_SUPPORTED_PADDING, (cudnnStatus_t)3099, /* a sub-code of a later cuDNN */
    };
    static const cudnnStatus_t errors[] = {
        CUDNN_STATUS_NOT_INITIALIZED,
        CUDNN_STATUS_RUNTIME_FP_OVERFLOW,
        CUDNN_STATUS_INTERNAL_ERROR,
        CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED,
        CUDNN_STATUS_EXECUTION_FAILED,
        CUDNN_STATUS_EXECUTION_FAILED_CUDART,
        CUDNN_STATUS_BAD_PARAM,
        CUDNN_STATUS_BAD_PARAM_SHAPE_MISMATCH,
        CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER,
        CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER,
        CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDART,
        CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH,
        CUDNN_STATUS_NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING,
        CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE,
    };
    (void)state;
    assert_int_equal(dlt_cudnn_probe_answer(CUDNN_STATUS_SUCCESS), 0);
    for (size_t i = 0; i < sizeof(not_here) / sizeof(not_here[0]); i++)
        if (dlt_cudnn_probe_answer(not_here[i]) != 1)
            fail_msg("status %d (category %d) read as an error, not as \"not supported here\"", (int)not_here[i],
                     CUDNN_STATUS_CATEGORY((int)not_here[i]));
    for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++)
        if (dlt_cudnn_probe_answer(errors[i]) != -1)
            fail_msg("status %d read as \"not supported here\": it would hide an error behind a fallback",
                     (int)errors[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_categories),
        cmocka_unit_test(test_probe_answer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
