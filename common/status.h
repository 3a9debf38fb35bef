/* SPDX-License-Identifier: Apache-2.0 */
/* status: the one error type of the plugin's internals, libdltpmix's internals and the trainer.
 *
 * A failing call returns a nonzero status and records its words in the caller's dlt_err (passed
 * by pointer down the call chain; objects that report errors later, the communicator and the
 * backend, hold the pointer they were given at creation). The FIRST failure recorded wins by
 * construction: a later one (an abort while unwinding, a second symptom of one cause) never
 * replaces it, as NCCL's NCCLCHECKIGNORE keeps the first result. Each level the failure travels
 * through may put its context before the words (dlt_fail_prefix) until a later failure was
 * attempted, so a cleanup's context never decorates the first failure. The command prints msg
 * once. Whether the failure is already known to every rank (agreed) is part of the error, not a
 * flag beside it. */
#ifndef DLT_STATUS_H
#define DLT_STATUS_H

#include <stddef.h>
#include <stdio.h>

typedef struct dlt_err {
    int code;         /* the first failure's status; 0: none yet */
    int agreed;       /* every rank took this failure's decision together: nobody needs telling */
    int later;        /* a later failure was attempted (and ignored): context no longer added */
    const char *file; /* where the first failure was recorded (source file and line) */
    int line;
    char msg[2048]; /* its words */
} dlt_err;

#define DLT_ERR_INIT                                                                                                   \
    {                                                                                                                  \
        0                                                                                                              \
    }

/* Records a failure: kept, with fmt's words, when it is the first (code 0 records nothing).
 * Returns code. e may be NULL (the caller wants the status only). */
int dlt_fail_at(dlt_err *e, const char *file, int line, int code, int agreed, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
#define dlt_fail(e, code, ...) dlt_fail_at((e), __FILE__, __LINE__, (code), 0, __VA_ARGS__)

/* Puts "CONTEXT: " before the kept failure's words (code: the status the callee returned) while
 * that failure is the one travelling up (no later failure attempted); fmt NULL adds no context. A callee
 * that returned code without words gets "CONTEXT: " + the status's strerror. Returns code. */
int dlt_fail_prefix_at(dlt_err *e, const char *file, int line, int code, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
#define dlt_fail_prefix(e, code, ...) dlt_fail_prefix_at((e), __FILE__, __LINE__, (code), __VA_ARGS__)

/* Adds " WORDS" after the kept failure's words, under dlt_fail_prefix's rule (a layer's name after
 * the backend's words). Returns code. */
int dlt_fail_suffix(dlt_err *e, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Records another error's failure (a deferred one: the batch read ahead) as this one's, when it is
 * the first; returns from->code. */
int dlt_fail_take(dlt_err *e, const dlt_err *from);

/* Forgets the failure (a failure handled where it happened: a fallback taken, a retry). */
void dlt_err_clear(dlt_err *e);
/* e cleared, for a call whose failure is judged on its own (tests, one-shot probes). */
static inline dlt_err *dlt_err_fresh(dlt_err *e)
{
    dlt_err_clear(e);
    return e;
}
/* Records a failure that every rank meets at the same point from the same inputs (an agreed
 * result, the gathered records of an agreement): when it is the first, it is marked agreed, so the
 * run ends on it without ending the other ranks. Returns code. */
#define dlt_fail_agreed(e, code, ...) dlt_fail_at((e), __FILE__, __LINE__, (code), 1, __VA_ARGS__)

/* The kept failure is now known to every rank (an agreement on failures was made). */
static inline int dlt_err_agree(dlt_err *e, int code)
{
    if (e)
        e->agreed = 1;
    return code;
}

/* The message one rank says about itself, "dltrain: rank R: WORDS" and a newline, in one write (the
 * ranks share the step's output), on stderr or on to. */
void dlt_rank_say(int rank, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void dlt_rank_say_to(FILE *to, int rank, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The checked call, one family for every call that returns 0 or a failure status with its words in
 * e: the project's own functions, and a library's call through that library's check, which turns
 * the library's result into such a status with file:line, the call and the library's own error
 * string (DLT_CUDA_CHECK, DLT_CUDNN_CHECK, DLT_CUBLAS_CHECK in common/cuda_check.h, DLT_NCCL_CHECK
 * in trainer/comm/nccl_call.h, DLT_DNNL_CHECK in the CPU backend, libdltpmix's own). A callee that
 * returned a status without words gets its strerror.
 *
 * DLT_TRY: on failure the calling function returns the status. */
#define DLT_TRY(e, call)                                                                                               \
    do {                                                                                                               \
        int dlt_try_rc_ = (call);                                                                                      \
        if (dlt_try_rc_ != 0)                                                                                          \
            return dlt_fail_prefix_at((e), __FILE__, __LINE__, dlt_try_rc_, NULL);                                     \
    } while (0)

/* DLT_TRY_GOTO, one way out (NCCLCHECKGOTO): rc = call; on failure the callee's words get the
 * context fmt (NULL: none) and control goes to label, where the function cleans up once. */
#define DLT_TRY_GOTO(e, rc, call, label, ...)                                                                          \
    do {                                                                                                               \
        if (((rc) = (call)) != 0) {                                                                                    \
            dlt_fail_prefix_at((e), __FILE__, __LINE__, (rc), __VA_ARGS__);                                            \
            goto label;                                                                                                \
        }                                                                                                              \
    } while (0)

#endif
