/* SPDX-License-Identifier: Apache-2.0 */
/* grad_listener: how backward tells whoever sums the gradients how far it got: ready when every
 * gradient at flat offsets >= lo is final, done when backward is over. */
#ifndef DLT_GRAD_LISTENER_H
#define DLT_GRAD_LISTENER_H

#include <stddef.h>

/* Either function may be NULL; both return 0 or a negative status. */
typedef struct {
    int (*ready)(void *arg, size_t lo);
    int (*done)(void *arg);
    void *arg;
} dlt_grad_listener;

#endif
