/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of run_log at several ranks: the interval's metrics line (loss and top-1 over every
 * rank's images, images/s over the global batch and per rank), the end summary's rate, and the
 * --baseline reader (first line left out as warm-up, damaged lines left out, per-rank mean). Each
 * value is checked against one worked out here from the steps fed in. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/clock.h"
#include "trainer/train/run_log.h"

#include "tests/unit/stdout_capture.h"
#include "tests/unit/tmp_dir.h"

enum { RANKS = 4, BATCH = 8, STEPS = 3 };

/* The number after "key": in a JSON line (fails the test where it is missing). */
static double _field(const char *line, const char *key)
{
    char pat[64];
    const char *p;
    snprintf(pat, sizeof(pat), "\"%s\":", key);
    p = strstr(line, pat);
    if (!p)
        fail_msg("no %s in %s", pat, line);
    return atof(p + strlen(pat));
}

static void _sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* Reads the whole of a small file into buf. */
static void _slurp(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "r");
    size_t n;
    assert_non_null(f);
    n = fread(buf, 1, cap - 1, f);
    buf[n] = '\0';
    fclose(f);
}

/* Three steps of 4 ranks x 8 images: the line's loss and top-1 are the sums over 96 images, its
 * images/s counts 96 images over the interval's time, 4 times the per-rank rate. */
static void test_interval_line_counts_every_rank(void **state)
{
    (void)state;
    char *dir = tmp_dir_make("run-log"), path[512], out[512], text[8192], said[4096];
    dlt_run_log l;
    dlt_err err = DLT_ERR_INIT;
    dlt_step_status st = {.step = STEPS, .total = 100, .steps_per_epoch = 10, .lr = 0.1};
    double loss_sum = 0, correct = 0, t0, t1;
    int saved;
    snprintf(path, sizeof(path), "%s/m.jsonl", dir);
    snprintf(out, sizeof(out), "%s/out.txt", dir);
    assert_int_equal(dlt_run_log_open(&l, 0, RANKS, BATCH, DLT_LOG_INFO, path, &err), 0);
    t0 = dlt_now();
    dlt_run_log_start(&l, 0);
    for (int s = 1; s <= STEPS; s++) {
        /* the summed loss and hits over every rank's images (as the step hands them over) */
        double ls = 2.5 * RANKS * BATCH + s, c = 3.0 * s;
        dlt_run_log_step(&l, s, ls, c, 0.01, 0.02, 0.1);
        loss_sum += ls;
        correct += c;
    }
    _sleep_ms(60);
    saved = stdout_capture_begin(out);
    dlt_run_log_line(&l, &st);
    stdout_capture_end(saved);
    t1 = dlt_now();
    dlt_run_log_close(&l);
    _slurp(path, text, sizeof(text));
    _slurp(out, said, sizeof(said));
    {
        double images = (double)STEPS * BATCH * RANKS, ips = _field(text, "images_per_s");
        assert_float_equal(_field(text, "loss"), loss_sum / images, 1e-6);
        assert_float_equal(_field(text, "top1"), correct / images, 1e-5);
        assert_int_equal((int)_field(text, "ranks"), RANKS);
        assert_int_equal((int)_field(text, "batch"), BATCH);
        /* the interval began between t0 and t_in and ended after the 60 ms sleep, before t1 */
        if (!(ips >= images / (t1 - t0) * 0.999 && ips <= images / 0.060 * 1.001))
            fail_msg("images_per_s %.3f: expected %.0f images over 0.060-%.3f s", ips, images, t1 - t0);
        assert_float_equal(_field(text, "images_per_s_per_rank") * RANKS, ips, 1e-2);
        /* data and wait: their share of the summed step time */
        assert_float_equal(_field(text, "data_wait"), 0.01 / 0.1, 1e-4);
        assert_float_equal(_field(text, "wait"), 0.02 / 0.1, 1e-4);
        assert_float_equal(_field(text, "epoch"), 0.3, 1e-4);
        /* the printed line: the same figures, rounded as printed */
        {
            double loss, top1, lr, ips_said, per_rank, data, wait;
            long long epoch, step, total;
            if (sscanf(said,
                       "dltrain: epoch %lld step %lld/%lld loss %lf top1 %lf lr %lf img/s %lf (%lf per rank) "
                       "data %lf%% wait %lf%%",
                       &epoch, &step, &total, &loss, &top1, &lr, &ips_said, &per_rank, &data, &wait) != 10)
                fail_msg("the step line does not read as one: %s", said);
            assert_true(epoch == 1 && step == STEPS && total == 100);
            assert_float_equal(loss, loss_sum / images, 1e-4);
            assert_float_equal(ips_said, ips, 0.06);
            assert_float_equal(per_rank * RANKS, ips, 0.25);
            assert_float_equal(data, 10.0, 0.06);
            assert_float_equal(wait, 20.0, 0.06);
        }
    }
    tmp_dir_remove(dir);
}

