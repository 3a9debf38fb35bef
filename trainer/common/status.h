/* SPDX-License-Identifier: Apache-2.0 */
/* status: the trainer's errors. A failing call returns a nonzero status and leaves its message in
 * its sink (a caller's buffer: dlt_fail, dlt_fail_prefix). A sequence of calls (the run) keeps its
 * FIRST failure in a dlt_status: code and message, with the context of the level that met it; a
 * later failure (cleanup after the first, a second symptom of one cause) is ignored, as NCCL's
 * NCCLCHECKIGNORE keeps the first result. The command prints the kept message once. */
#ifndef DLT_STATUS_H
#define DLT_STATUS_H

#include <stddef.h>

/* Formats the message into err (when given) and returns code. */
int dlt_fail(char *err, size_t errlen, int code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Puts "CONTEXT: " before the message already in err and returns code: an error travelling up
 * through one buffer gathers what each level was doing. */
int dlt_fail_prefix(char *err, size_t errlen, int code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

typedef struct {
    int code;       /* the first failure's status; 0: none yet */
    char msg[2048]; /* its message */
} dlt_status;

/* Records a failure of this level: kept when it is the first. Returns the kept status. */
int dlt_status_fail(dlt_status *st, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Records a callee's failure whose message it left in said (its sink, which may be a buffer other
 * layers write too): kept as "CONTEXT: said" (fmt NULL: said alone) when it is the first. Returns
 * the kept status. */
int dlt_status_take(dlt_status *st, int code, const char *said, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Every call checked, one way out (NCCLCHECKGOTO): rc = call; on failure the failure is recorded
 * in st (the callee's message taken from said with the context fmt) and control goes to label,
 * where the function cleans up once and returns. */
#define DLT_TRY_GOTO(st, rc, call, said, label, ...)                                                                 \
    do {                                                                                                         \
        if (((rc) = (call)) != 0) {                                                                              \
            dlt_status_take((st), (rc), (said), __VA_ARGS__);                                                    \
            goto label;                                                                                          \
        }                                                                                                        \
    } while (0)

#endif
