/* SPDX-License-Identifier: Apache-2.0 */
/* parse: command-line numbers, strictly: the whole argument must be a finite number inside the
 * option's range (a whole number where the option counts something), or the error names the
 * option, the value and the range. NaN, infinities, blanks, trailing text and empty strings are
 * refused. */
#ifndef DLT_CLI_PARSE_H
#define DLT_CLI_PARSE_H

#include "common/status.h"
#include <stddef.h>
#include <stdint.h>

/* A finite real number in [lo, hi]: decimal, optionally with an exponent; no blanks on either
 * side. Returns 0, or -EINVAL with err filled. */
int dlt_parse_real(const char *opt, const char *v, double lo, double hi, double *out, dlt_err *err);

/* A whole number in [lo, hi]: decimal digits only (no blanks, sign, point or exponent; "-N" is
 * read so that it is reported out of range). A value beyond 64 bits is "out of range" too.
 * Returns 0, or -EINVAL with err filled. */
int dlt_parse_whole(const char *opt, const char *v, int64_t lo, int64_t hi, int64_t *out, dlt_err *err);

#endif
