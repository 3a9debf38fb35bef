/* SPDX-License-Identifier: Apache-2.0 */
/* hostlist: Slurm's host-list grammar, expanded in Slurm's order (see hostlist.h); written from
 * the behaviour of Slurm's src/common/hostlist.c and checked against `scontrol show hostnames`. */
#include "config.h"

#include "hostlist.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One run of hosts: prefix + lo..hi printed with width digits (zero padded), or one literal name. */
struct dlt_host_range {
    char *prefix;
    unsigned long lo, hi;
    int width;
    int single;
};

struct dlt_hostlist {
    struct dlt_host_range *r;
    size_t n, cap;
    size_t hosts;
};

/* A number range of a bracket ("007-010": lo 7, hi 10, width 3). */
struct dlt_num_range {
    unsigned long lo, hi;
    int width;
};

struct dlt_parse {
    dlt_hostlist *hl;
    unsigned version;
    char *why;
    size_t whylen;
    int status;               /* first failure: -ENOMEM or -E2BIG (a refused list is -EINVAL, said where found) */
    unsigned long expansions; /* bracket values expanded so far, over every nesting level */
};

static int _is_sep(char c)
{
    return c == ' ' || c == '\t' || c == ',';
}

/* why = words + the entry, printable ASCII only and bounded (the list may come from a user). */
static int _refuse(struct dlt_parse *ps, const char *words, const char *entry)
{
    char shown[80];
    size_t i;
    for (i = 0; entry && entry[i] && i + 4 < sizeof(shown); i++)
        shown[i] = isprint((unsigned char)entry[i]) ? entry[i] : '?';
    if (entry && entry[i])
        shown[i++] = '~';
    shown[i] = '\0';
    if (ps->why && ps->whylen)
        snprintf(ps->why, ps->whylen, "%s: '%s'", words, shown);
    return -EINVAL;
}

static size_t _range_hosts(const struct dlt_host_range *r)
{
    return r->single ? 1 : (size_t)(r->hi - r->lo) + 1;
}

/* Numbers in two widths are the same run when either width prints both numbers as they were
 * written; the width that changes nothing is taken by the other (Slurm's rule for "n9,n10" or
 * "n[08-09],n10" being one run). 1 and the widths adjusted, or 0. */
static int _zero_pad(unsigned long v, int width)
{
    int digits = 1;
    while (v /= 10)
        digits++;
    return width > digits ? width - digits : 0;
}

static int _width_join(unsigned long n, int *wn, unsigned long m, int *wm)
{
    int n_same, m_same;
    if (*wn == *wm)
        return 1;
    n_same = _zero_pad(n, *wn) == _zero_pad(n, *wm);
    m_same = _zero_pad(m, *wm) == _zero_pad(m, *wn);
    if (!n_same && !m_same)
        return 0;
    if (!n_same)
        *wm = *wn;
    else
        *wn = *wm;
    return 1;
}

/* Appends a run (prefix copied), joined to the last one when it continues it: same prefix, both
 * numbered, consecutive numbers, compatible widths (this is what keeps "n[1-2],n[03-4]" printing
 * n03 and "n9,n10" one run). */
static int _push(struct dlt_parse *ps, const char *prefix, unsigned long lo, unsigned long hi, int width, int single)
{
    dlt_hostlist *hl = ps->hl;
    struct dlt_host_range *tail = hl->n ? &hl->r[hl->n - 1] : NULL;
    struct dlt_host_range add = {NULL, lo, hi, width, single};
    if (tail && !single && !tail->single && lo > 0 && tail->hi == lo - 1 && strcmp(tail->prefix, prefix) == 0 &&
        _width_join(tail->lo, &tail->width, lo, &add.width)) {
        tail->hi = hi;
        hl->hosts += (size_t)(hi - lo) + 1;
        return 0;
    }
    if (hl->n == hl->cap) {
        size_t cap = hl->cap ? hl->cap * 2 : 16;
        struct dlt_host_range *r;
        if (hl->n >= DLT_HOSTLIST_MAX_RANGES) {
            if (ps->why && ps->whylen)
                snprintf(ps->why, ps->whylen, "more than %d ranges of hosts", DLT_HOSTLIST_MAX_RANGES);
            return ps->status = -E2BIG;
        }
        r = realloc(hl->r, cap * sizeof(*r));
        if (!r)
            return ps->status = -ENOMEM;
        hl->r = r;
        hl->cap = cap;
    }
    add.prefix = strdup(prefix);
    if (!add.prefix)
        return ps->status = -ENOMEM;
    hl->r[hl->n++] = add;
    hl->hosts += _range_hosts(&add);
    return 0;
}

