/* SPDX-License-Identifier: Apache-2.0 */
/* agree: every rank's decision from the same gathered bytes. */
#include "config.h"

#include "trainer/comm/agree.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/crc32.h"

/* A collective of the communicator failed: its words went to the communicator's error; err (when
 * another) gets them too. */
static int _comm_failed(dlt_comm *c, int rc, const char *what, dlt_err *err)
{
    if (err && err != c->err) {
        if (c->err && c->err->code)
            dlt_fail_take(err, c->err);
        else
            dlt_fail(err, rc, "%s failed (%d)", what, rc);
    }
    return rc;
}

static int _comm_gather(void *arg, const void *mine, size_t bytes, void *all, dlt_err *err)
{
    dlt_comm *c = arg;
    int rc = c->ops->allgather(c, mine, bytes, all);
    return rc ? _comm_failed(c, rc, "the agreement's all-gather", err) : 0;
}

static int _comm_share(void *arg, void *buf, size_t bytes, int root, dlt_err *err)
{
    dlt_comm *c = arg;
    int rc = c->ops->bcast(c, buf, bytes, root);
    return rc ? _comm_failed(c, rc, "the agreement's broadcast", err) : 0;
}

static void _comm_abort(void *arg)
{
    dlt_comm *c = arg;
    c->ops->abort(c, 1);
}

dlt_agreement dlt_agreement_of_comm(dlt_comm *c)
{
    dlt_agreement a = {c->rank, c->size, _comm_gather, _comm_share, _comm_abort, c};
    return a;
}

int dlt_agree_gather_into(const dlt_agreement *a, const void *mine, size_t bytes, void *all, dlt_err *err)
{
    if (a->size == 1) {
        memcpy(all, mine, bytes);
        return 0;
    }
    return a->gather(a->arg, mine, bytes, all, err);
}

int dlt_agree_gather(const dlt_agreement *a, const void *mine, size_t bytes, void **all, dlt_err *err)
{
    int rc;
    *all = calloc((size_t)a->size, bytes ? bytes : 1);
    if (!*all) {
        dlt_rank_say(a->rank, "out of memory for an agreement of %d ranks", a->size);
        if (a->abort && a->size > 1)
            a->abort(a->arg); /* cannot take part: the others would wait for this rank */
        return dlt_fail(err, -ENOMEM, "out of memory for an agreement of %d ranks", a->size);
    }
    if ((rc = dlt_agree_gather_into(a, mine, bytes, *all, err)) != 0) {
        free(*all);
        *all = NULL;
    }
    return rc;
}

int dlt_agree_count(const dlt_agreement *a, int flag, int *count, dlt_err *err)
{
    uint8_t mine = flag != 0, *all;
    int rc;
    *count = 0;
    if ((rc = dlt_agree_gather(a, &mine, 1, (void **)&all, err)) != 0)
        return rc;
    for (int k = 0; k < a->size; k++)
        *count += all[k];
    free(all);
    return 0;
}

/* Appends rank k, the n-th named, to the list in out (len; *o used): 16 named at most, then
 * "SEP..." once. */
static void _name_rank(char *out, size_t len, size_t *o, int n, int k, const char *sep)
{
    int w = 0;
    if (n < 16)
        w = snprintf(out + *o, *o < len ? len - *o : 0, "%s%d", n ? sep : "", k);
    else if (n == 16)
        w = snprintf(out + *o, *o < len ? len - *o : 0, "%s...", sep);
    if (w > 0)
        *o += (size_t)w;
}

/* One rank's part of dlt_agree_failures_of. */
typedef struct {
    int32_t failed;
    int32_t code;
    uint32_t digest; /* CRC-32 of the words */
} failure_record;

int dlt_agree_failures_of(const dlt_agreement *a, int rc, const char *words, dlt_agree_failures *out, dlt_err *err)
{
    failure_record mine = {rc != 0, rc, words ? dlt_crc32(0, words, strlen(words)) : 0}, *all;
    int grc;
    size_t o = 0;
    memset(out, 0, sizeof(*out));
    out->first = -1;
    out->alike = 1;
    if ((grc = dlt_agree_gather(a, &mine, sizeof(mine), (void **)&all, err)) != 0)
        return grc;
    for (int k = 0; k < a->size; k++) {
        if (!all[k].failed)
            continue;
        if (out->first < 0) {
            out->first = k;
            out->first_code = all[k].code;
        }
        out->alike = out->alike && all[k].digest == all[out->first].digest;
        _name_rank(out->ranks, sizeof(out->ranks), &o, out->failed++, k, ", ");
    }
    free(all);
    return 0;
}

