/* SPDX-License-Identifier: Apache-2.0 */
/* The learning-rate schedule (trainer/train/schedule.c) against values worked out here: linear
 * warm-up by step to the peak, then steps of 0.1 at the milestone epochs or a cosine decay to zero
 * at the last epoch; the rate changes per step (a fractional epoch), not per epoch. */
#include "config.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "trainer/train/schedule.h"

#define PI 3.14159265358979323846

/* Goyal et al. for ResNet-50 on 1,024 images a step: peak 0.1 x 1024/256, 5 warm-up epochs, steps at
 * 30, 60 and 80 of 90 epochs; 10 steps an epoch keeps the numbers readable. */
static dlt_schedule _goyal(int cosine)
{
    dlt_schedule s = {.peak = 0.4,
                      .steps_per_epoch = 10,
                      .warmup_epochs = 5,
                      .cosine = cosine,
                      .total_epochs = 90,
                      .milestones = {30, 60, 80},
                      .nmilestones = 3};
    return s;
}

/* The reference, written from the recipe rather than from schedule.c: warm-up step k (counted
 * from 0) trains at peak x (k + 1) / warm-up steps, so the last warm-up step is at the peak. */
static double _reference(const dlt_schedule *s, int64_t step)
{
    const int64_t spe = s->steps_per_epoch, warm = (int64_t)llround(s->warmup_epochs * (double)spe);
    if (step < warm)
        return s->peak * (double)(step + 1) / (double)warm;
    if (s->cosine) {
        /* Fraction of the post-warm-up steps done, counted in steps. */
        double done = (double)(step - warm) / (double)(s->total_epochs * spe - warm);
        return done >= 1 ? 0 : s->peak * (1 + cos(PI * done)) / 2;
    }
    {
        int passed = 0; /* milestones whose first step is at or before this step */
        for (int i = 0; i < s->nmilestones; i++)
            passed += step >= (int64_t)s->milestones[i] * spe;
        return s->peak * pow(10, -passed);
    }
}

static void _near(double have, double want, const char *what, int64_t step)
{
    if (fabs(have - want) > 1e-12 * (fabs(want) + 1e-300) + 1e-15)
        fail_msg("%s, step %lld: learning rate %.17g, expected %.17g", what, (long long)step, have, want);
}

static void test_warmup_by_step(void **state)
{
    dlt_schedule s = _goyal(0);
    (void)state;
    /* 50 warm-up steps: the first at 1/50 of the peak, one more fiftieth each step. */
    _near(dlt_schedule_lr(&s, 0), 0.4 / 50, "warm-up", 0);
    _near(dlt_schedule_lr(&s, 1), 0.4 * 2 / 50, "warm-up", 1);
    _near(dlt_schedule_lr(&s, 24), 0.4 / 2, "warm-up", 24);
    _near(dlt_schedule_lr(&s, 49), 0.4, "warm-up, last step", 49);
    _near(dlt_schedule_lr(&s, 50), 0.4, "after warm-up", 50);
    for (int64_t k = 1; k < 50; k++)
        assert_true(dlt_schedule_lr(&s, k) > dlt_schedule_lr(&s, k - 1));
    /* Half an epoch of warm-up: 5 steps. */
    s.warmup_epochs = 0.5;
    _near(dlt_schedule_lr(&s, 0), 0.4 / 5, "half-epoch warm-up", 0);
    _near(dlt_schedule_lr(&s, 4), 0.4, "half-epoch warm-up", 4);
    /* No warm-up, and one shorter than a step: the peak from the first step. */
    s.warmup_epochs = 0;
    _near(dlt_schedule_lr(&s, 0), 0.4, "no warm-up", 0);
    s.warmup_epochs = 0.05;
    _near(dlt_schedule_lr(&s, 0), 0.4, "warm-up under one step", 0);
}

static void test_step_decay_at_milestones(void **state)
{
    dlt_schedule s = _goyal(0);
    (void)state;
    /* Each milestone's first step is epoch x steps per epoch; the step before keeps the old rate. */
    _near(dlt_schedule_lr(&s, 299), 0.4, "before the 30-epoch milestone", 299);
    _near(dlt_schedule_lr(&s, 300), 0.04, "30-epoch milestone", 300);
    _near(dlt_schedule_lr(&s, 599), 0.04, "before the 60-epoch milestone", 599);
    _near(dlt_schedule_lr(&s, 600), 0.004, "60-epoch milestone", 600);
    _near(dlt_schedule_lr(&s, 800), 0.0004, "80-epoch milestone", 800);
    _near(dlt_schedule_lr(&s, 5000), 0.0004, "past the last epoch", 5000);
    for (int64_t k = 0; k < 1000; k++)
        _near(dlt_schedule_lr(&s, k), _reference(&s, k), "step decay", k);
    /* No milestones: the peak after warm-up, for ever. */
    s.nmilestones = 0;
    _near(dlt_schedule_lr(&s, 899), 0.4, "no milestones", 899);
    /* Milestones with 7 steps an epoch (an epoch boundary inside no round number). */
    s = _goyal(0);
    s.steps_per_epoch = 7;
    for (int64_t k = 0; k < 700; k++)
        _near(dlt_schedule_lr(&s, k), _reference(&s, k), "step decay, 7 steps an epoch", k);
}

static void test_cosine_per_step(void **state)
{
    dlt_schedule s = _goyal(1);
    (void)state;
    _near(dlt_schedule_lr(&s, 50), 0.4, "cosine, first step after warm-up", 50);
    /* Half way between the end of warm-up (step 50) and the end (step 900): step 475. */
    _near(dlt_schedule_lr(&s, 475), 0.2, "cosine, half way", 475);
    _near(dlt_schedule_lr(&s, 900), 0, "cosine, end", 900);
    _near(dlt_schedule_lr(&s, 2000), 0, "cosine, past the end", 2000);
    /* Per step, not per epoch: two steps of one epoch differ. */
    assert_true(dlt_schedule_lr(&s, 301) < dlt_schedule_lr(&s, 300));
    for (int64_t k = 0; k <= 950; k++)
        _near(dlt_schedule_lr(&s, k), _reference(&s, k), "cosine", k);
    for (int64_t k = 51; k <= 900; k++)
        assert_true(dlt_schedule_lr(&s, k) < dlt_schedule_lr(&s, k - 1));
    /* Milestones mean nothing to the cosine. */
    s.nmilestones = 0;
    _near(dlt_schedule_lr(&s, 300), _reference(&s, 300), "cosine without milestones", 300);
    s = _goyal(1);
    s.steps_per_epoch = 7;
    s.warmup_epochs = 2;
    s.total_epochs = 12;
    for (int64_t k = 0; k <= 90; k++)
        _near(dlt_schedule_lr(&s, k), _reference(&s, k), "cosine, 7 steps an epoch", k);
}

/* A schedule without a known epoch length (0 steps an epoch) counts each step as an epoch. */
static void test_unknown_epoch_length(void **state)
{
    dlt_schedule s = _goyal(0);
    (void)state;
    s.steps_per_epoch = 0;
    _near(dlt_schedule_lr(&s, 0), 0.4 / 5, "0 steps an epoch, warm-up", 0);
    _near(dlt_schedule_lr(&s, 29), 0.4, "0 steps an epoch", 29);
    _near(dlt_schedule_lr(&s, 30), 0.04, "0 steps an epoch, first milestone", 30);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_warmup_by_step),
        cmocka_unit_test(test_step_decay_at_milestones),
        cmocka_unit_test(test_cosine_per_step),
        cmocka_unit_test(test_unknown_epoch_length),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
