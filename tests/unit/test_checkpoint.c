/* SPDX-License-Identifier: Apache-2.0 */
/* trainer/checkpoint/checkpoint.c: a saved pair loads back bit for bit (parameters, momentum, BN
 * statistics and counters, step, epoch, seed, settings, overrides); verify checks the pair's size
 * and CRCs and names what is damaged; a load refuses another architecture and leaves the network
 * as it was; fine-tuning weights with another class count keep the classifier; the directory scan
 * picks the newest valid pair and says why it passed over each newer one; after a rollback it
 * follows the newest line and its parent chain before the abandoned line's higher steps, and
 * checkpoints without lines come by step. */
#include "config.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/unit/tmp_dir.h"

#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/safetensors.h"
#include "trainer/model/network.h"

typedef struct {
    dlt_backend *be;
    dlt_net net;
} _model;

static void _open(_model *m, const char *arch, int classes, uint64_t seed)
{
    dlt_model_config cfg = {.width = 0.125f, .image = 32, .classes = classes, .batch = 2};
    dlt_err err = DLT_ERR_INIT;
    assert_int_equal(dlt_model_parse_arch(arch, &cfg, dlt_err_fresh(&err)), 0);
    assert_int_equal(dlt_backend_cpu_create(&m->be, DLT_PREC_FP32, dlt_err_fresh(&err)), 0);
    if (dlt_net_create(&m->net, &cfg, m->be, dlt_err_fresh(&err)) != 0)
        fail_msg("%s", err.msg);
    dlt_net_init_params(&m->net, seed, 1);
    /* Every buffer a checkpoint carries gets values a fresh network does not have. */
    for (size_t i = 0; i < m->net.model.nparams; i++)
        m->net.momentum[i] = (float)i * 1e-3f + (float)seed;
    for (size_t i = 0; i < m->net.model.nstats; i++)
        m->net.stats[i] += (float)(i % 7) * 0.25f + (float)seed;
    for (int i = 0; i < m->net.model.nbn; i++)
        m->net.bn_batches[i] = 1000 + i + (int64_t)seed;
}

static void _close(_model *m)
{
    dlt_net_destroy(&m->net);
    m->be->ops->destroy(m->be);
}

static dlt_train_state _state(int64_t step)
{
    dlt_train_state st;
    memset(&st, 0, sizeof(st));
    st.step = step;
    st.epoch = step / 10;
    st.seed = 12345678901234ULL;
    snprintf(st.config, sizeof(st.config), "arch=resnet18 classes=5 batch=2 lr=0.1");
    snprintf(st.history, sizeof(st.history), "step 40: --batch 1 -> 2");
    st.class_names = "cat\ndog\nemu\nfox\ngnu\n";
    return st;
}

static void _save(_model *m, const char *dir, int64_t step, char *path, size_t len)
{
    dlt_train_state st = _state(step);
    dlt_err err = DLT_ERR_INIT;
    if (dlt_checkpoint_save(&m->net, &st, dir, path, len, dlt_err_fresh(&err)) != 0)
        fail_msg("save: %s", err.msg);
}

/* Changes one byte of a file, at offset from its end when from_end, else from its start. */
static void _flip(const char *path, long off, int from_end)
{
    FILE *f = fopen(path, "r+b");
    int c;
    assert_non_null(f);
    assert_int_equal(fseek(f, from_end ? -off : off, from_end ? SEEK_END : SEEK_SET), 0);
    c = fgetc(f);
    assert_int_equal(fseek(f, -1, SEEK_CUR), 0);
    fputc(c ^ 0x5a, f);
    fclose(f);
}

