/* SPDX-License-Identifier: Apache-2.0 */
/* parse: strict command-line numbers. */
#include "config.h"

#include "trainer/cli/parse.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/status.h"

/* strtod also reads "nan", "inf", "infinity" and hexadecimal floats; only plain decimal numbers
 * are meant here, so anything with a letter other than an exponent is refused before it. */
static int _decimal(const char *v)
{
    const char *p = v;
    int digits = 0;
    while (isspace((unsigned char)*p))
        p++;
    if (*p == '+' || *p == '-')
        p++;
    for (; *p; p++) {
        if (isdigit((unsigned char)*p))
            digits++;
        else if (*p == 'e' || *p == 'E') {
            if (!digits)
                return 0;
            if (p[1] == '+' || p[1] == '-')
                p++;
            if (!isdigit((unsigned char)p[1]))
                return 0;
        } else if (*p != '.')
            return 0;
    }
    return digits > 0;
}

int dlt_parse_real(const char *opt, const char *v, double lo, double hi, double *out, dlt_err *err)
{
    char *end;
    double d;
    if (!v || !*v)
        return dlt_fail(err, -EINVAL, "%s '': expected a number in [%.10g, %.10g]", opt, lo, hi);
    /* strtod skips leading blanks but not trailing ones: refuse both alike. */
    if (isspace((unsigned char)*v))
        return dlt_fail(err, -EINVAL, "%s '%s': not a decimal number (expected a number in [%.10g, %.10g])", opt, v, lo,
                        hi);
    errno = 0;
    d = strtod(v, &end);
    if (end != v && !*end && !isfinite(d))
        return dlt_fail(err, -EINVAL, "%s %s: not a finite number (expected a number in [%.10g, %.10g])", opt, v, lo,
                        hi);
    if (end == v || *end || !_decimal(v))
        return dlt_fail(err, -EINVAL, "%s %s: not a decimal number (expected a number in [%.10g, %.10g])", opt, v, lo,
                        hi);
    if (errno == ERANGE || d < lo || d > hi) /* ERANGE: beyond what a double holds, even as an underflow */
        return dlt_fail(err, -EINVAL, "%s %s: out of range (expected a number in [%.10g, %.10g])", opt, v, lo, hi);
    *out = d;
    return 0;
}

int dlt_parse_whole(const char *opt, const char *v, int64_t lo, int64_t hi, int64_t *out, dlt_err *err)
{
    const char *p = v;
    char *end;
    long long n;
    if (!v || !*v)
        return dlt_fail(err, -EINVAL, "%s '': expected a whole number in [%" PRId64 ", %" PRId64 "]", opt, lo, hi);
    /* Decimal digits and nothing else (a minus sign aside, so that -1 is "out of range"): strtoll
     * alone would take leading blanks and a plus sign, and exponents or "7.0" are not counts. */
    if (*p == '-')
        p++;
    for (; isdigit((unsigned char)*p); p++)
        ;
    if (*p || p == v || (p == v + 1 && *v == '-')) {
        const char *q = strpbrk(v, " \t\n\v\f\r") ? "'" : ""; /* quoted when blanks would not show */
        return dlt_fail(err, -EINVAL,
                        "%s %s%s%s: not a whole number (expected decimal digits only, in [%" PRId64 ", %" PRId64 "])",
                        opt, q, v, q, lo, hi);
    }
    errno = 0;
    n = strtoll(v, &end, 10);
    if (errno == ERANGE || n < lo || n > hi)
        return dlt_fail(err, -EINVAL, "%s %s: out of range (expected a whole number in [%" PRId64 ", %" PRId64 "])",
                        opt, v, lo, hi);
    *out = (int64_t)n;
    return 0;
}