int dlt_agree_first_words(const dlt_agreement *a, const dlt_agree_failures *f, char *words, size_t len, dlt_err *err)
{
    int rc;
    if (f->first < 0 || a->size == 1)
        return 0;
    if ((rc = a->share(a->arg, words, len, f->first, err)) != 0)
        return rc;
    words[len - 1] = '\0';
    return 0;
}

int dlt_agree_verdict_of(const dlt_agreement *a, int rc, const char *words, dlt_agree_verdict *v, dlt_err *err)
{
    int grc;
    memset(v, 0, sizeof(*v));
    if ((grc = dlt_agree_failures_of(a, rc, rc ? words : NULL, &v->f, err)) != 0)
        return grc;
    if (v->f.failed == 0)
        return 0;
    v->all_alike = v->f.failed == a->size && v->f.alike;
    v->say_own = !v->all_alike && rc != 0;
    v->name_ranks = !v->all_alike && a->rank == 0;
    return 0;
}

/* dlt_agree_first_failure and dlt_agree_first_failure_as_is: named, the words say the rank and node. */
static int _first_failure(const dlt_agreement *a, int rc, int named, const char *node, dlt_err *e)
{
    dlt_agree_failures f;
    char words[sizeof(e->msg)] = "";
    int code, grc;
    if ((grc = dlt_agree_failures_of(a, rc, e ? e->msg : NULL, &f, e)) != 0)
        return grc;
    if (f.failed == 0)
        return 0;
    code = f.first_code < 0 ? f.first_code : -EIO;
    if (a->size == 1)
        return dlt_err_agree(e, rc);
    if (a->rank == f.first && named) {
        char more[32] = "";
        if (f.failed > 1)
            snprintf(more, sizeof(more), " (and %d more)", f.failed - 1);
        snprintf(words, sizeof(words), "rank %d on node %.63s%s: %.*s", f.first, node ? node : "?", more,
                 (int)sizeof(words) - 128, e->msg);
    } else if (a->rank == f.first) {
        snprintf(words, sizeof(words), "%s", e->msg);
    }
    if ((grc = dlt_agree_first_words(a, &f, words, sizeof(words), e)) != 0)
        return grc;
    dlt_err_clear(e); /* the job's first failure replaces this rank's own, alike everywhere */
    dlt_fail(e, code, "%s", words);
    return dlt_err_agree(e, code);
}

int dlt_agree_first_failure(const dlt_agreement *a, int rc, const char *node, dlt_err *e)
{
    return _first_failure(a, rc, 1, node, e);
}

int dlt_agree_first_failure_as_is(const dlt_agreement *a, int rc, dlt_err *e)
{
    return _first_failure(a, rc, 0, NULL, e);
}

int dlt_agree_share(const dlt_agreement *a, void *buf, size_t bytes, int root, dlt_err *err)
{
    return a->size < 2 ? 0 : a->share(a->arg, buf, bytes, root, err);
}

int dlt_agree_same(const dlt_agreement *a, const void *mine, size_t bytes, dlt_agree_values *out, dlt_err *err)
{
    int rc, best = 0;
    memset(out, 0, sizeof(*out));
    out->size = a->size;
    out->bytes = bytes;
    if ((rc = dlt_agree_gather(a, mine, bytes, (void **)&out->all, err)) != 0)
        return rc;
    for (int k = 0; k < a->size; k++) {
        int n = dlt_agree_group_size(out, k);
        if (n > best) { /* the largest group; the lowest rank's among equals */
            best = n;
            out->reference = k;
        }
    }
    out->same = best == a->size;
    return 0;
}

void dlt_agree_values_free(dlt_agree_values *v)
{
    free(v->all);
    v->all = NULL;
}

const void *dlt_agree_record(const dlt_agree_values *v, int k)
{
    return v->all + (size_t)k * v->bytes;
}

int dlt_agree_group_size(const dlt_agree_values *v, int k)
{
    int n = 0;
    for (int j = 0; j < v->size; j++)
        n += !memcmp(dlt_agree_record(v, j), dlt_agree_record(v, k), v->bytes);
    return n;
}

int dlt_agree_group_leader(const dlt_agree_values *v, int k)
{
    for (int j = 0; j < k; j++)
        if (!memcmp(dlt_agree_record(v, j), dlt_agree_record(v, k), v->bytes))
            return 0;
    return 1;
}

void dlt_agree_group_ranks(const dlt_agree_values *v, int k, char *out, size_t len)
{
    size_t o = 0;
    int n = 0;
    if (len)
        out[0] = '\0';
    for (int j = 0; j < v->size; j++)
        if (!memcmp(dlt_agree_record(v, j), dlt_agree_record(v, k), v->bytes))
            _name_rank(out, len, &o, n++, j, ",");
}