/* A name without brackets: its trailing digits are its number ("n012": n, 12, width 3) so that it
 * joins a run; a name without trailing digits, or whose digits exceed an unsigned long, is itself. */
static int _push_host(struct dlt_parse *ps, char *name)
{
    size_t len = strlen(name), d = len;
    unsigned long v;
    char *end, keep;
    int rc;
    while (d > 0 && isdigit((unsigned char)name[d - 1]))
        d--;
    if (d == len)
        return _push(ps, name, 0, 0, 0, 1);
    errno = 0;
    v = strtoul(name + d, &end, 10);
    if (errno == ERANGE || v == ULONG_MAX)
        return _push(ps, name, 0, 0, 0, 1);
    keep = name[d];
    name[d] = '\0';
    rc = _push(ps, name, v, v, (int)(len - d), 0);
    name[d] = keep;
    return rc;
}

/* One comma-separated piece of a bracket: "N" or "N-M" (also "N-", which is N), decimal, at most
 * DLT_HOSTLIST_MAX_RANGE hosts; the width is what was written before the dash. Slurm reads the
 * numbers with strtoul, so the same call keeps its edge cases ("+3" is 3 of width 2). */
static int _parse_one_range(char *s, struct dlt_num_range *out)
{
    char *dash, *hi_s = NULL, *end;
    if (strchr(s, 'x'))
        return -EINVAL; /* a multi-dimensional box ("0x3"), not taken on one-dimensional clusters */
    dash = strchr(s, '-');
    if (dash) {
        *dash = '\0';
        hi_s = dash + 1;
        if (*hi_s == '-')
            return -EINVAL;
    }
    out->width = (int)strlen(s);
    out->lo = strtoul(s, &end, 10);
    if (end == s)
        return -EINVAL;
    if (hi_s && *hi_s) {
        out->hi = strtoul(hi_s, &end, 10);
        if (end == hi_s)
            return -EINVAL;
    } else {
        out->hi = out->lo;
    }
    if (*end != '\0' || out->lo > out->hi || out->hi - out->lo >= DLT_HOSTLIST_MAX_RANGE)
        return -EINVAL;
    return 0;
}

/* The inside of a bracket, "1,3-5,007", into ranges (*out allocated). Count, or a negative status. */
static int _parse_range_list(char *s, struct dlt_num_range **out)
{
    size_t n = 1, i = 0;
    struct dlt_num_range *r;
    for (const char *c = s; *c; c++)
        n += *c == ',';
    r = calloc(n, sizeof(*r));
    if (!r)
        return -ENOMEM;
    while (s) {
        char *comma = strchr(s, ',');
        if (comma)
            *comma++ = '\0';
        if (_parse_one_range(s, &r[i++]) != 0) {
            free(r);
            return -EINVAL;
        }
        s = comma;
    }
    *out = r;
    return (int)i;
}

/* The hosts of prefix (which may hold earlier bracket groups) followed by each number of ranges
 * and then suffix. The rightmost group of the prefix varies slowest: Slurm expands the prefix's
 * groups from the right, so "n[1-2]x[3-4]z[5-6]" gives n1x3z5 n1x3z6 n2x3z5 n2x3z6 n1x4z5 ...
 * A failure inside a nested group is not the caller's (Slurm keeps the hosts made so far and the
 * list valid); only the outermost level's failures refuse the list. */
