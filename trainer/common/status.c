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

int dlt_status_fail(dlt_status *st, int code, const char *fmt, ...)
{
    va_list ap;
    if (st->code != 0 || code == 0)
        return st->code;
    st->code = code;
    va_start(ap, fmt);
    vsnprintf(st->msg, sizeof(st->msg), fmt, ap);
    va_end(ap);
    return code;
}

int dlt_status_take(dlt_status *st, int code, const char *said, const char *fmt, ...)
{
    char ctx[512], text[sizeof(st->msg)];
    va_list ap;
    if (st->code != 0 || code == 0)
        return st->code;
    snprintf(text, sizeof(text), "%s", said ? said : ""); /* said may be st->msg itself */
    st->code = code;
    if (!fmt) {
        snprintf(st->msg, sizeof(st->msg), "%s", text);
        return code;
    }
    va_start(ap, fmt);
    vsnprintf(ctx, sizeof(ctx), fmt, ap);
    va_end(ap);
    dlt_fail(st->msg, sizeof(st->msg), code, "%s: %s", ctx, text); /* cut at the buffer's end */
    return code;
}
