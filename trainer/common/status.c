/* SPDX-License-Identifier: Apache-2.0 */
/* status: filling a caller's error buffer and returning a status in one expression. */
#include "config.h"

#include "trainer/common/status.h"

#include <stdarg.h>
#include <stdio.h>

int dlt_fail(char *err, size_t errlen, int code, const char *fmt, ...)
{
    va_list ap;
    if (err && errlen) {
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

int dlt_fail_prefix(char *err, size_t errlen, int code, const char *fmt, ...)
{
    char prefix[512], old[2048];
    va_list ap;
    if (!err || !errlen)
        return code;
    snprintf(old, sizeof(old), "%s", err);
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof(prefix), fmt, ap);
    va_end(ap);
    snprintf(err, errlen, "%s: %s", prefix, old);
    return code;
}
