/* status: filling a caller's error buffer and returning a status in one expression. */
#ifndef DLT_STATUS_H
#define DLT_STATUS_H

#include <stddef.h>

/* Formats the message into err (when given) and returns code. */
int dlt_fail(char *err, size_t errlen, int code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

#endif