static void test_round_trip(void **state)
{
    _model a, b;
    char *dir = tmp_dir_make("checkpoint"), path[512], want[600], *names = NULL;
    dlt_err err = DLT_ERR_INIT;
    dlt_train_state st;
    (void)state;
    _open(&a, "resnet18", 5, 1);
    _open(&b, "resnet18", 5, 2);
    _save(&a, dir, 120, path, sizeof(path));
    snprintf(want, sizeof(want), "%s/ckpt-00000120.safetensors", dir);
    assert_string_equal(path, want);
    assert_int_equal(dlt_checkpoint_state_path(path, want, sizeof(want)), 0);
    assert_int_equal(access(want, R_OK), 0);
    assert_non_null(strstr(want, "/ckpt-00000120.state.safetensors"));
    memset(&st, 0, sizeof(st));
    if (dlt_checkpoint_load(&b.net, path, &st, dlt_err_fresh(&err)) != 0)
        fail_msg("load: %s", err.msg);
    assert_memory_equal(b.net.params, a.net.params, a.net.model.nparams * sizeof(float));
    assert_memory_equal(b.net.momentum, a.net.momentum, a.net.model.nparams * sizeof(float));
    assert_memory_equal(b.net.stats, a.net.stats, a.net.model.nstats * sizeof(float));
    assert_memory_equal(b.net.bn_batches, a.net.bn_batches, (size_t)a.net.model.nbn * sizeof(int64_t));
    assert_int_equal(st.step, 120);
    assert_int_equal(st.epoch, 12);
    assert_true(st.seed == 12345678901234ULL);
    assert_string_equal(st.config, "arch=resnet18 classes=5 batch=2 lr=0.1");
    assert_string_equal(st.history, "step 40: --batch 1 -> 2");
    dlt_checkpoint_class_names(path, &names);
    assert_non_null(names);
    assert_string_equal(names, "cat\ndog\nemu\nfox\ngnu\n");
    free(names);
    _close(&a);
    _close(&b);
    tmp_dir_remove(dir);
}

static void test_verify_names_the_damage(void **state)
{
    _model a;
    char *dir = tmp_dir_make("checkpoint"), path[512], spath[600], cmd[2048];
    dlt_err err = DLT_ERR_INIT;
    dlt_checkpoint_info info;
    (void)state;
    _open(&a, "resnet18", 5, 1);
    _save(&a, dir, 7, path, sizeof(path));
    assert_int_equal(dlt_checkpoint_state_path(path, spath, sizeof(spath)), 0);
    assert_int_equal(dlt_checkpoint_verify(path, &info, dlt_err_fresh(&err)), 0);
    assert_int_equal(info.verified, 1);
    assert_int_equal(info.state_data_verified, 1);
    assert_int_equal(info.tensors, a.net.model.nentries);
    assert_int_equal(info.step, 7);
    assert_int_equal(info.epoch, 0);
    assert_string_equal(info.config, "arch=resnet18 classes=5 batch=2 lr=0.1");
    assert_string_equal(info.history, "step 40: --batch 1 -> 2");

    /* One byte of the model file's data changed: its CRC no longer matches the state file's. */
    _flip(path, 3, 1);
    assert_int_not_equal(dlt_checkpoint_verify(path, &info, dlt_err_fresh(&err)), 0);
    assert_non_null(strstr(err.msg, "CRC-32"));
    assert_non_null(strstr(err.msg, "changed or damaged"));
    _flip(path, 3, 1);
    assert_int_equal(dlt_checkpoint_verify(path, &info, dlt_err_fresh(&err)), 0);

    /* Cut short: called truncated, with both sizes. */
    snprintf(cmd, sizeof(cmd), "cp '%s' '%s.keep' && truncate -s -100 '%s'", path, path, path);
    assert_int_equal(system(cmd), 0);
    assert_int_not_equal(dlt_checkpoint_verify(path, &info, dlt_err_fresh(&err)), 0);
    assert_non_null(strstr(err.msg, "truncated"));
    snprintf(cmd, sizeof(cmd), "mv '%s.keep' '%s'", path, path);
    assert_int_equal(system(cmd), 0);

    /* The state file's own data damaged: refused before anything it records is believed. */
    _flip(spath, 2, 1);
    assert_int_not_equal(dlt_checkpoint_verify(path, &info, dlt_err_fresh(&err)), 0);
    assert_non_null(strstr(err.msg, "the state file was damaged"));
    {
        _model b;
        dlt_train_state st;
        _open(&b, "resnet18", 5, 2);
        assert_int_not_equal(dlt_checkpoint_load(&b.net, path, &st, dlt_err_fresh(&err)), 0);
        assert_non_null(strstr(err.msg, "the state file was damaged"));
        _close(&b);
    }

    /* Without a state file: readable, not verified, not an error. */
    assert_int_equal(unlink(spath), 0);
    assert_int_equal(dlt_checkpoint_verify(path, &info, dlt_err_fresh(&err)), 0);
    assert_int_equal(info.verified, 0);
    assert_int_equal(info.step, -1);
    assert_int_equal(info.tensors, a.net.model.nentries);
    _close(&a);
    tmp_dir_remove(dir);
}

