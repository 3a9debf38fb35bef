/* SPDX-License-Identifier: Apache-2.0 */
/* hostlist: Slurm's host-list grammar (src/common/hostlist.c, one-dimensional clusters), expanded
 * into host names in the order `scontrol show hostnames` prints them, release by release. */
#ifndef DLT_HOSTLIST_H
#define DLT_HOSTLIST_H

#include <stddef.h>

/* Slurm releases as slurm_version.h numbers them ((major << 16) + (minor << 8) + micro). The
 * grammar changed twice: 23.02.0 refuses a '[' without its ']' (22.05 and before make "n[1-2" the
 * host "n]"), and 23.02.5 takes text after the last bracket ("gpu[1-2]-ib": gpu1-ib gpu2-ib; before,
 * an invalid list). 0 means the newest grammar. */
#define DLT_SLURM_VERSION(a, b, c) (((a) << 16) + ((b) << 8) + (c))
#define DLT_HOSTLIST_STRICT_BRACKET DLT_SLURM_VERSION(23, 2, 0)
#define DLT_HOSTLIST_SUFFIX DLT_SLURM_VERSION(23, 2, 5)

/* One place where this parser does not follow Slurm: numbers at or past 2^64 - 1 (20 digits and
 * more). Slurm's arithmetic wraps there (a name "n" + 23 nines prints as n00018446744073709551615,
 * a range ending at 2^64 - 1 prints nothing); here such a name stays as written and such a range
 * holds its hosts. No node is named so; the comparison with scontrol leaves them out. */

/* Slurm's own bounds: hosts in one bracket range, and values of the bracket groups before the last
 * one in one entry. This parser adds one: the ranges a list may hold (Slurm has none; an entry such
 * as "a[0-65535]b[0-65535]" is 65536 ranges). */
#define DLT_HOSTLIST_MAX_RANGE (64 * 1024)
#define DLT_HOSTLIST_MAX_PREFIX_CNT (64 * 1024)
#define DLT_HOSTLIST_MAX_RANGES (1024 * 1024)
/* Bracket values expanded in all, over every nesting level: bounds the work of one list. */
#define DLT_HOSTLIST_MAX_EXPANSIONS (2 * 1024 * 1024)

typedef struct dlt_hostlist dlt_hostlist;

/* Parses list under the grammar of Slurm release slurm_version (0: the newest). 0 and *out set (an
 * empty list or NULL gives zero hosts, as in Slurm); -EINVAL for a list Slurm refuses, with the
 * reason (and the offending entry, escaped) in why; -E2BIG past DLT_HOSTLIST_MAX_RANGES; -ENOMEM. */
int dlt_hostlist_parse(const char *list, unsigned slurm_version, dlt_hostlist **out, char *why, size_t whylen);

/* Hosts in the list (duplicates counted, as Slurm keeps them). */
size_t dlt_hostlist_count(const dlt_hostlist *hl);

/* The n-th host (from 0) into out. 0, -ENOENT past the end, or -ENOSPC (out then ""). */
int dlt_hostlist_nth(const dlt_hostlist *hl, size_t n, char *out, size_t outlen);

void dlt_hostlist_free(dlt_hostlist *hl);

/* The first host of list, or -EINVAL for an invalid or empty list, -ENOSPC, -ENOMEM. */
int dlt_hostlist_first(const char *list, unsigned slurm_version, char *out, size_t outlen);

#endif
