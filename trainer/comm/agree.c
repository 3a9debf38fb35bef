/* SPDX-License-Identifier: Apache-2.0 */
/* agree: every rank's decision from the same gathered bytes. */
#include "config.h"

#include "trainer/comm/agree.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/common/crc32.h"

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

/* A communicator without an all-gather (test doubles): each rank fills its own slots of a zeroed
 * buffer with 32-bit pieces of its record, one sum puts every record in place (exact in int64). */
static int _gather_by_sum(dlt_comm *c, const void *mine, size_t bytes, void *all)
{
    size_t words = (bytes + 3) / 4, n = words * (size_t)c->size;
    int64_t *v = calloc(n ? n : 1, sizeof(int64_t));
    int rc;
    if (!v)
        return dlt_fail(c->err, -ENOMEM, "out of memory for an agreement of %d ranks", c->size);
    for (size_t i = 0; i < words; i++) {
        uint32_t w = 0;
        memcpy(&w, (const char *)mine + 4 * i, bytes - 4 * i < 4 ? bytes - 4 * i : 4);
        v[(size_t)c->rank * words + i] = (int64_t)w;
    }
    if ((rc = c->ops->allreduce_sum(c, v, n, DLT_DTYPE_I64)) == 0)
        for (int k = 0; k < c->size; k++)
            for (size_t i = 0; i < words; i++) {
                uint32_t w = (uint32_t)v[(size_t)k * words + i];
                memcpy((char *)all + (size_t)k * bytes + 4 * i, &w, bytes - 4 * i < 4 ? bytes - 4 * i : 4);
            }
    free(v);
    return rc;
}

static int _comm_gather(void *arg, const void *mine, size_t bytes, void *all, dlt_err *err)
{
    dlt_comm *c = arg;
    int rc = c->ops->allgather ? c->ops->allgather(c, mine, bytes, all) : _gather_by_sum(c, mine, bytes, all);
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

int dlt_agree_gather(const dlt_agreement *a, const void *mine, size_t bytes, void **all, dlt_err *err)
{
    int rc;
    *all = calloc((size_t)a->size, bytes ? bytes : 1);
    if (!*all) {
        fprintf(stderr, "dltrain: rank %d: out of memory for an agreement of %d ranks\n", a->rank, a->size);
        if (a->abort && a->size > 1)
            a->abort(a->arg); /* cannot take part: the others would wait for this rank */
        return dlt_fail(err, -ENOMEM, "out of memory for an agreement of %d ranks", a->size);
    }
    if (a->size == 1) {
        memcpy(*all, mine, bytes);
        return 0;
    }
    if ((rc = a->gather(a->arg, mine, bytes, *all, err)) != 0) {
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
        if (out->failed < 16) {
            int w = snprintf(out->ranks + o, sizeof(out->ranks) - o, "%s%d", o ? ", " : "", k);
            if (w > 0 && (size_t)w < sizeof(out->ranks) - o)
                o += (size_t)w;
        } else if (out->failed == 16 && o + 6 < sizeof(out->ranks)) {
            memcpy(out->ranks + o, ", ...", 6);
            o += 5;
        }
        out->failed++;
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

int dlt_agree_first_failure(const dlt_agreement *a, int rc, const char *node, dlt_err *e)
{
    dlt_agree_failures f;
    char *words;
    int code, grc;
    if ((grc = dlt_agree_failures_of(a, rc, e ? e->msg : NULL, &f, e)) != 0)
        return grc;
    if (f.failed == 0)
        return 0;
    code = f.first_code < 0 ? f.first_code : -EIO;
    if (a->size == 1)
        return dlt_err_agree(e, rc);
    if (!(words = calloc(1, sizeof(e->msg)))) {
        fprintf(stderr, "dltrain: rank %d: out of memory agreeing on a failure\n", a->rank);
        if (a->abort)
            a->abort(a->arg); /* cannot take part in the broadcast: the others would wait for it */
        return dlt_fail(e, -ENOMEM, "out of memory");
    }
    if (a->rank == f.first) {
        char more[32] = "";
        if (f.failed > 1)
            snprintf(more, sizeof(more), " (and %d more)", f.failed - 1);
        snprintf(words, sizeof(e->msg), "rank %d on node %.63s%s: %.*s", f.first, node ? node : "?", more,
                 (int)sizeof(e->msg) - 128, e->msg);
    }
    if ((grc = dlt_agree_first_words(a, &f, words, sizeof(e->msg), e)) != 0) {
        free(words);
        return grc;
    }
    dlt_err_clear(e); /* the job's first failure replaces this rank's own, alike everywhere */
    dlt_fail(e, code, "%s", words);
    free(words);
    return dlt_err_agree(e, code);
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
    for (int j = 0; j < v->size; j++) {
        int w = 0;
        if (memcmp(dlt_agree_record(v, j), dlt_agree_record(v, k), v->bytes))
            continue;
        if (n < 16)
            w = snprintf(out + o, o < len ? len - o : 0, "%s%d", n ? "," : "", j);
        else if (n == 16)
            w = snprintf(out + o, o < len ? len - o : 0, ",...");
        if (w > 0)
            o += (size_t)w;
        n++;
    }
}