static void test_load_refuses_another_model(void **state)
{
    _model a, b;
    char *dir = tmp_dir_make("checkpoint"), path[512];
    dlt_err err = DLT_ERR_INIT;
    float *before;
    dlt_train_state st;
    (void)state;
    _open(&a, "resnet18", 5, 1);
    _open(&b, "resnet34", 5, 2);
    _save(&a, dir, 3, path, sizeof(path));
    before = malloc(b.net.model.nparams * sizeof(float));
    memcpy(before, b.net.params, b.net.model.nparams * sizeof(float));
    assert_int_not_equal(dlt_checkpoint_load(&b.net, path, &st, dlt_err_fresh(&err)), 0);
    assert_non_null(strstr(err.msg, "has no tensor layer1.2."));
    assert_memory_equal(b.net.params, before, b.net.model.nparams * sizeof(float));
    free(before);
    /* The other way round: a resnet34 file holds every tensor of resnet18 with its shape (layerN.0
     * and .1 alike) and more (layer1.2, ...): refused for the extra ones, by load and by --init. */
    {
        char path34[512], want[64];
        int fc_classes = -1;
        _model c;
        _open(&c, "resnet18", 5, 3);
        _save(&b, dir, 4, path34, sizeof(path34));
        snprintf(want, sizeof(want), "has %d tensors this resnet18 does not have",
                 b.net.model.nentries - c.net.model.nentries);
        assert_true(b.net.model.nentries > c.net.model.nentries);
        assert_int_not_equal(dlt_checkpoint_load(&c.net, path34, &st, dlt_err_fresh(&err)), 0);
        if (!strstr(err.msg, want))
            fail_msg("load of a resnet34 file into resnet18: '%s', expected '%s'", err.msg, want);
        assert_int_not_equal(dlt_checkpoint_load_init(&c.net, path34, &fc_classes, dlt_err_fresh(&err)), 0);
        if (!strstr(err.msg, want))
            fail_msg("--init from a resnet34 file into resnet18: '%s', expected '%s'", err.msg, want);
        _close(&c);
    }
    _close(&b);
    /* The same architecture with another class count: the classifier's shape is named. */
    _open(&b, "resnet18", 7, 2);
    assert_int_not_equal(dlt_checkpoint_load(&b.net, path, &st, dlt_err_fresh(&err)), 0);
    assert_non_null(strstr(err.msg, "tensor fc.weight is F32 [5,"));
    assert_non_null(strstr(err.msg, "this model needs F32 [7,"));
    _close(&b);
    _close(&a);
    tmp_dir_remove(dir);
}

static void test_init_weights_keep_another_classifier(void **state)
{
    _model a, b;
    char *dir = tmp_dir_make("checkpoint"), path[512];
    dlt_err err = DLT_ERR_INIT;
    int fc_classes = -1;
    float *fc_before;
    size_t fc_off = 0, fc_len = 0;
    (void)state;
    _open(&a, "resnet18", 5, 1);
    _open(&b, "resnet18", 7, 2);
    _save(&a, dir, 3, path, sizeof(path));
    for (int e = 0; e < b.net.model.nentries; e++)
        if (!strcmp(b.net.model.entries[e].name, "fc.weight"))
            fc_off = b.net.model.entries[e].off, fc_len = b.net.model.entries[e].len;
    assert_true(fc_len > 0);
    fc_before = malloc(fc_len * sizeof(float));
    memcpy(fc_before, b.net.params + fc_off, fc_len * sizeof(float));
    if (dlt_checkpoint_load_init(&b.net, path, &fc_classes, dlt_err_fresh(&err)) != 0)
        fail_msg("load_init: %s", err.msg);
    assert_int_equal(fc_classes, 5);
    assert_memory_equal(b.net.params + fc_off, fc_before, fc_len * sizeof(float));
    /* Everything but the classifier is the file's. */
    for (int e = 0; e < b.net.model.nentries; e++) {
        const dlt_state_entry *en = &b.net.model.entries[e];
        if (en->is_param && strncmp(en->name, "fc.", 3) != 0)
            assert_memory_equal(b.net.params + en->off, a.net.params + en->off, en->len * sizeof(float));
    }
    assert_memory_equal(b.net.stats, a.net.stats, a.net.model.nstats * sizeof(float));
    free(fc_before);
    _close(&b);
    /* The same class count: fc_classes 0, all of it loaded. */
    _open(&b, "resnet18", 5, 2);
    assert_int_equal(dlt_checkpoint_load_init(&b.net, path, &fc_classes, dlt_err_fresh(&err)), 0);
    assert_int_equal(fc_classes, 0);
    assert_memory_equal(b.net.params, a.net.params, a.net.model.nparams * sizeof(float));
    _close(&b);
    _close(&a);
    tmp_dir_remove(dir);
}

