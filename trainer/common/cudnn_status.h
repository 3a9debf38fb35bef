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

/* What a capability probe makes of a call's status: 0 it ran, 1 cuDNN refused this configuration
 * (the NOT_SUPPORTED or BAD_PARAM categories: a mode or data type it has no kernel for), -1
 * anything else (an error to report). */
static inline int dlt_cudnn_probe_answer(cudnnStatus_t st)
{
    if (dlt_cudnn_ok(st))
        return 0;
    if (dlt_cudnn_is(st, CUDNN_STATUS_NOT_SUPPORTED) || dlt_cudnn_is(st, CUDNN_STATUS_BAD_PARAM))
        return 1;
    return -1;
}

#endif
