/* SPDX-License-Identifier: Apache-2.0 */
/* progress: how far a long command is (done of total, rate, time left), as rsync --info=progress2
 * and pv show it: one line rewritten in place on a terminal, a plain line now and then otherwise
 * (a Slurm output file keeps every line), nothing when quiet. */
#ifndef DLT_PROGRESS_H
#define DLT_PROGRESS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum { DLT_PROGRESS_OFF = 0, DLT_PROGRESS_TTY, DLT_PROGRESS_LINES } dlt_progress_mode;

typedef struct {
    FILE *out;
    dlt_progress_mode mode;
    char what[64], unit[32]; /* "packing", "images" */
    int64_t total;           /* <= 0: unknown (no percentage, no time left) */
    double t0, last, every;  /* start, last line, seconds between lines */
    double every_plain;      /* seconds between plain lines */
    int showing;             /* a terminal line is on screen without its newline */
    int lines;               /* lines printed */
} dlt_progress;

/* Terminal: a line every DLT_PROGRESS_TTY_S seconds. Else one every DLT_PROGRESS_SECONDS (the
 * environment variable; default DLT_PROGRESS_LINES_S), the first after that long, so a short
 * command prints none. quiet: nothing at all. */
void dlt_progress_start(dlt_progress *p, FILE *out, int quiet, const char *what, const char *unit, int64_t total);
/* Plain lines even on a terminal, for a phase whose end the caller never sees. */
void dlt_progress_plain(dlt_progress *p);
/* done units so far; prints when the interval has passed. */
void dlt_progress_update(dlt_progress *p, int64_t done);
/* Clears the terminal line before another message is printed (the next update redraws it). */
void dlt_progress_clear(dlt_progress *p);
/* The end: on a terminal the line with the final figures and its newline; elsewhere a last plain
 * line when any was printed. */
void dlt_progress_end(dlt_progress *p, int64_t done);

/* The line: "dltrain: WHAT DONE/TOTAL UNIT (P%), R UNIT/s, H:MM:SS left" (", T elapsed" instead of
 * the time left when finished, "DONE UNIT, R UNIT/s, T elapsed" when the total is unknown). */
void dlt_progress_format(char *buf, size_t len, const char *what, const char *unit, int64_t done, int64_t total,
                         double seconds, int finished);

#endif
