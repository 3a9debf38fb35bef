/* SPDX-License-Identifier: Apache-2.0 */
/* Resuming with other settings: dlt_resume_compare refuses each recorded setting that differs
 * (naming both values) unless --resume-override names it; the model's shape never changes;
 * dlt_resume_override_check refuses unknown and fixed names; what a run records round-trips. */
#include "config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "trainer/train/checkpointing.h"

static void _texts(char *rec, char *now, size_t len, void (*change)(dlt_train_config *c, int *world))
{
    dlt_train_config c;
    int world = 1;
    dlt_train_config_defaults(&c);
    c.model.batch = 8;
    dlt_run_config_text(&c, world, rec, len);
    change(&c, &world);
    dlt_run_config_text(&c, world, now, len);
}

static void _same(dlt_train_config *c, int *world)
{
    (void)c;
    (void)world;
}

static void _many(dlt_train_config *c, int *world)
{
    c->model.batch = 16;
    c->base_lr = 0.2;
    c->seed = 7;
    c->cosine = 1;
    c->momentum = 0.8;
    c->backend.precision = DLT_PREC_BF16;
    c->synthetic_size = 1000;
    *world = 4;
}

static void test_same_settings_resume(void **state)
{
    char rec[1024], now[1024], refused[1024], changed[1024];
    (void)state;
    _texts(rec, now, sizeof(rec), _same);
    assert_int_equal(dlt_resume_compare(rec, now, NULL, refused, sizeof(refused), changed, sizeof(changed)), 0);
    assert_string_equal(refused, "");
    assert_string_equal(changed, "");
}

static void test_each_difference_named_with_both_values(void **state)
{
    char rec[1024], now[1024], refused[2048], changed[1024];
    (void)state;
    _texts(rec, now, sizeof(rec), _many);
    /* batch, ranks, precision, lr, momentum, schedule, seed, synthetic-size; epochs only matters
     * under cosine, and it did not change. */
    assert_int_equal(dlt_resume_compare(rec, now, NULL, refused, sizeof(refused), changed, sizeof(changed)), 8);
    assert_non_null(strstr(refused, "--batch: checkpoint 8, now 16"));
    assert_non_null(strstr(refused, "the rank count: checkpoint 1, now 4"));
    assert_non_null(strstr(refused, "--lr: checkpoint 0.1, now 0.2"));
    assert_non_null(strstr(refused, "--seed: checkpoint 1, now 7"));
    assert_non_null(strstr(refused, "--schedule: checkpoint step, now cosine"));
    assert_non_null(strstr(refused, "--momentum: checkpoint 0.9, now 0.8"));
    assert_non_null(strstr(refused, "--precision: checkpoint fp32, now bf16"));
    assert_non_null(strstr(refused, "--synthetic-size: checkpoint 1281167, now 1000"));
    assert_string_equal(changed, "");
}

static void test_override_allows_named_only(void **state)
{
    char rec[1024], now[1024], refused[2048], changed[1024];
    (void)state;
    _texts(rec, now, sizeof(rec), _many);
    assert_int_equal(dlt_resume_compare(rec, now, "batch,ranks,lr,seed,schedule,momentum,precision", refused,
                                        sizeof(refused), changed, sizeof(changed)),
                     1);
    assert_string_equal(refused, "--synthetic-size: checkpoint 1281167, now 1000");
    assert_non_null(strstr(changed, "--batch 8 -> 16"));
    assert_non_null(strstr(changed, "the rank count 1 -> 4"));
    /* a prefix of a name is not the name */
    assert_int_equal(dlt_resume_compare(rec, now, "batc,synthetic-size,ranks,lr,seed,schedule,momentum,precision",
                                        refused, sizeof(refused), changed, sizeof(changed)),
                     1);
    assert_string_equal(refused, "--batch: checkpoint 8, now 16");
}

static void test_model_shape_never_changes(void **state)
{
    char refused[1024], changed[1024];
    (void)state;
    assert_int_equal(dlt_resume_compare("arch=resnet18 classes=10 batch=8", "arch=resnet50 classes=10 batch=8", "arch",
                                        refused, sizeof(refused), changed, sizeof(changed)),
                     1);
    assert_string_equal(refused, "--arch: checkpoint resnet18, now resnet50 (cannot change)");
}

static void test_epochs_only_under_cosine(void **state)
{
    char refused[1024], changed[1024];
    (void)state;
    assert_int_equal(dlt_resume_compare("schedule=step epochs=2", "schedule=step epochs=3", NULL, refused,
                                        sizeof(refused), changed, sizeof(changed)),
                     0);
    assert_int_equal(dlt_resume_compare("schedule=cosine epochs=2", "schedule=cosine epochs=3", NULL, refused,
                                        sizeof(refused), changed, sizeof(changed)),
                     1);
    assert_string_equal(refused, "--epochs: checkpoint 2, now 3");
    /* an older checkpoint that did not record a setting: not compared */
    assert_int_equal(dlt_resume_compare("schedule=step", "schedule=step milestones=1,2", NULL, refused, sizeof(refused),
                                        changed, sizeof(changed)),
                     0);
}

static void test_override_names_checked(void **state)
{
    dlt_err err = DLT_ERR_INIT;
    (void)state;
    assert_int_equal(dlt_resume_override_check("batch,lr,ranks", dlt_err_fresh(&err)), 0);
    assert_int_not_equal(dlt_resume_override_check("batch,foo", dlt_err_fresh(&err)), 0);
    assert_non_null(strstr(err.msg, "unknown setting 'foo'"));
    assert_int_not_equal(dlt_resume_override_check("classes", dlt_err_fresh(&err)), 0);
    assert_non_null(strstr(err.msg, "classes cannot change on resume"));
    assert_int_not_equal(dlt_resume_override_check("image-size", dlt_err_fresh(&err)), 0);
    assert_int_not_equal(dlt_resume_override_check("", dlt_err_fresh(&err)), 0);
    assert_int_not_equal(dlt_resume_override_check("batch,", dlt_err_fresh(&err)), 0);
    assert_int_not_equal(dlt_resume_override_check("batch,,lr", dlt_err_fresh(&err)), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_settings_resume),
        cmocka_unit_test(test_each_difference_named_with_both_values),
        cmocka_unit_test(test_override_allows_named_only),
        cmocka_unit_test(test_model_shape_never_changes),
        cmocka_unit_test(test_epochs_only_under_cosine),
        cmocka_unit_test(test_override_names_checked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
