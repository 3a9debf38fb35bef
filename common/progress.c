/* SPDX-License-Identifier: Apache-2.0 */
/* progress: the rate is the mean since the start, which is what the time left rests on. */
#include "config.h"

#include "common/progress.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/tunables.h"

static void _hms(char *buf, size_t len, double s)
{
    long t = s < 0 ? 0 : s > 3.6e8 ? 360000000L : (long)(s + 0.5);
    snprintf(buf, len, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
}

void dlt_progress_format(char *buf, size_t len, const char *what, const char *unit, int64_t done, int64_t total,
                         double seconds, int finished)
{
    double rate = seconds > 0 ? (double)done / seconds : 0;
    char t[32];
    if (total > 0 && !finished) {
        _hms(t, sizeof(t), rate > 0 ? (double)(total - done) / rate : 0);
        snprintf(buf, len, "dltrain: %s %lld/%lld %s (%.1f%%), %.1f %s/s, %s left", what, (long long)done,
                 (long long)total, unit, 100.0 * (double)done / (double)total, rate, unit, rate > 0 ? t : "?");
    } else if (total > 0) {
        _hms(t, sizeof(t), seconds);
        snprintf(buf, len, "dltrain: %s %lld/%lld %s (%.1f%%), %.1f %s/s, %s elapsed", what, (long long)done,
                 (long long)total, unit, 100.0 * (double)done / (double)total, rate, unit, t);
    } else {
        _hms(t, sizeof(t), seconds);
        snprintf(buf, len, "dltrain: %s %lld %s, %.1f %s/s, %s elapsed", what, (long long)done, unit, rate, unit, t);
    }
}

void dlt_progress_start(dlt_progress *p, FILE *out, int quiet, const char *what, const char *unit, int64_t total)
{
    const char *env = getenv("DLT_PROGRESS_SECONDS");
    char *end;
    double every = DLT_PROGRESS_LINES_S;
    memset(p, 0, sizeof(*p));
    p->out = out;
    snprintf(p->what, sizeof(p->what), "%s", what);
    snprintf(p->unit, sizeof(p->unit), "%s", unit);
    p->total = total;
    p->t0 = p->last = dlt_now();
    if (env && *env) {
        double v = strtod(env, &end);
        if (*end || !(v >= 0.01 && v <= 86400))
            fprintf(out, "dltrain: DLT_PROGRESS_SECONDS=%s is not a number of seconds in [0.01, 86400]: using %g\n",
                    env, every);
        else
            every = v;
    }
    p->mode = quiet ? DLT_PROGRESS_OFF : isatty(fileno(out)) ? DLT_PROGRESS_TTY : DLT_PROGRESS_LINES;
    p->every_plain = every;
    p->every = p->mode == DLT_PROGRESS_TTY ? DLT_PROGRESS_TTY_S : every;
}

void dlt_progress_plain(dlt_progress *p)
{
    if (p->mode == DLT_PROGRESS_TTY) {
        p->mode = DLT_PROGRESS_LINES;
        p->every = p->every_plain;
    }
}

static void _print(dlt_progress *p, int64_t done, double now, int finished)
{
    char line[512];
    dlt_progress_format(line, sizeof(line), p->what, p->unit, done, p->total, now - p->t0, finished);
    if (p->mode == DLT_PROGRESS_TTY) /* back to the line's start, the line, clear what the old one left */
        fprintf(p->out, "\r%s\033[K%s", line, finished ? "\n" : "");
    else
        fprintf(p->out, "%s\n", line);
    fflush(p->out);
    p->showing = p->mode == DLT_PROGRESS_TTY && !finished;
    p->last = now;
    p->lines++;
}

void dlt_progress_update(dlt_progress *p, int64_t done)
{
    double now;
    if (p->mode == DLT_PROGRESS_OFF)
        return;
    now = dlt_now();
    if (now - p->last >= p->every)
        _print(p, done, now, 0);
}

void dlt_progress_clear(dlt_progress *p)
{
    if (p->showing) {
        fputs("\r\033[K", p->out);
        p->showing = 0;
    }
}

void dlt_progress_end(dlt_progress *p, int64_t done)
{
    if (p->mode == DLT_PROGRESS_TTY || (p->mode == DLT_PROGRESS_LINES && p->lines > 0))
        _print(p, done, dlt_now(), 1);
    p->mode = DLT_PROGRESS_OFF;
}
