/* SPDX-License-Identifier: Apache-2.0 */
/* test_rank_env: the rank contract's pure rules: MASTER_PORT from the step's
 * reserved ports or derived from job and step (concurrent steps of one job differ, the range
 * holds, consecutive jobs do not meet more often than chance: job J step 16 is not job J+1 step 0). */
#include "config.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "plugin/rank_env.h"

static void test_port(void **state)
{
    int port = 0, reserved = -1, seen[64];
    (void)state;
    assert_int_equal(dlt_rank_port("12000-12003", 7, 0, &port, &reserved), 0);
    assert_int_equal(port, 12000);
    assert_int_equal(reserved, 1);
    assert_int_equal(dlt_rank_port("12005,12009", 7, 0, &port, &reserved), 0);
    assert_int_equal(port, 12005);
    assert_int_equal(dlt_rank_port("0", 7, 0, &port, &reserved), -EINVAL);
    assert_int_equal(dlt_rank_port("70000", 7, 0, &port, &reserved), -EINVAL);
    /* the range's edges, both sides */
    assert_int_equal(dlt_rank_port("65535", 7, 0, &port, &reserved), 0);
    assert_int_equal(port, 65535);
    assert_int_equal(dlt_rank_port("65536", 7, 0, &port, &reserved), -EINVAL);
    assert_int_equal(dlt_rank_port("1", 7, 0, &port, &reserved), 0);
    assert_int_equal(port, 1);
    assert_int_equal(dlt_rank_port("abc", 7, 0, &port, &reserved), -EINVAL);
    assert_int_equal(dlt_rank_port("123x", 7, 0, &port, &reserved), -EINVAL);
    /* Derived: in range, and the 64 steps of one job all differ (whatever the job id). */
    for (uint32_t job = 1; job < 200000; job += 9973) {
        for (uint32_t step = 0; step < 64; step++) {
            assert_int_equal(dlt_rank_port(NULL, job, step, &port, &reserved), 0);
            assert_int_equal(reserved, 0);
            assert_true(port >= DLT_PORT_BASE && port < DLT_PORT_BASE + DLT_PORT_SPAN);
            seen[step] = port;
            for (uint32_t k = 0; k < step; k++)
                assert_int_not_equal(seen[k], port);
        }
    }
    assert_int_equal(dlt_rank_port("", 4294967295u, 4294967295u, &port, &reserved), 0);
    assert_true(port >= DLT_PORT_BASE && port < DLT_PORT_BASE + DLT_PORT_SPAN);
}

/* A linear rule (job * 16 + step) gives job J step s + 16 the port of job J + 1 step s, on every J:
 * two jobs on one node join each other's rendezvous. The derived port must meet another job's
 * only by chance, 1 / DLT_PORT_SPAN per pair. */