static void test_scan_picks_the_newest_valid(void **state)
{
    _model a;
    char *dir = tmp_dir_make("checkpoint"), path[512], p20[512], p30[512], s40[600], cmd[2048];
    dlt_err err = DLT_ERR_INIT;
    dlt_checkpoint_scan s;
    (void)state;
    /* A directory that is not there has no checkpoint; that is not an error. */
    snprintf(path, sizeof(path), "%s/none", dir);
    assert_int_equal(dlt_checkpoint_scan_dir(path, &s, dlt_err_fresh(&err)), 0);
    assert_int_equal(s.candidates, 0);
    assert_int_equal(s.found, 0);
    assert_int_equal(dlt_checkpoint_dir_max_step(path), -1);

    _open(&a, "resnet18", 5, 1);
    _save(&a, dir, 10, path, sizeof(path));
    _save(&a, dir, 20, p20, sizeof(p20));
    _save(&a, dir, 30, p30, sizeof(p30));
    _save(&a, dir, 40, path, sizeof(path));
    /* 40: only its state file; 30: only its model file; 20: damaged; 10: valid. */
    assert_int_equal(unlink(path), 0);
    assert_int_equal(dlt_checkpoint_state_path(p30, s40, sizeof(s40)), 0);
    assert_int_equal(unlink(s40), 0);
    _flip(p20, 5, 1);
    /* Not checkpoints: a save that never finished (its temporary name), a name without a step,
     * another file. */
    snprintf(cmd, sizeof(cmd),
             "touch '%s/ckpt-x.safetensors' '%s/notes.txt' '%s/ckpt-00000090.safetensors.tmp.77' "
             "'%s/ckpt-00000095.state.safetensors.tmp.77'",
             dir, dir, dir, dir);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(dlt_checkpoint_dir_max_step(dir), 40);
    assert_int_equal(dlt_checkpoint_scan_dir(dir, &s, dlt_err_fresh(&err)), 0);
    assert_int_equal(s.candidates, 4);
    assert_int_equal(s.found, 1);
    assert_int_equal(s.step, 10);
    assert_non_null(strstr(s.path, "/ckpt-00000010.safetensors"));
    assert_int_equal(s.refused, 3);
    assert_non_null(strstr(s.refusal[0].path, "ckpt-00000040.safetensors"));
    assert_non_null(strstr(s.refusal[0].why, "only its state file"));
    assert_non_null(strstr(s.refusal[1].path, "ckpt-00000030.safetensors"));
    assert_non_null(strstr(s.refusal[1].why, "no state file beside it"));
    assert_non_null(strstr(s.refusal[2].path, "ckpt-00000020.safetensors"));
    assert_non_null(strstr(s.refusal[2].why, "CRC-32"));

    /* None valid: found 0, every one refused. */
    snprintf(cmd, sizeof(cmd), "rm '%s/ckpt-00000010.state.safetensors'", dir);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(dlt_checkpoint_scan_dir(dir, &s, dlt_err_fresh(&err)), 0);
    assert_int_equal(s.found, 0);
    assert_int_equal(s.refused, 4);
    _close(&a);
    tmp_dir_remove(dir);
}

static void _save_line(_model *m, const char *dir, int64_t step, int64_t line, int64_t pline, int64_t pstep)
{
    dlt_train_state st = _state(step);
    dlt_err err = DLT_ERR_INIT;
    char path[512];
    st.line = line;
    st.parent_line = pline;
    st.parent_step = pstep;
    if (dlt_checkpoint_save(&m->net, &st, dir, path, sizeof(path), dlt_err_fresh(&err)) != 0)
        fail_msg("save: %s", err.msg);
}