static int _push_ranges(struct dlt_parse *ps, char *prefix, const char *suffix, const struct dlt_num_range *ranges,
                        int n)
{
    char *open = strrchr(prefix, '['), *close = open ? strrchr(open, ']') : NULL;
    struct dlt_num_range *groups = NULL;
    unsigned long values = 0;
    int ng;
    if (!open || !close) {
        for (int k = 0; k < n; k++) {
            if (!suffix) {
                if (_push(ps, prefix, ranges[k].lo, ranges[k].hi, ranges[k].width, 0) != 0)
                    return ps->status;
                continue;
            }
            /* With a suffix each host is a name of its own (Slurm never joins them into runs). */
            for (unsigned long v = ranges[k].lo;; v++) {
                char name[1024];
                int len = snprintf(name, sizeof(name), "%s%0*lu%s", prefix, ranges[k].width, v, suffix);
                if (len < 0 || (size_t)len >= sizeof(name))
                    return ps->status = _refuse(ps, "host name longer than 1023 characters", prefix);
                if (_push(ps, name, 0, 0, 0, 1) != 0)
                    return ps->status;
                if (v == ranges[k].hi)
                    break;
            }
        }
        return 0;
    }
    *open = '\0';
    *close = '\0';
    ng = _parse_range_list(open + 1, &groups);
    if (ng < 0)
        return ng == -ENOMEM ? (ps->status = -ENOMEM) : -EINVAL;
    for (int g = 0; g < ng; g++) {
        values += groups[g].hi - groups[g].lo + 1;
        if (values > DLT_HOSTLIST_MAX_PREFIX_CNT) {
            free(groups);
            return -EINVAL;
        }
        for (unsigned long v = groups[g].lo;; v++) {
            size_t len = strlen(prefix) + strlen(close + 1) + (size_t)groups[g].width + 24;
            /* Nested groups multiply ([0-999][0-999][0-999]...), and a nested refusal is swallowed
             * without a range pushed, so the ranges' bound alone does not stop the work. */
            if (++ps->expansions > DLT_HOSTLIST_MAX_EXPANSIONS) {
                free(groups);
                if (ps->why && ps->whylen)
                    snprintf(ps->why, ps->whylen, "more than %d bracket values to expand (nested brackets multiply)",
                             DLT_HOSTLIST_MAX_EXPANSIONS);
                return ps->status = -E2BIG;
            }
            char *next = malloc(len);
            int r;
            if (!next) {
                free(groups);
                return ps->status = -ENOMEM;
            }
            snprintf(next, len, "%s%0*lu%s", prefix, groups[g].width, v, close + 1);
            r = _push_ranges(ps, next, suffix, ranges, n);
            free(next);
            if (ps->status) {
                free(groups);
                return ps->status;
            }
            (void)r; /* a nested group's refusal is swallowed, as in Slurm (see above) */
            if (v == groups[g].hi)
                break;
        }
    }
    free(groups);
    return 0;
}

/* The next entry of the list at *cursor, terminated in place: entries are separated by commas,
 * spaces or tabs, except where a separator sits inside a bracket pair ("n[1,3]" is one entry). */
static char *_next_entry(char **cursor)
{
    char *s = *cursor, *tok, *scan;
    while (*s && _is_sep(*s))
        s++;
    if (!*s) {
        *cursor = s;
        return NULL;
    }
    tok = scan = s;
    for (;;) {
        char *open, *close;
        while (*s && !_is_sep(*s))
            s++;
        for (;;) {
            open = strchr(scan, '[');
            close = open ? strchr(scan, ']') : NULL;
            if (!open || open > s || !close || close < open)
                goto done;
            if (close >= s)
                break;
            scan = close + 1;
        }
        s = close;
    }
done:
    while (*s && _is_sep(*s))
        *s++ = '\0';
    *cursor = s;
    return tok;
}