static void test_port_across_jobs(void **state)
{
    enum { JOBS = 256, STEPS = 64, NJ = 100000 };
    static int ports[JOBS][STEPS];
    const uint32_t firsts[] = {1, 7, 1000, 123456, 4000000000u};
    unsigned long same = 0, pairs = 0;
    double expected;
    (void)state;
    for (size_t i = 0; i < sizeof(firsts) / sizeof(firsts[0]); i++)
        if (dlt_rank_port_derived(firsts[i], 16) == dlt_rank_port_derived(firsts[i] + 1, 0))
            fail_msg("job %u step 16 and job %u step 0 get the same port %d", firsts[i], firsts[i] + 1,
                     dlt_rank_port_derived(firsts[i], 16));
    /* Over many J the pair (J, 16) / (J + 1, 0) meets about NJ / span times (10 here); 30 is 6
     * standard deviations above; the linear rule meets NJ times. */
    for (uint32_t j = 1; j <= NJ; j++)
        same += dlt_rank_port_derived(j, 16) == dlt_rank_port_derived(j + 1, 0);
    if (same > 30)
        fail_msg("job J step 16 and job J+1 step 0 share a port for %lu of %d jobs", same, NJ);
    /* JOBS consecutive jobs with STEPS steps each: pairs of steps of different jobs sharing a port.
     * By chance: JOBS(JOBS-1)/2 job pairs x STEPS^2 / span (13369 here, standard deviation about
     * 760, since one job pair's overlap brings up to STEPS pairs at once); the linear rule gives
     * 24400. A bound of 1.25 times chance leaves 4 deviations either way. */
    for (uint32_t j = 0; j < JOBS; j++)
        for (uint32_t s = 0; s < STEPS; s++) {
            int p = dlt_rank_port_derived(50000 + j, s);
            if (p < DLT_PORT_BASE || p >= DLT_PORT_BASE + DLT_PORT_SPAN)
                fail_msg("job %u step %u: port %d outside %d..%d", 50000 + j, s, p, DLT_PORT_BASE,
                         DLT_PORT_BASE + DLT_PORT_SPAN - 1);
            ports[j][s] = p;
        }
    for (uint32_t a = 0; a < JOBS; a++)
        for (uint32_t b = a + 1; b < JOBS; b++)
            for (uint32_t s = 0; s < STEPS; s++)
                for (uint32_t t = 0; t < STEPS; t++)
                    pairs += ports[a][s] == ports[b][t];
    expected = (double)JOBS * (JOBS - 1) / 2.0 * STEPS * STEPS / DLT_PORT_SPAN;
    if ((double)pairs > 1.25 * expected)
        fail_msg("%d consecutive jobs x %d steps: %lu pairs of steps of different jobs share a port, chance "
                 "gives %.0f",
                 JOBS, STEPS, pairs, expected);
    print_message("job J step 16 = job J+1 step 0 for %lu of %d jobs; %lu shared pairs over %d jobs x %d steps "
                  "(chance: %.0f)\n",
                  same, NJ, pairs, JOBS, STEPS, expected);
}

/* The record a task carries of what the plugin set: names with their values' hashes, read back in
 * order; a changed value has another hash; malformed records and names are refused. */
static void test_env_record(void **state)
{
    char rec[DLT_ENV_RECORD_MAX] = "", small[24] = "", name[64];
    const char *cur;
    uint64_t h;
    (void)state;
    assert_int_equal(dlt_env_record_add(rec, sizeof(rec), "RANK", "3"), 0);
    assert_int_equal(dlt_env_record_add(rec, sizeof(rec), "NCCL_TOPO_FILE", "/run/dltrain/7.0/nccl_topo.xml"), 0);
    assert_int_equal(dlt_env_record_add(rec, sizeof(rec), "BAD=NAME", "x"), -EINVAL);
    assert_int_equal(dlt_env_record_add(rec, sizeof(rec), "", "x"), -EINVAL);
    cur = rec;
    assert_int_equal(dlt_env_record_next(&cur, name, sizeof(name), &h), 1);
    assert_string_equal(name, "RANK");
    assert_true(h == dlt_env_value_hash("3"));
    assert_true(h != dlt_env_value_hash("4"));
    assert_int_equal(dlt_env_record_next(&cur, name, sizeof(name), &h), 1);
    assert_string_equal(name, "NCCL_TOPO_FILE");
    assert_true(h == dlt_env_value_hash("/run/dltrain/7.0/nccl_topo.xml"));
    assert_int_equal(dlt_env_record_next(&cur, name, sizeof(name), &h), 0);
    /* Full: the record stays as it was. */
    assert_int_equal(dlt_env_record_add(small, sizeof(small), "RANK", "0"), 0);
    assert_int_equal(dlt_env_record_add(small, sizeof(small), "WORLD_SIZE", "2"), -ENOSPC);
    assert_string_equal(small, "RANK:af63ad4c86019caf");
    static const char *const bad[] = {"RANK", "RANK:12", "RANK:zz63ad4c86019caf", "A B:af63ad4c86019caf",
                                      ":af63ad4c86019caf"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cur = bad[i];
        if (dlt_env_record_next(&cur, name, sizeof(name), &h) != -EINVAL)
            fail_msg("record '%s' accepted", bad[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_port_across_jobs),
        cmocka_unit_test(test_env_record),
        cmocka_unit_test(test_port),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
