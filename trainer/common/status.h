/* SPDX-License-Identifier: Apache-2.0 */
/* status: the trainer's one error channel: a caller's error buffer filled (or given context) and a
 * status returned in one expression; the command prints the buffer once. */
#ifndef DLT_STATUS_H
#define DLT_STATUS_H

#include <stddef.h>

/* Formats the message into err (when given) and returns code. */
int dlt_fail(char *err, size_t errlen, int code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Puts "CONTEXT: " before the message already in err and returns code: an error travelling up
 * through one buffer gathers what each level was doing. */
int dlt_fail_prefix(char *err, size_t errlen, int code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

#endif
