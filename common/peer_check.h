/* SPDX-License-Identifier: Apache-2.0 */
/* peer_check: whether a peer of this rank is lost, asked between the polls of a wait on the device,
 * so the wait ends with a message instead of a hang. The communicator owns it (dlt_comm.peers:
 * NCCL's asynchronous error; empty for host communicators); the backend's waits borrow it. */
#ifndef DLT_PEER_CHECK_H
#define DLT_PEER_CHECK_H

#include "common/status.h"
#include <stddef.h>

typedef struct {
    int (*lost)(void *arg, dlt_err *err); /* nonzero, err filled: a peer is lost; NULL: never */
    void *arg;
} dlt_peer_check;

/* 0 when pc is NULL, empty, or no peer is lost; else lost's status with err filled. */
static inline int dlt_peer_lost(const dlt_peer_check *pc, dlt_err *err)
{
    return pc && pc->lost ? pc->lost(pc->arg, err) : 0;
}

#endif