static int _parse_entry(struct dlt_parse *ps, char *tok)
{
    char *open = strrchr(tok, '['), *close, *suffix = NULL;
    struct dlt_num_range *ranges = NULL;
    char entry[80];
    int n, rc;
    if (!open)
        return _push_host(ps, tok);
    snprintf(entry, sizeof(entry), "%s", tok);
    *open++ = '\0';
    close = strchr(open, ']');
    if (!close) {
        char *name;
        if (ps->version >= DLT_HOSTLIST_STRICT_BRACKET)
            return _refuse(ps, "'[' without ']'", entry);
        if (!*tok)
            return _push_host(ps, open);
        /* Slurm before 23.02 closes the entry's prefix: "n[1-2" is the host "n]". */
        name = malloc(strlen(tok) + 2);
        if (!name)
            return ps->status = -ENOMEM;
        snprintf(name, strlen(tok) + 2, "%s]", tok);
        rc = _push_host(ps, name);
        free(name);
        return rc;
    }
    if (close[1] != '\0' && close[1] != ',') {
        if (ps->version < DLT_HOSTLIST_SUFFIX)
            return _refuse(ps, "text after the last ']' (taken from Slurm 23.02.5 on)", entry);
        suffix = close + 1;
    }
    *close = '\0';
    n = _parse_range_list(open, &ranges);
    if (n < 0)
        return n == -ENOMEM ? (ps->status = -ENOMEM)
                            : _refuse(ps,
                                      "a bracket holds something other than ranges N or N-M (decimal, N <= M, at most "
                                      "65536 hosts each)",
                                      entry);
    rc = _push_ranges(ps, tok, suffix, ranges, n);
    free(ranges);
    if (rc == -EINVAL && !ps->status)
        return _refuse(ps,
                       "a bracket holds something other than ranges N or N-M (decimal, N <= M, at most 65536 hosts "
                       "each, 65536 values for a group before the last)",
                       entry);
    return rc;
}

void dlt_hostlist_free(dlt_hostlist *hl)
{
    if (!hl)
        return;
    for (size_t i = 0; i < hl->n; i++)
        free(hl->r[i].prefix);
    free(hl->r);
    free(hl);
}

int dlt_hostlist_parse(const char *list, unsigned slurm_version, dlt_hostlist **out, char *why, size_t whylen)
{
    struct dlt_parse ps = {NULL, slurm_version ? slurm_version : UINT_MAX, why, whylen, 0, 0};
    char *copy = NULL, *cursor, *tok;
    int rc = 0;
    *out = NULL;
    if (why && whylen)
        why[0] = '\0';
    ps.hl = calloc(1, sizeof(*ps.hl));
    if (!ps.hl || (list && !(copy = strdup(list)))) {
        free(ps.hl);
        return -ENOMEM;
    }
    cursor = copy;
    while (cursor && (tok = _next_entry(&cursor)) != NULL) {
        rc = _parse_entry(&ps, tok);
        if (rc == 0 && ps.status)
            rc = ps.status;
        if (rc != 0)
            break;
    }
    free(copy);
    if (rc != 0) {
        if (rc == -ENOMEM && why && whylen)
            snprintf(why, whylen, "out of memory");
        dlt_hostlist_free(ps.hl);
        return rc;
    }
    *out = ps.hl;
    return 0;
}

size_t dlt_hostlist_count(const dlt_hostlist *hl)
{
    return hl ? hl->hosts : 0;
}

int dlt_hostlist_nth(const dlt_hostlist *hl, size_t n, char *out, size_t outlen)
{
    int len;
    if (!hl || !outlen)
        return -EINVAL;
    out[0] = '\0';
    for (size_t i = 0; i < hl->n; i++) {
        const struct dlt_host_range *r = &hl->r[i];
        size_t c = _range_hosts(r);
        if (n >= c) {
            n -= c;
            continue;
        }
        len = r->single ? snprintf(out, outlen, "%s", r->prefix)
                        : snprintf(out, outlen, "%s%0*lu", r->prefix, r->width, r->lo + (unsigned long)n);
        if (len < 0 || (size_t)len >= outlen) {
            out[0] = '\0';
            return -ENOSPC;
        }
        return 0;
    }
    return -ENOENT;
}

int dlt_hostlist_first(const char *list, unsigned slurm_version, char *out, size_t outlen)
{
    dlt_hostlist *hl;
    int rc;
    if (!list || !out || !outlen)
        return -EINVAL;
    rc = dlt_hostlist_parse(list, slurm_version, &hl, NULL, 0);
    if (rc != 0)
        return rc;
    rc = dlt_hostlist_nth(hl, 0, out, outlen);
    dlt_hostlist_free(hl);
    return rc == -ENOENT ? -EINVAL : rc;
}
