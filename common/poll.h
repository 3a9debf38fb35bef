/* SPDX-License-Identifier: Apache-2.0 */
/* poll: the one busy-wait of the trainer's GPU-side waits (a CUDA stream or event, an NCCL
 * operation still in progress): yield for the first polls, then sleep briefly between them, so a
 * short wait costs little latency and a long one little CPU; bounded in time when asked. */
#ifndef DLT_POLL_H
#define DLT_POLL_H

/* Asks done(arg) until it answers 1 (returns 0) or an error < 0 (returned as is); 0 means not
 * yet. With timeout_s > 0, returns -ETIMEDOUT once that many seconds passed without an answer. */
int dlt_poll(int (*done)(void *arg), void *arg, double timeout_s);

#endif