static void _expect_order(const char *dir, const long long *want, int n)
{
    dlt_checkpoint_entry *l;
    dlt_err err = DLT_ERR_INIT;
    int got;
    assert_int_equal(dlt_checkpoint_list(dir, &l, &got, &err), 0);
    assert_int_equal(got, n);
    for (int i = 0; i < n; i++)
        assert_int_equal(l[i].step, want[i]);
    free(l);
}

static void test_lines_after_a_rollback(void **state)
{
    _model a;
    char *dir = tmp_dir_make("checkpoint"), *old = tmp_dir_make("checkpoint"), path[512];
    dlt_checkpoint_lineage li;
    dlt_checkpoint_scan s;
    dlt_err err = DLT_ERR_INIT;
    const long long chain[] = {6, 5, 4, 2, 8}, by_step[] = {8, 6, 4, 2};
    (void)state;
    _open(&a, "resnet18", 5, 1);
    for (int st = 2; st <= 8; st += 2)
        _save_line(&a, dir, st, 1, -1, -1);
    /* back to 4, on to 6 (rewriting the old line's 6): line 2 branched from line 1 at 4 */
    _save_line(&a, dir, 5, 2, 1, 4);
    _save_line(&a, dir, 6, 2, 1, 4);
    _expect_order(dir, chain, 5);
    assert_int_equal(dlt_checkpoint_scan_dir(dir, &s, dlt_err_fresh(&err)), 0);
    assert_int_equal(s.step, 6);
    snprintf(path, sizeof(path), "%s/ckpt-00000006.safetensors", dir);
    assert_int_equal(dlt_checkpoint_lineage_of(path, &li), 0);
    assert_int_equal(li.line, 2);
    assert_int_equal(li.parent_line, 1);
    assert_int_equal(li.parent_step, 4);
    /* no lines recorded (the previous version's files): by step, as before */
    for (int st = 2; st <= 8; st += 2)
        _save_line(&a, old, st, 0, -1, -1);
    _expect_order(old, by_step, 4);
    snprintf(path, sizeof(path), "%s/ckpt-00000004.safetensors", old);
    assert_int_equal(dlt_checkpoint_lineage_of(path, &li), 0);
    assert_int_equal(li.line, 0);
    assert_int_equal(li.parent_step, -1);
    _close(&a);
    tmp_dir_remove(dir);
    tmp_dir_remove(old);
}

static void test_config_field(void **state)
{
    const char *cfg = "arch=resnet50 base_lr=0.1 lr=0.4 batch=32 empty= last=x";
    char v[16];
    (void)state;
    assert_int_equal(dlt_checkpoint_config_field(cfg, "lr", v, sizeof(v)), 1);
    assert_string_equal(v, "0.4"); /* not base_lr's */
    assert_int_equal(dlt_checkpoint_config_field(cfg, "arch", v, sizeof(v)), 1);
    assert_string_equal(v, "resnet50");
    assert_int_equal(dlt_checkpoint_config_field(cfg, "last", v, sizeof(v)), 1);
    assert_string_equal(v, "x");
    assert_int_equal(dlt_checkpoint_config_field(cfg, "empty", v, sizeof(v)), 1);
    assert_string_equal(v, "");
    assert_int_equal(dlt_checkpoint_config_field(cfg, "batc", v, sizeof(v)), 0);
    assert_int_equal(dlt_checkpoint_config_field(cfg, "seed", v, sizeof(v)), 0);
    assert_int_equal(dlt_checkpoint_config_field("", "lr", v, sizeof(v)), 0);
    assert_int_equal(dlt_checkpoint_config_field(NULL, "lr", v, sizeof(v)), 0);
}

static void test_state_path(void **state)
{
    char out[256];
    (void)state;
    assert_int_equal(dlt_checkpoint_state_path("/d/ckpt-00000001.safetensors", out, sizeof(out)), 0);
    assert_string_equal(out, "/d/ckpt-00000001.state.safetensors");
    assert_int_equal(dlt_checkpoint_state_path("/d/model.bin", out, sizeof(out)), 0);
    assert_string_equal(out, "/d/model.bin.state");
}

/* Metadata strings as JSON wants them (RFC 8259 section 7): a quote and a backslash escaped with a
 * backslash, a control character as \u00XX, the rest (UTF-8 included) as is; read back whole. */
