/* SPDX-License-Identifier: Apache-2.0 */
/* agree: the one owner of "every rank reaches the same decision". Each agreement is one all-gather
 * of a small record per rank, after which every rank decides from the same bytes: did anyone fail,
 * who, and why; is a value the same everywhere, and if not which ranks differ; how many ranks say
 * yes. It runs over the communicator (dlt_agreement_of_comm) or, before there is one, over PMIx
 * (dlt_agreement_of_pmix). Every rank must call the same agreements in the same order. */
#ifndef DLT_AGREE_H
#define DLT_AGREE_H

#include <stddef.h>

#include "common/status.h"
#include "pmix/dltpmix.h"
#include "trainer/comm/comm.h"

typedef struct {
    int rank, size;
    /* mine (bytes) from every rank into all (size * bytes), in rank order */
    int (*gather)(void *arg, const void *mine, size_t bytes, void *all, dlt_err *err);
    /* root's bytes of buf to every rank */
    int (*share)(void *arg, void *buf, size_t bytes, int root, dlt_err *err);
    /* ends every rank now, for a rank that cannot take part (out of memory for the records): the
     * others would wait for it; NULL: none (over PMIx the fence's timeout ends the wait) */
    void (*abort)(void *arg);
    void *arg;
} dlt_agreement;

dlt_agreement dlt_agreement_of_comm(dlt_comm *c);
/* Over PMIx (agree_pmix.c, in the dltrain program only). */
dlt_agreement dlt_agreement_of_pmix(dltpmix_ctx *px);

/* Every rank's record (bytes) gathered into *all (size * bytes, the caller frees it). */
int dlt_agree_gather(const dlt_agreement *a, const void *mine, size_t bytes, void **all, dlt_err *err);
/* The same into the caller's all (size * bytes): for records too large for an agreement to allocate
 * unannounced, allocated first and agreed on (dlt_agree_first_failure) so that a rank without the
 * memory stops every rank instead of leaving them in the gather. */
int dlt_agree_gather_into(const dlt_agreement *a, const void *mine, size_t bytes, void *all, dlt_err *err);

/* How many ranks pass flag != 0 (*count, the same on every rank). */
int dlt_agree_count(const dlt_agreement *a, int flag, int *count, dlt_err *err);

/* Did anyone fail, who, and why. */
typedef struct {
    int failed;      /* how many ranks failed */
    int first;       /* the lowest failing rank (-1: none) */
    int first_code;  /* its status */
    int alike;       /* every failing rank failed with the same words */
    char ranks[160]; /* the failing ranks, "0, 3, 5" (16 at most, then ", ...") */
} dlt_agree_failures;

/* rc: this rank's status; words: its message (NULL or "" for none). Fills *out alike on every rank;
 * returns 0, or the gather's failure (err filled: the agreement itself could not be made). */
int dlt_agree_failures_of(const dlt_agreement *a, int rc, const char *words, dlt_agree_failures *out, dlt_err *err);
/* The first failing rank's words (f->first), sent to every rank: words (len) is read on that rank
 * and filled on the others. */
int dlt_agree_first_words(const dlt_agreement *a, const dlt_agree_failures *f, char *words, size_t len, dlt_err *err);

/* A failure that each rank found alone (a stretch run alone: opening a run, checking the launch),
 * and who says what, decided alike on every rank. When every rank failed with the same words, rank
 * 0 says them once, for all; else each failing rank says its own, naming its rank, and rank 0 names
 * the ranks that failed. Every rank then stops when any failed (v->f.failed). */
typedef struct {
    dlt_agree_failures f;
    int all_alike;  /* every rank failed, with the same words: rank 0 says them for all */
    int say_own;    /* this rank failed, not all alike: it says its own words with its rank */
    int name_ranks; /* this is rank 0, some ranks failed, not all alike: it names them (f.ranks) */
} dlt_agree_verdict;

int dlt_agree_verdict_of(const dlt_agreement *a, int rc, const char *words, dlt_agree_verdict *v, dlt_err *err);

/* The first failure of any rank, for every rank: when some rank failed, every rank's e holds the
 * lowest failing rank's words as "rank R on node N (and K more): WORDS" (node: each rank's own
 * name for itself, may be NULL) and is marked agreed, and the status returned is that rank's
 * (nonzero on every rank). 0 when no rank failed. A rank whose own failure came later than the
 * first keeps none of its own words: the first failure is what the job says. */
int dlt_agree_first_failure(const dlt_agreement *a, int rc, const char *node, dlt_err *e);
/* The same with the first failing rank's words as they are, without its rank and node: for a
 * failure that only one rank can have (rank 0's listing) or whose words name the rank already. */
int dlt_agree_first_failure_as_is(const dlt_agreement *a, int rc, dlt_err *e);

/* root's bytes of buf to every rank (what the others decide from: rank 0's listing's size). */
int dlt_agree_share(const dlt_agreement *a, void *buf, size_t bytes, int root, dlt_err *err);

/* Is a value the same everywhere, and if not who differs. */
typedef struct {
    int same;      /* every rank gave the same record */
    int reference; /* a rank of the largest group of equal records (the lowest among equal groups) */
    int size;
    size_t bytes;
    unsigned char *all; /* every rank's record, in rank order (dlt_agree_values_free) */
} dlt_agree_values;

int dlt_agree_same(const dlt_agreement *a, const void *mine, size_t bytes, dlt_agree_values *out, dlt_err *err);
void dlt_agree_values_free(dlt_agree_values *v);
/* Rank k's record. */
const void *dlt_agree_record(const dlt_agree_values *v, int k);
/* How many ranks share rank k's record; whether k is the lowest of them. */
int dlt_agree_group_size(const dlt_agree_values *v, int k);
int dlt_agree_group_leader(const dlt_agree_values *v, int k);
/* The ranks sharing rank k's record, "0,2,5" (16 at most, then ",..."). */
void dlt_agree_group_ranks(const dlt_agree_values *v, int k, char *out, size_t len);

#endif
