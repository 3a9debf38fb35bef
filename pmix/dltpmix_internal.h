/* SPDX-License-Identifier: Apache-2.0 */
/* dltpmix_internal: the context struct shared by dltpmix.c and dltpmix_nccl.c.
 * Not installed. */
#ifndef DLTPMIX_INTERNAL_H
#define DLTPMIX_INTERNAL_H

#include <pmix.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <time.h>

#include "common/status.h"
#include "dltpmix.h"

struct dltpmix_ctx {
    dltpmix_info info;
    pmix_proc_t me;
    double timeout_s;
    uint64_t seq;  /* collectives issued so far; the same on every rank */
    int pmix_up;   /* PMIx_Init succeeded */
    int broken;    /* a collective timed out: PMIx ops may still be pending */
    char rdv[512]; /* the test rendezvous directory (DLTPMIX_TEST_RENDEZVOUS), "" under PMIx */
    int rdv_fd;    /* that directory, opened once and checked (frames are opened relative to it); -1 */
    dlt_err err;   /* this call's first failure (each public call starts afresh; dltpmix_error says it) */
};

int dltpmix_set_error(dltpmix_ctx *ctx, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Timed waits on the monotonic clock (a step of the wall clock moves no bound): a condition
 * variable that times out on it, and the deadline `seconds` (fractions kept) from now. */
void dltpmix_cond_init(pthread_cond_t *cv);
struct timespec dltpmix_deadline(double seconds);

#endif