static void test_metadata_escaped(void **state)
{
    char *dir = tmp_dir_make("checkpoint"), path[512];
    const char *value = "a\"b\\c\td\x01"
                        "e\xc3\xa9"; /* a"b\c<TAB>d<SOH>e, e-acute */
    const char *meta[] = {"config", value, "k\\\"", "v"};
    const float x[2] = {1.5f, -2.0f};
    dlt_st_tensor t = {"w", "F32", 1, {2}, x, sizeof(x)};
    dlt_st_file f;
    dlt_err err = DLT_ERR_INIT;
    (void)state;
    snprintf(path, sizeof(path), "%s/m.safetensors", dir);
    if (dlt_st_write(path, &t, 1, meta, 2, dlt_err_fresh(&err)) != 0)
        fail_msg("write: %s", err.msg);
    if (dlt_st_load(&f, path, dlt_err_fresh(&err)) != 0)
        fail_msg("load: %s", err.msg);
    {
        const char *hdr = (const char *)f.buf + 8;
        size_t hlen = f.data_off - 8;
        const char *want = "\"config\":\"a\\\"b\\\\c\\u0009d\\u0001e\xc3\xa9\"", *want2 = "\"k\\\\\\\"\":\"v\"";
        if (!memmem(hdr, hlen, want, strlen(want)) || !memmem(hdr, hlen, want2, strlen(want2)))
            fail_msg("header %.*s lacks %s or %s", (int)hlen, hdr, want, want2);
    }
    assert_non_null(dlt_st_meta(&f, "config"));
    assert_string_equal(dlt_st_meta(&f, "config"), value);
    assert_non_null(dlt_st_meta(&f, "k\\\""));
    assert_string_equal(dlt_st_meta(&f, "k\\\""), "v");
    assert_memory_equal(dlt_st_data(&f, dlt_st_find(&f, "w")), x, sizeof(x));
    dlt_st_free(&f);
    tmp_dir_remove(dir);
}

/* Hand-built safetensors files (another tool's, for --init): the tensors must tile the data
 * section exactly: a gap, an overlap or bytes after the last tensor are refused, naming it. */
static int _parse_json(const char *json, size_t data_len, dlt_err *err)
{
    size_t n = strlen(json), total = 8 + n + data_len;
    uint8_t *buf = calloc(1, total);
    dlt_st_file f;
    int rc;
    for (int i = 0; i < 8; i++)
        buf[i] = (uint8_t)(n >> (8 * i));
    memcpy(buf + 8, json, n);
    rc = dlt_st_parse(&f, buf, total, err);
    if (rc == 0)
        dlt_st_free(&f);
    free(buf);
    return rc;
}

static void test_parse_tiles_the_data(void **state)
{
    dlt_err err = DLT_ERR_INIT;
    (void)state;
    assert_int_equal(_parse_json("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                                 "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
                                 12, dlt_err_fresh(&err)),
                     0);
    /* each dtype's size: 2 bytes an F16 or BF16 element, 8 an I64 */
    assert_int_equal(_parse_json("{\"h\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,4]},"
                                 "\"b\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[4,8]},"
                                 "\"n\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[8,16]}}",
                                 16, dlt_err_fresh(&err)),
                     0);
    assert_int_equal(_parse_json("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                                 "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
                                 12, dlt_err_fresh(&err)),
                     -EINVAL);
    assert_non_null(strstr(err.msg, "tensor b: data overlaps another or leaves a gap"));
    assert_int_equal(_parse_json("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                                 "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
                                 12, dlt_err_fresh(&err)),
                     -EINVAL);
    assert_non_null(strstr(err.msg, "overlaps another or leaves a gap"));
    assert_int_equal(
        _parse_json("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 8, dlt_err_fresh(&err)),
        -EINVAL);
    assert_non_null(strstr(err.msg, "4 bytes after the last tensor"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_tiles_the_data),
        cmocka_unit_test(test_metadata_escaped),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_verify_names_the_damage),
        cmocka_unit_test(test_load_refuses_another_model),
        cmocka_unit_test(test_init_weights_keep_another_classifier),
        cmocka_unit_test(test_scan_picks_the_newest_valid),
        cmocka_unit_test(test_lines_after_a_rollback),
        cmocka_unit_test(test_config_field),
        cmocka_unit_test(test_state_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
