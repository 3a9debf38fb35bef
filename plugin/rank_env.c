/* SPDX-License-Identifier: Apache-2.0 */
/* rank_env: pure rules of the rank contract (the host of rank 0, the port). */
#include "config.h"

#include "rank_env.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int dlt_rank_port(const char *resv, uint32_t job, uint32_t step, int *port, int *reserved)
{
    if (resv && *resv) {
        char *e;
        long v;
        errno = 0;
        v = strtol(resv, &e, 10);
        if (errno || e == resv || v < 1 || v > 65535 || (*e && *e != '-' && *e != ','))
            return -EINVAL;
        *port = (int)v;
        *reserved = 1;
        return 0;
    }
    *port = dlt_rank_port_derived(job, step);
    *reserved = 0;
    return 0;
}

/* splitmix64's finaliser: every bit of the job id moves every bit of the result, so consecutive
 * job ids land at unrelated offsets of the span (a linear rule such as job * 16 + step makes job J
 * step s + 16 and job J + 1 step s the same port). */
static uint64_t _mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

int dlt_rank_port_derived(uint32_t job, uint32_t step)
{
    /* The job picks a pseudo-random start in the span and its steps follow it, so the steps of one
     * job never meet each other (up to DLT_PORT_SPAN of them) and two jobs meet only by chance. */
    uint64_t start = _mix64((uint64_t)job + 0x9e3779b97f4a7c15ull) % DLT_PORT_SPAN;
    return DLT_PORT_BASE + (int)((start + step % DLT_PORT_SPAN) % DLT_PORT_SPAN);
}

uint64_t dlt_env_value_hash(const char *value)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char *p = (const unsigned char *)value; *p; p++) {
        h ^= *p;
        h *= 0x100000001b3ull;
    }
    return h;
}

static int _env_name_ok(const char *name, size_t n)
{
    if (n == 0 || n >= 64)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)name[i]) && name[i] != '_')
            return 0;
    return 1;
}

int dlt_env_record_add(char *rec, size_t len, const char *name, const char *value)
{
    size_t used = strnlen(rec, len);
    int n;
    if (!name || !value || !_env_name_ok(name, strlen(name)))
        return -EINVAL;
    if (used >= len)
        return -ENOSPC;
    n = snprintf(rec + used, len - used, "%s%s:%016llx", used ? "," : "", name,
                 (unsigned long long)dlt_env_value_hash(value));
    if (n < 0 || (size_t)n >= len - used) {
        rec[used] = '\0';
        return -ENOSPC;
    }
    return 0;
}

int dlt_env_record_next(const char **cursor, char *name, size_t namelen, uint64_t *hash)
{
    const char *p = *cursor, *colon, *end;
    char *e;
    unsigned long long h;
    if (!p || !*p)
        return 0;
    end = strchr(p, ',');
    if (!end)
        end = p + strlen(p);
    colon = memchr(p, ':', (size_t)(end - p));
    if (!colon || !_env_name_ok(p, (size_t)(colon - p)) || (size_t)(colon - p) >= namelen || end - colon != 17)
        return -EINVAL;
    errno = 0;
    h = strtoull(colon + 1, &e, 16);
    if (errno || e != end || !isxdigit((unsigned char)colon[1]))
        return -EINVAL;
    memcpy(name, p, (size_t)(colon - p));
    name[colon - p] = '\0';
    *hash = (uint64_t)h;
    *cursor = *end ? end + 1 : end;
    return 1;
}
