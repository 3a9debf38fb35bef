/* SPDX-License-Identifier: Apache-2.0 */
/* test_agree: the agreements, with N ranks as N threads of one process meeting at a barrier (the
 * gather copies every rank's record into every rank's result), checked against what each rank was
 * given: who failed and with which words, which ranks differ, how many said yes. */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "trainer/comm/agree.h"

#define MAX_RANKS 8

/* ---- N ranks as threads */

static struct {
    int size;
    pthread_barrier_t bar;
    unsigned char slots[MAX_RANKS][4096];
    unsigned char shared[4096];
} w;

static int _gather(void *arg, const void *mine, size_t bytes, void *all, dlt_err *err)
{
    int rank = (int)(intptr_t)arg;
    (void)err;
    memcpy(w.slots[rank], mine, bytes);
    pthread_barrier_wait(&w.bar);
    for (int k = 0; k < w.size; k++)
        memcpy((char *)all + (size_t)k * bytes, w.slots[k], bytes);
    pthread_barrier_wait(&w.bar);
    return 0;
}

static int _share(void *arg, void *buf, size_t bytes, int root, dlt_err *err)
{
    int rank = (int)(intptr_t)arg;
    (void)err;
    if (rank == root)
        memcpy(w.shared, buf, bytes);
    pthread_barrier_wait(&w.bar);
    memcpy(buf, w.shared, bytes);
    pthread_barrier_wait(&w.bar);
    return 0;
}

typedef struct {
    int rank;
    int rc;               /* in: this rank's status */
    char words[256];      /* in: its words */
    int64_t value;        /* in: its value for dlt_agree_same */
    dlt_agree_failures f; /* out */
    dlt_agree_verdict v;  /* out */
    dlt_err e;            /* out: dlt_agree_first_failure's */
    dlt_err e_as_is;      /* out: dlt_agree_first_failure_as_is's */
    int as_is_rc;         /* out */
    int64_t shared;       /* out: rank 0's value, through dlt_agree_share */
    int first_rc;         /* out */
    int same, reference, group, leader, count;
    char group_ranks[128];
} rank_case;

static rank_case g_case[MAX_RANKS];

static void *_rank_main(void *arg)
{
    rank_case *c = arg;
    dlt_agreement a = {c->rank, w.size, _gather, _share, NULL, (void *)(intptr_t)c->rank};
    dlt_agree_values v;
    dlt_err err = DLT_ERR_INIT;
    char node[32];
    if (dlt_agree_failures_of(&a, c->rc, c->rc ? c->words : NULL, &c->f, &err) != 0)
        return NULL;
    if (dlt_agree_verdict_of(&a, c->rc, c->words, &c->v, &err) != 0)
        return NULL;
    dlt_err_clear(&c->e);
    if (c->rc)
        dlt_fail(&c->e, c->rc, "%s", c->words);
    snprintf(node, sizeof(node), "n%d", c->rank / 2);
    c->first_rc = dlt_agree_first_failure(&a, c->rc, node, &c->e);
    dlt_err_clear(&c->e_as_is);
    if (c->rc)
        dlt_fail(&c->e_as_is, c->rc, "%s", c->words);
    c->as_is_rc = dlt_agree_first_failure_as_is(&a, c->rc, &c->e_as_is);
    c->shared = c->value;
    if (dlt_agree_share(&a, &c->shared, sizeof(c->shared), 0, &err) != 0)
        return NULL;
    if (dlt_agree_same(&a, &c->value, sizeof(c->value), &v, &err) != 0)
        return NULL;
    c->same = v.same;
    c->reference = v.reference;
    c->group = dlt_agree_group_size(&v, c->rank);
    c->leader = dlt_agree_group_leader(&v, c->rank);
    dlt_agree_group_ranks(&v, c->rank, c->group_ranks, sizeof(c->group_ranks));
    dlt_agree_values_free(&v);
    dlt_agree_count(&a, c->value > 0, &c->count, &err);
    return NULL;
}

static void _run(int size)
{
    pthread_t th[MAX_RANKS];
    w.size = size;
    assert_int_equal(pthread_barrier_init(&w.bar, NULL, (unsigned)size), 0);
    for (int k = 0; k < size; k++) {
        g_case[k].rank = k;
        assert_int_equal(pthread_create(&th[k], NULL, _rank_main, &g_case[k]), 0);
    }
    for (int k = 0; k < size; k++)
        pthread_join(th[k], NULL);
    pthread_barrier_destroy(&w.bar);
}

/* Nobody failed, every value the same. */
static void test_all_well(void **state)
{
    (void)state;
    memset(g_case, 0, sizeof(g_case));
    for (int k = 0; k < 4; k++)
        g_case[k].value = 7;
    _run(4);
    for (int k = 0; k < 4; k++) {
        assert_int_equal(g_case[k].f.failed, 0);
        assert_int_equal(g_case[k].f.first, -1);
        assert_int_equal(g_case[k].v.f.failed, 0);
        assert_int_equal(g_case[k].v.all_alike + g_case[k].v.say_own + g_case[k].v.name_ranks, 0);
        assert_int_equal(g_case[k].first_rc, 0);
        assert_int_equal(g_case[k].e.code, 0);
        assert_int_equal(g_case[k].as_is_rc, 0);
        assert_int_equal(g_case[k].e_as_is.code, 0);
        assert_int_equal(g_case[k].shared, 7);
        assert_int_equal(g_case[k].same, 1);
        assert_int_equal(g_case[k].group, 4);
        assert_int_equal(g_case[k].count, 4);
        assert_string_equal(g_case[k].group_ranks, "0,1,2,3");
    }
}