/* The end summary counts the global batch of every step after the first (the first includes
 * one-time setup), over the time from the first step's end. */
static void test_summary_rate_counts_every_rank(void **state)
{
    (void)state;
    char *dir = tmp_dir_make("run-log"), path[512], text[4096];
    dlt_run_log l;
    dlt_err err = DLT_ERR_INIT;
    double t_first, t_end, ips = 0, per_rank = 0;
    int ranks = 0, saved;
    snprintf(path, sizeof(path), "%s/out.txt", dir);
    assert_int_equal(dlt_run_log_open(&l, 0, RANKS, BATCH, DLT_LOG_QUIET, NULL, &err), 0);
    dlt_run_log_start(&l, 10);
    dlt_run_log_step(&l, 11, 1, 1, 0, 0, 0.1);
    t_first = dlt_now();
    for (int s = 12; s <= 15; s++)
        dlt_run_log_step(&l, s, 1, 1, 0, 0, 0.1);
    _sleep_ms(60);
    saved = stdout_capture_begin(path);
    t_end = dlt_now();
    dlt_run_log_summary(&l, 5, NULL);
    stdout_capture_end(saved);
    dlt_run_log_close(&l);
    _slurp(path, text, sizeof(text));
    {
        const char *s = strstr(text, "summary: ");
        double images = 4.0 * BATCH * RANKS;
        if (!s || sscanf(s, "summary: %lf images/s, %lf per rank, %d rank(s)", &ips, &per_rank, &ranks) != 3)
            fail_msg("no summary line in: %s", text);
        assert_int_equal(ranks, RANKS);
        if (!(ips <= images / (t_end - t_first) * 1.01 && ips >= images / (dlt_now() - t_first + 0.05) * 0.99))
            fail_msg("summary %.1f images/s: expected %.0f images over about %.3f s", ips, images, t_end - t_first);
        assert_float_equal(per_rank * RANKS, ips, 0.5);
        assert_non_null(strstr(text, "done: 5 steps in "));
    }
    tmp_dir_remove(dir);
}

/* --baseline: the per-rank mean of the interval lines after the first; lines without a positive
 * rate or a rank count are left out; a file with nothing usable is refused naming it. */
static void test_baseline_per_rank_mean(void **state)
{
    (void)state;
    char *dir = tmp_dir_make("run-log"), path[512];
    dlt_err err = DLT_ERR_INIT;
    double per_rank = 0;
    FILE *f;
    snprintf(path, sizeof(path), "%s/base.jsonl", dir);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"step\":10,\"images_per_s\":9999.0,\"ranks\":1}\n", f); /* warm-up: left out */
    fputs("{\"step\":20,\"images_per_s\":400.0,\"ranks\":4}\n", f);  /* 100 per rank */
    fputs("{\"namespace\":\"\",\"key\":\"eval_accuracy\",\"value\":0.5}\n", f);
    fputs("{\"step\":30,\"images_per_s\":-5,\"ranks\":4}\n", f);     /* damaged: left out */
    fputs("{\"step\":40,\"images_per_s\":300.0,\"ranks\":0}\n", f);  /* no ranks: left out */
    fputs("{\"step\":50,\"images_per_s\":1200.0,\"ranks\":8}\n", f); /* 150 per rank */
    fclose(f);
    assert_int_equal(dlt_run_log_baseline(path, &per_rank, &err), 0);
    assert_float_equal(per_rank, 125.0, 1e-9);

    f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"step\":10,\"images_per_s\":100.0,\"ranks\":1}\n", f);
    fclose(f);
    assert_true(dlt_run_log_baseline(path, &per_rank, &err) < 0);
    assert_non_null(strstr(err.msg, path));
    assert_non_null(strstr(err.msg, "after the first"));
    tmp_dir_remove(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_interval_line_counts_every_rank),
        cmocka_unit_test(test_summary_rate_counts_every_rank),
        cmocka_unit_test(test_baseline_per_rank_mean),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
