/* SPDX-License-Identifier: Apache-2.0 */
/* cudnn_status: how the trainer reads a cuDNN status. cuDNN 9 returns sub-codes inside a category
 * (cudnn_graph.h: CUDNN_STATUS_NOT_SUPPORTED = 3000, CUDNN_STATUS_NOT_SUPPORTED_SHAPE = 3002, ...;
 * CUDNN_STATUS_CATEGORY(code) = code / 1000 * 1000), so a status is compared by category, never
 * with == against a category's base value. Header only: needs cudnn.h, no library. */
#ifndef DLT_CUDNN_STATUS_H
#define DLT_CUDNN_STATUS_H

#include <cudnn.h>

/* Whether st lies in the category of `category` (any of its sub-codes). */
static inline int dlt_cudnn_is(cudnnStatus_t st, cudnnStatus_t category)
{
    return CUDNN_STATUS_CATEGORY((int)st) == CUDNN_STATUS_CATEGORY((int)category);
}

/* Success is the one member of its category (cudnn_graph.h has no code between 1 and 999, the
 * uncategorised errors start at 1001): an exact test, also for a future sub-code there. */
static inline int dlt_cudnn_ok(cudnnStatus_t st)
{
    return st == CUDNN_STATUS_SUCCESS;
}

/* What a capability probe makes of a call's status: 0 it ran, 1 cuDNN has no kernel for this
 * configuration (the NOT_SUPPORTED category: a mode, shape, layout or data type it cannot run),
 * -1 anything else, an error to report. Not "no kernel here", though in the NOT_SUPPORTED category,
 * are the sub-codes that describe the installation rather than the configuration: a driver or CUDA
 * runtime too old (3005, 3006), a library not built for this GPU (3007), a missing prerequisite or
 * sub-library such as libcudnn_engines_precompiled (3008, 3009). Taken as a fallback they would
 * hide a broken install behind a slower mode; as errors they name it. BAD_PARAM is an error too:
 * the probe's own call was wrong. */
static inline int dlt_cudnn_install_problem(cudnnStatus_t st)
{
    return st == CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDA_DRIVER ||
           st == CUDNN_STATUS_NOT_SUPPORTED_INCOMPATIBLE_CUDART || st == CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH ||
           st == CUDNN_STATUS_NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING ||
           st == CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE;
}

static inline int dlt_cudnn_probe_answer(cudnnStatus_t st)
{
    if (dlt_cudnn_ok(st))
        return 0;
    if (dlt_cudnn_is(st, CUDNN_STATUS_NOT_SUPPORTED) && !dlt_cudnn_install_problem(st))
        return 1;
    return -1;
}

#endif
