/* SPDX-License-Identifier: Apache-2.0 */
/* status: the first failure kept, with its words and where it came from. */
#include "config.h"

#include "common/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void _record(dlt_err *e, const char *file, int line, int code, const char *fmt, va_list ap)
{
    e->code = code;
    e->file = file;
    e->line = line;
    vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
}

/* Whether a failure of code is the first (to be recorded); a later one is noted. */
static int _first(dlt_err *e, int code)
{
    if (!e || code == 0)
        return 0;
    if (e->code != 0) {
        e->later = 1;
        return 0;
    }
    return 1;
}

int dlt_fail_at(dlt_err *e, const char *file, int line, int code, int agreed, const char *fmt, ...)
{
    va_list ap;
    if (!_first(e, code))
        return code;
    va_start(ap, fmt);
    _record(e, file, line, code, fmt, ap);
    va_end(ap);
    if (agreed)
        e->agreed = 1;
    return code;
}

/* The words of a status that came without any. */
static const char *_status_words(int code)
{
    return code < 0 ? strerror(-code) : "failed";
}

static int _context(dlt_err *e, const char *file, int line, int code, const char *fmt, va_list ap)
{
    char ctx[512], old[sizeof(e->msg)];
    size_t n;
    if (!e || code == 0)
        return code;
    if (e->later)
        return code; /* perhaps another failure's way up: the first one's words stay as they are */
    if (fmt)
        vsnprintf(ctx, sizeof(ctx), fmt, ap);
    if (e->code == 0) { /* the callee returned a status without words */
        e->code = code;
        e->file = file;
        e->line = line;
        if (fmt)
            snprintf(e->msg, sizeof(e->msg), "%s: %s", ctx, _status_words(code));
        else
            snprintf(e->msg, sizeof(e->msg), "%s", _status_words(code));
        return code;
    }
    if (!fmt)
        return code;
    /* "CONTEXT: words", the words' end cut where the buffer ends */
    memcpy(old, e->msg, sizeof(old));
    old[sizeof(old) - 1] = 0;
    n = strlen(ctx);
    if (n > sizeof(e->msg) - 3)
        n = sizeof(e->msg) - 3;
    memcpy(e->msg, ctx, n);
    memcpy(e->msg + n, ": ", 2);
    n += 2;
    snprintf(e->msg + n, sizeof(e->msg) - n, "%.*s", (int)(sizeof(e->msg) - n - 1), old);
    return code;
}

int dlt_fail_prefix_at(dlt_err *e, const char *file, int line, int code, const char *fmt, ...)
{
    va_list ap;
    int rc;
    va_start(ap, fmt);
    rc = _context(e, file, line, code, fmt, ap);
    va_end(ap);
    return rc;
}

int dlt_fail_suffix(dlt_err *e, int code, const char *fmt, ...)
{
    size_t used;
    va_list ap;
    if (!e || code == 0 || e->code == 0 || e->later)
        return code;
    used = strlen(e->msg);
    va_start(ap, fmt);
    vsnprintf(e->msg + used, sizeof(e->msg) - used, fmt, ap);
    va_end(ap);
    return code;
}

int dlt_fail_take(dlt_err *e, const dlt_err *from)
{
    if (!e || !from || from->code == 0)
        return from ? from->code : 0;
    if (_first(e, from->code))
        *e = *from;
    return from->code;
}

void dlt_err_clear(dlt_err *e)
{
    if (e)
        memset(e, 0, sizeof(*e));
}

static void _rank_say(FILE *to, int rank, const char *fmt, va_list ap)
{
    char words[8192];
    vsnprintf(words, sizeof(words), fmt, ap);
    fprintf(to, "dltrain: rank %d: %s\n", rank, words);
}

void dlt_rank_say(int rank, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    _rank_say(stderr, rank, fmt, ap);
    va_end(ap);
}

void dlt_rank_say_to(FILE *to, int rank, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    _rank_say(to, rank, fmt, ap);
    va_end(ap);
}