/* Ranks 1 and 3 fail with other words: every rank learns rank 1 first, both named, not alike; every
 * rank's error becomes rank 1's words with its node, agreed, rank 3's own words gone. */
static void test_first_failure_by_rank_order(void **state)
{
    (void)state;
    memset(g_case, 0, sizeof(g_case));
    g_case[3].rc = -EINVAL;
    snprintf(g_case[3].words, sizeof(g_case[3].words), "rank three's complaint");
    g_case[1].rc = -ENOENT;
    snprintf(g_case[1].words, sizeof(g_case[1].words), "/data/train: No such file or directory");
    _run(4);
    for (int k = 0; k < 4; k++) {
        assert_int_equal(g_case[k].f.failed, 2);
        assert_int_equal(g_case[k].f.first, 1);
        assert_int_equal(g_case[k].f.first_code, -ENOENT);
        assert_int_equal(g_case[k].f.alike, 0);
        assert_string_equal(g_case[k].f.ranks, "1, 3");
        /* the verdict: ranks 1 and 3 say their own, rank 0 names them */
        assert_string_equal(g_case[k].v.f.ranks, "1, 3");
        assert_int_equal(g_case[k].v.all_alike, 0);
        assert_int_equal(g_case[k].v.say_own, k == 1 || k == 3);
        assert_int_equal(g_case[k].v.name_ranks, k == 0);
        assert_int_equal(g_case[k].first_rc, -ENOENT);
        assert_string_equal(g_case[k].e.msg, "rank 1 on node n0 (and 1 more): /data/train: No such file or directory");
        assert_int_equal(g_case[k].e.agreed, 1);
        /* as is: the same decision, the words without rank and node */
        assert_int_equal(g_case[k].as_is_rc, -ENOENT);
        assert_string_equal(g_case[k].e_as_is.msg, "/data/train: No such file or directory");
        assert_int_equal(g_case[k].e_as_is.agreed, 1);
    }
}

/* Every rank failed with the same words: alike; a rank alone failing names only itself. */
static void test_failures_alike_and_alone(void **state)
{
    (void)state;
    memset(g_case, 0, sizeof(g_case));
    for (int k = 0; k < 3; k++) {
        g_case[k].rc = -EIO;
        snprintf(g_case[k].words, sizeof(g_case[k].words), "the same");
    }
    _run(3);
    for (int k = 0; k < 3; k++) {
        assert_int_equal(g_case[k].f.failed, 3);
        assert_int_equal(g_case[k].f.alike, 1);
        assert_string_equal(g_case[k].f.ranks, "0, 1, 2");
        assert_string_equal(g_case[k].e.msg, "rank 0 on node n0 (and 2 more): the same");
        assert_int_equal(g_case[k].v.all_alike, 1); /* rank 0 says it for all */
        assert_int_equal(g_case[k].v.say_own, 0);
        assert_int_equal(g_case[k].v.name_ranks, 0);
    }
    memset(g_case, 0, sizeof(g_case));
    g_case[4].rc = -EPROTO;
    snprintf(g_case[4].words, sizeof(g_case[4].words), "bad");
    _run(5);
    for (int k = 0; k < 5; k++) {
        assert_string_equal(g_case[k].f.ranks, "4");
        assert_string_equal(g_case[k].e.msg, "rank 4 on node n2: bad");
        assert_int_equal(g_case[k].v.all_alike, 0);
        assert_int_equal(g_case[k].v.say_own, k == 4);
        assert_int_equal(g_case[k].v.name_ranks, k == 0);
    }
}

/* Values 5,5,9,5,9,0: the largest group (0,1,3) is the reference; each group named, its lowest
 * rank its leader; five ranks say yes (value > 0). */
static void test_who_differs(void **state)
{
    const int64_t vals[6] = {5, 5, 9, 5, 9, 0};
    (void)state;
    memset(g_case, 0, sizeof(g_case));
    for (int k = 0; k < 6; k++)
        g_case[k].value = vals[k];
    _run(6);
    for (int k = 0; k < 6; k++) {
        assert_int_equal(g_case[k].shared, 5); /* rank 0's */
        assert_int_equal(g_case[k].same, 0);
        assert_int_equal(g_case[k].reference, 0);
        assert_int_equal(g_case[k].count, 5);
    }
    assert_string_equal(g_case[3].group_ranks, "0,1,3");
    assert_int_equal(g_case[3].group, 3);
    assert_int_equal(g_case[3].leader, 0);
    assert_int_equal(g_case[0].leader, 1);
    assert_string_equal(g_case[4].group_ranks, "2,4");
    assert_int_equal(g_case[2].leader, 1);
    assert_string_equal(g_case[5].group_ranks, "5");
    /* equal groups: the lowest rank's is the reference */
    memset(g_case, 0, sizeof(g_case));
    g_case[0].value = g_case[3].value = 1;
    g_case[1].value = g_case[2].value = 2;
    _run(4);
    assert_int_equal(g_case[2].reference, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_well),
        cmocka_unit_test(test_first_failure_by_rank_order),
        cmocka_unit_test(test_failures_alike_and_alone),
        cmocka_unit_test(test_who_differs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
