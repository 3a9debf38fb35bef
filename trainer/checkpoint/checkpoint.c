/* SPDX-License-Identifier: Apache-2.0 */
/* checkpoint: torchvision-named model file + state file, atomic, validated. */
#include "config.h"

#include "trainer/checkpoint/checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/crc32.h"
#include "common/io.h"
#include "common/status.h"
#include "trainer/checkpoint/safetensors.h"

/* The value of class_names_encoding when the names are stored percent-encoded. */
#define CLASS_NAMES_PERCENT "percent-encoded bytes (RFC 3986): the class folders' names are not UTF-8"

/* Whether s is well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, at most U+10FFFF). */
static int _utf8_valid(const char *str)
{
    const unsigned char *s = (const unsigned char *)str;
    while (*s) {
        int n = s[0] < 0x80                    ? 1
                : s[0] >= 0xc2 && s[0] <= 0xdf ? 2
                : s[0] >= 0xe0 && s[0] <= 0xef ? 3
                : s[0] >= 0xf0 && s[0] <= 0xf4 ? 4
                                               : 0;
        if (n == 0)
            return 0;
        for (int k = 1; k < n; k++)
            if ((s[k] & 0xc0) != 0x80)
                return 0;
        if ((n == 3 && ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] >= 0xa0))) ||
            (n == 4 && ((s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] >= 0x90))))
            return 0;
        s += n;
    }
    return 1;
}

/* The length of the well-formed UTF-8 sequence at s, or 0. */
static int _utf8_seq(const unsigned char *s)
{
    char seq[5] = {0};
    int n = s[0] < 0x80                    ? 1
            : s[0] >= 0xc2 && s[0] <= 0xdf ? 2
            : s[0] >= 0xe0 && s[0] <= 0xef ? 3
            : s[0] >= 0xf0 && s[0] <= 0xf4 ? 4
                                           : 0;
    for (int k = 0; k < n; k++) {
        if (!s[k])
            return 0;
        seq[k] = (char)s[k];
    }
    return n && _utf8_valid(seq) ? n : 0;
}

/* '%', and each byte that starts no UTF-8 sequence, as %XX; the rest as it is. */
static char *_percent_encode(const char *str)
{
    const unsigned char *s = (const unsigned char *)str;
    char *out = malloc(3 * strlen(str) + 1), *o = out;
    if (!out)
        return NULL;
    while (*s) {
        int n = *s == '%' ? 0 : _utf8_seq(s);
        if (n == 0) {
            o += sprintf(o, "%%%02X", *s);
            s++;
        } else {
            memcpy(o, s, (size_t)n);
            o += n;
            s += n;
        }
    }
    *o = '\0';
    return out;
}

static int _hex(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                  : -1;
}

static char *_percent_decode(const char *s)
{
    char *out = malloc(strlen(s) + 1), *o = out;
    if (!out)
        return NULL;
    for (; *s; s++)
        if (s[0] == '%' && _hex(s[1]) >= 0 && _hex(s[2]) >= 0) {
            *o++ = (char)(_hex(s[1]) * 16 + _hex(s[2]));
            s += 2;
        } else
            *o++ = *s;
    *o = '\0';
    return out;
}

#define FORMAT_TAG "dltrain-checkpoint-1"

static int _file_crc(const char *path, uint32_t *crc, size_t *size, dlt_err *err)
{
    FILE *f = dlt_fopen_regular(NULL, path, "rb", err);
    unsigned char *buf;
    uint32_t c = 0;
    size_t n, total = 0;
    int e;
    if (!f)
        return -errno;
    buf = malloc(1 << 16);
    if (!buf) {
        fclose(f);
        return dlt_fail(err, -ENOMEM, "out of memory reading %s", path);
    }
    errno = 0; /* fread's failure keeps read's errno (ESTALE on NFS, EIO): the cause said, not a guess */
    while ((n = fread(buf, 1, 1 << 16, f)) > 0) {
        c = dlt_crc32(c, buf, n);
        total += n;
    }
    e = ferror(f) ? (errno ? errno : EIO) : 0;
    fclose(f);
    free(buf);
    if (e) {
        return dlt_fail(err, -e, "cannot read %s: %s", path, strerror(e));
    }
    *crc = c;
    *size = total;
    return 0;
}

static void _state_path(const char *model_path, char *out, size_t outlen)
{
    size_t n = strlen(model_path);
    const char *ext = ".safetensors";
    size_t e = strlen(ext);
    if (n > e && !strcmp(model_path + n - e, ext))
        snprintf(out, outlen, "%.*s.state.safetensors", (int)(n - e), model_path);
    else
        snprintf(out, outlen, "%s.state", model_path);
}

int dlt_checkpoint_save(const dlt_net *net, const dlt_train_state *st, const char *dir, char *path, size_t pathlen,
                        dlt_err *err)
{
    const dlt_model *m = &net->model;
    dlt_st_tensor *t = calloc((size_t)m->nentries, sizeof(*t));
    char state_path[PATH_MAX], crcbuf[32], sizebuf[32], stepbuf[32], epochbuf[32], seedbuf[32];
    char model_tmp[PATH_MAX + 32], state_tmp[PATH_MAX + 32];
    char(*names)[80] = calloc((size_t)m->nentries, sizeof(*names));
    uint32_t crc;
    size_t size;
    int nt = 0, rc;

    if (!t || !names) {
        free(t);
        free(names);
        return dlt_fail(err, -ENOMEM, "out of memory");
    }
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        int code = errno;
        free(t);
        free(names);
        return dlt_fail(err, -code, "cannot create checkpoint directory %s: %s", dir, strerror(code));
    }
    snprintf(path, pathlen, "%s/ckpt-%08" PRId64 ".safetensors", dir, st->step);
    for (int i = 0; i < m->nentries; i++) {
        const dlt_state_entry *e = &m->entries[i];
        dlt_st_tensor *x = &t[nt++];
        x->name = e->name;
        x->ndim = e->ndim;
        memcpy(x->shape, e->shape, sizeof(e->shape));
        if (e->is_counter) {
            x->dtype = "I64";
            x->data = dlt_net_state_host(net, e);
            x->bytes = 8;
        } else {
            x->dtype = "F32";
            x->data = dlt_net_state_host(net, e);
            x->bytes = e->len * sizeof(float);
        }
    }
    {
        const char *meta[] = {"format", "pt", "dltrain", FORMAT_TAG, "arch", m->cfg.arch};
        rc = dlt_st_write_staged(path, t, nt, meta, 3, NULL, model_tmp, sizeof(model_tmp), err);
    }
    if (rc == 0 && (rc = _file_crc(model_tmp, &crc, &size, err)) != 0)
        unlink(model_tmp);
    if (rc == 0) {
        /* Momentum under the parameter names, prefixed. */
        nt = 0;
        for (int i = 0; i < m->nentries; i++) {
            const dlt_state_entry *e = &m->entries[i];
            dlt_st_tensor *x;
            if (!e->is_param)
                continue;
            x = &t[nt];
            snprintf(names[nt], sizeof(names[nt]), "momentum.%s", e->name);
            x->name = names[nt];
            x->dtype = "F32";
            x->ndim = e->ndim;
            memcpy(x->shape, e->shape, sizeof(e->shape));
            x->data = net->momentum + e->off;
            x->bytes = e->len * sizeof(float);
            nt++;
        }
        snprintf(crcbuf, sizeof(crcbuf), "%08x", crc);
        snprintf(sizebuf, sizeof(sizebuf), "%zu", size);
        snprintf(stepbuf, sizeof(stepbuf), "%" PRId64, st->step);
        snprintf(epochbuf, sizeof(epochbuf), "%" PRId64, st->epoch);
        snprintf(seedbuf, sizeof(seedbuf), "%" PRIu64, st->seed);
        {
            const char *slash = strrchr(path, '/');
            const char *meta[] = {"dltrain",     FORMAT_TAG, "model_file", slash ? slash + 1 : path,
                                  "model_crc32", crcbuf,     "model_size", sizebuf,
                                  "step",        stepbuf,    "epoch",      epochbuf,
                                  "seed",        seedbuf,    "config",     st->config,
                                  "state_crc32", "00000000", "overrides",  st->history};
            /* The state file carries a CRC of itself (its whole bytes, these 8 digits read as zeros): a
             * damaged state file, header included (step, settings, tensor table), is refused instead of
             * resuming with a wrong step or momentum. */
            const char *meta_classes[sizeof(meta) / sizeof(meta[0]) + 4 + 2 * DLT_CKPT_OPTIONAL_META];
            char *encoded = NULL;
            int nmeta = st->history[0] ? 10 : 9; /* "overrides" only when a resume changed a setting */
            _state_path(path, state_path, sizeof(state_path));
            /* The class names ride beside the settings, when the data has names. */
            memcpy(meta_classes, meta, sizeof(meta));
            /* Fields added since the first format, each only when known: a file without one reads
             * as before (an older dltrain wrote none of them). */
            char linebuf[32], pline[32], pstep[32], trainbuf[32], firstbuf[32];
            if (st->train_seconds > 0) {
                snprintf(trainbuf, sizeof(trainbuf), "%.3f", st->train_seconds);
                meta_classes[2 * nmeta] = "train_seconds";
                meta_classes[2 * nmeta + 1] = trainbuf;
                nmeta++;
            }
            if (st->first_start > 0) {
                snprintf(firstbuf, sizeof(firstbuf), "%.3f", st->first_start);
                meta_classes[2 * nmeta] = "first_start";
                meta_classes[2 * nmeta + 1] = firstbuf;
                nmeta++;
            }
            if (st->data[0]) {
                meta_classes[2 * nmeta] = "data";
                meta_classes[2 * nmeta + 1] = st->data;
                nmeta++;
            }
            if (st->line > 0) {
                snprintf(linebuf, sizeof(linebuf), "%" PRId64, st->line);
                meta_classes[2 * nmeta] = "line";
                meta_classes[2 * nmeta + 1] = linebuf;
                nmeta++;
            }
            if (st->parent_step >= 0 && st->parent_line >= 0 && st->parent_line < st->line) {
                snprintf(pline, sizeof(pline), "%" PRId64, st->parent_line);
                snprintf(pstep, sizeof(pstep), "%" PRId64, st->parent_step);
                meta_classes[2 * nmeta] = "parent_line";
                meta_classes[2 * nmeta + 1] = pline;
                meta_classes[2 * nmeta + 2] = "parent_step";
                meta_classes[2 * nmeta + 3] = pstep;
                nmeta += 2;
            }
            if (st->class_names) {
                /* A header must be UTF-8 JSON for every reader (Rust's safetensors refuses anything
                 * else): names that are not UTF-8 are stored percent-encoded, and said so. */
                if (!_utf8_valid(st->class_names) && !(encoded = _percent_encode(st->class_names))) {
                    free(t);
                    free(names);
                    unlink(model_tmp);
                    return dlt_fail(err, -ENOMEM, "out of memory for the class names");
                }
                meta_classes[2 * nmeta] = "class_names";
                meta_classes[2 * nmeta + 1] = encoded ? encoded : st->class_names;
                nmeta++;
                if (encoded) {
                    meta_classes[2 * nmeta] = "class_names_encoding";
                    meta_classes[2 * nmeta + 1] = CLASS_NAMES_PERCENT;
                    nmeta++;
                }
            }
            rc = dlt_st_write_staged(state_path, t, nt, meta_classes, nmeta, "state_crc32", state_tmp,
                                     sizeof(state_tmp), err);
            free(encoded);
        }
        /* Both files are on disk under temporary names before either takes its name, and the state
         * file (which makes the pair valid) comes last: a full disk or a crash while writing leaves
         * the previous checkpoints as they were; only a crash between the two renames leaves a model
         * file without its state file, which --resume auto passes over for the previous pair. */
        if (rc != 0)
            unlink(model_tmp);
        else if ((rc = dlt_st_commit(model_tmp, path, err)) != 0)
            unlink(state_tmp);
        else
            rc = dlt_st_commit(state_tmp, state_path, err);
    }
    free(t);
    free(names);
    return rc;
}

/* Checks a loaded model file against the model: every entry present with its dtype and shape. */
/* Checks every tensor of the model against f. fc_other: when not NULL, the classifier (fc.*) may
 * have another class count; *fc_other is then set when it does. */
static int _check_tensors(const dlt_net *net, const dlt_st_file *f, const char *path, int *fc_other, dlt_err *err)
{
    const dlt_model *m = &net->model;
    int extra = f->n;
    for (int i = 0; i < m->nentries; i++) {
        const dlt_state_entry *e = &m->entries[i];
        const dlt_st_entry *x = dlt_st_find(f, e->name);
        const char *want = e->is_counter ? "I64" : "F32";
        if (!x) {
            return dlt_fail(err, -EINVAL, "%s has no tensor %s: not a %s checkpoint (arch, width or classes differ?)",
                            path, e->name, m->cfg.arch);
        }
        if (fc_other && !strncmp(e->name, "fc.", 3) && !strcmp(x->dtype, want) && x->ndim == e->ndim &&
            (e->ndim == 1 || x->shape[1] == e->shape[1]) && x->shape[0] != e->shape[0]) {
            *fc_other = (int)x->shape[0]; /* the classifier of another class count: re-initialised */
            extra--;
            continue;
        }
        if (strcmp(x->dtype, want) || x->ndim != e->ndim ||
            memcmp(x->shape, e->shape, sizeof(int64_t) * (size_t)e->ndim)) {
            char have[96] = "", need[96] = "";
            for (int d = 0; d < x->ndim && d < 4; d++)
                snprintf(have + strlen(have), sizeof(have) - strlen(have), "%s%lld", d ? "," : "",
                         (long long)x->shape[d]);
            for (int d = 0; d < e->ndim; d++)
                snprintf(need + strlen(need), sizeof(need) - strlen(need), "%s%lld", d ? "," : "",
                         (long long)e->shape[d]);
            return dlt_fail(err, -EINVAL, "%s: tensor %s is %s [%s], this model needs %s [%s]", path, e->name, x->dtype,
                            have, want, need);
        }
        extra--;
    }
    if (extra) {
        return dlt_fail(err, -EINVAL, "%s has %d tensors this %s does not have (another architecture?)", path, extra,
                        m->cfg.arch);
    }
    return 0;
}

static int _check_model_file(const dlt_net *net, const dlt_st_file *f, const char *path, dlt_err *err)
{
    return _check_tensors(net, f, path, NULL, err);
}

/* Checks the state file sf (loaded from state_path) against the model file at model_path: it is
 * dltrain's, records the model file's size and CRC-32, and both match; its own data matches the
 * CRC it records (checkpoints written before that CRC existed are checked without it). */
static int _check_pair(const char *model_path, const char *state_path, const dlt_st_file *sf, dlt_checkpoint_info *info,
                       dlt_err *err)
{
    const char *v = dlt_st_meta(sf, "dltrain"), *rcrc = dlt_st_meta(sf, "model_crc32");
    const char *rsize = dlt_st_meta(sf, "model_size"), *scrc = dlt_st_meta(sf, "state_crc32");
    uint32_t crc;
    size_t size;
    char *end;
    unsigned long long want_size;
    unsigned long want_crc;
    int rc;
    if (!v || strcmp(v, FORMAT_TAG))
        return dlt_fail(err, -EINVAL, "%s is not a dltrain state file (no \"dltrain\": \"%s\" metadata)", state_path,
                        FORMAT_TAG);
    if (!rcrc || !rsize)
        return dlt_fail(err, -EINVAL, "%s records no model_size/model_crc32 for its model file", state_path);
    errno = 0;
    want_size = strtoull(rsize, &end, 10);
    if (errno || end == rsize || *end)
        return dlt_fail(err, -EINVAL, "%s: model_size '%.32s' is not a number", state_path, rsize);
    want_crc = strtoul(rcrc, &end, 16);
    if (end == rcrc || *end || strlen(rcrc) != 8)
        return dlt_fail(err, -EINVAL, "%s: model_crc32 '%.32s' is not 8 hex digits", state_path, rcrc);
    /* The state file's own CRC first: what a damaged one records about the model file means nothing. */
    if (scrc) {
        uint32_t have = 0, want = 0;
        if (dlt_st_self_crc(sf, "state_crc32", &have, &want) != 0 || have != want)
            return dlt_fail(err, -EINVAL,
                            "%s has CRC-32 %08x but it recorded %.32s for itself: the state file was damaged",
                            state_path, have, scrc);
    }
    if ((rc = _file_crc(model_path, &crc, &size, err)) != 0)
        return rc;
    /* A state file that names another model file may be another checkpoint's put beside this one,
     * or this pair's under a new name (renamed together, still valid). When the file it names lies
     * here and matches it, say whose it is rather than calling this model file damaged. */
    {
        const char *slash = strrchr(model_path, '/'), *rname = dlt_st_meta(sf, "model_file");
        const char *base = slash ? slash + 1 : model_path;
        if ((size != want_size || crc != (uint32_t)want_crc) && rname && strcmp(rname, base) && !strchr(rname, '/')) {
            char other[PATH_MAX + 256];
            dlt_err oerr = DLT_ERR_INIT;
            uint32_t ocrc;
            size_t osize;
            snprintf(other, sizeof(other), "%.*s%s", slash ? (int)(slash + 1 - model_path) : 0, model_path, rname);
            if (_file_crc(other, &ocrc, &osize, &oerr) == 0 && osize == want_size && ocrc == (uint32_t)want_crc)
                return dlt_fail(err, -EINVAL,
                                "%s does not match its state file %s, which belongs to another model file, %s (it "
                                "matches that one's size and CRC-32): put this checkpoint's own state file beside it",
                                model_path, state_path, other);
        }
    }
    if (size != want_size)
        return dlt_fail(err, -EINVAL, "%s is %zu bytes but its state file %s recorded %llu: %s", model_path, size,
                        state_path, want_size,
                        size < want_size ? "truncated (a partial copy or an interrupted write)"
                                         : "a replaced or damaged checkpoint");
    if (crc != (uint32_t)want_crc)
        return dlt_fail(err, -EINVAL,
                        "%s has CRC-32 %08x but its state file %s recorded %08lx: the model file was changed or "
                        "damaged after it was written, or the state file is another checkpoint's",
                        model_path, crc, state_path, want_crc);
    if (info) {
        const char *step = dlt_st_meta(sf, "step"), *epoch = dlt_st_meta(sf, "epoch"), *cfg = dlt_st_meta(sf, "config");
        info->verified = 1;
        info->state_data_verified = scrc != NULL;
        info->size = size;
        info->crc = crc;
        info->step = step ? strtoll(step, NULL, 10) : -1;
        info->epoch = epoch ? strtoll(epoch, NULL, 10) : -1;
        snprintf(info->config, sizeof(info->config), "%s", cfg ? cfg : "");
        snprintf(info->history, sizeof(info->history), "%s",
                 dlt_st_meta(sf, "overrides") ? dlt_st_meta(sf, "overrides") : "");
    }
    return 0;
}

void dlt_checkpoint_class_names(const char *model_path, char **list)
{
    char state_path[PATH_MAX];
    dlt_err err = DLT_ERR_INIT;
    dlt_st_file sf;
    const char *v;
    struct stat st;
    *list = NULL;
    _state_path(model_path, state_path, sizeof(state_path));
    memset(&sf, 0, sizeof(sf));
    if (stat(state_path, &st) != 0 || !S_ISREG(st.st_mode) || dlt_st_load(&sf, state_path, &err) != 0)
        return;
    if ((v = dlt_st_meta(&sf, "class_names")) != NULL && *v) {
        const char *enc = dlt_st_meta(&sf, "class_names_encoding");
        *list = enc && !strcmp(enc, CLASS_NAMES_PERCENT) ? _percent_decode(v) : strdup(v);
    }
    dlt_st_free(&sf);
}

int dlt_checkpoint_state_path(const char *model_path, char *out, size_t outlen)
{
    _state_path(model_path, out, outlen);
    return 0;
}

int dlt_checkpoint_verify(const char *model_path, dlt_checkpoint_info *info, dlt_err *err)
{
    dlt_st_file mf, sf;
    struct stat stt;
    int rc;
    memset(info, 0, sizeof(*info));
    info->step = info->epoch = -1;
    _state_path(model_path, info->state_path, sizeof(info->state_path));
    /* With a state file, the bytes are checked against it before the model file is parsed: a
     * damaged file is then called damaged, whatever its damage makes the parser say. */
    if (!(stat(info->state_path, &stt) != 0 && errno == ENOENT)) {
        if ((rc = dlt_st_load(&sf, info->state_path, err)) != 0)
            return rc;
        rc = _check_pair(model_path, info->state_path, &sf, info, err);
        dlt_st_free(&sf);
        if (rc != 0)
            return rc;
    }
    if ((rc = dlt_st_load(&mf, model_path, err)) != 0) {
        info->verified = 0;
        return rc;
    }
    info->tensors = mf.n;
    dlt_st_free(&mf);
    return 0; /* without a state file: readable, but nothing to check it against (verified 0) */
}

int dlt_checkpoint_load(dlt_net *net, const char *model_path, dlt_train_state *st, dlt_err *err)
{
    const dlt_model *m = &net->model;
    dlt_st_file mf, sf;
    char state_path[PATH_MAX];
    int rc;
    memset(&sf, 0, sizeof(sf));
    memset(&mf, 0, sizeof(mf));
    if (st) {
        /* The pair's sizes and CRCs before the model file's contents, so that a damaged file is
         * called damaged (as --verify says), not "not a resnet18 checkpoint". */
        _state_path(model_path, state_path, sizeof(state_path));
        if ((rc = dlt_st_load(&sf, state_path, err)) != 0)
            goto out;
        if ((rc = _check_pair(model_path, state_path, &sf, NULL, err)) != 0)
            goto out;
    }
    if ((rc = dlt_st_load(&mf, model_path, err)) != 0)
        goto out;
    if ((rc = _check_model_file(net, &mf, model_path, err)) != 0)
        goto out;
    if (st) {
        for (int i = 0; i < m->nentries; i++) {
            const dlt_state_entry *e = &m->entries[i];
            char name[96];
            const dlt_st_entry *x;
            if (!e->is_param)
                continue;
            snprintf(name, sizeof(name), "momentum.%s", e->name);
            x = dlt_st_find(&sf, name);
            if (!x || strcmp(x->dtype, "F32") || x->end - x->begin != e->len * sizeof(float)) {
                dlt_fail(err, -EINVAL, "%s: %s missing or the wrong size", state_path, name);
                rc = -EINVAL;
                goto out;
            }
        }
    }
    /* Everything checked: now copy. */
    for (int i = 0; i < m->nentries; i++) {
        const dlt_state_entry *e = &m->entries[i];
        const dlt_st_entry *x = dlt_st_find(&mf, e->name);
        memcpy(dlt_net_state_host(net, e), dlt_st_data(&mf, x), e->is_counter ? 8 : e->len * sizeof(float));
        if (st && e->is_param) {
            char name[96];
            snprintf(name, sizeof(name), "momentum.%s", e->name);
            memcpy(net->momentum + e->off, dlt_st_data(&sf, dlt_st_find(&sf, name)), e->len * sizeof(float));
        }
    }
    if (st) {
        const char *cfg = dlt_st_meta(&sf, "config");
        st->step = strtoll(dlt_st_meta(&sf, "step") ? dlt_st_meta(&sf, "step") : "0", NULL, 10);
        st->epoch = strtoll(dlt_st_meta(&sf, "epoch") ? dlt_st_meta(&sf, "epoch") : "0", NULL, 10);
        st->seed = strtoull(dlt_st_meta(&sf, "seed") ? dlt_st_meta(&sf, "seed") : "0", NULL, 10);
        snprintf(st->config, sizeof(st->config), "%s", cfg ? cfg : "");
        snprintf(st->history, sizeof(st->history), "%s",
                 dlt_st_meta(&sf, "overrides") ? dlt_st_meta(&sf, "overrides") : "");
        snprintf(st->data, sizeof(st->data), "%s", dlt_st_meta(&sf, "data") ? dlt_st_meta(&sf, "data") : "");
        st->line = dlt_st_meta(&sf, "line") ? strtoll(dlt_st_meta(&sf, "line"), NULL, 10) : 0;
        st->train_seconds = dlt_st_meta(&sf, "train_seconds") ? strtod(dlt_st_meta(&sf, "train_seconds"), NULL) : 0;
        st->first_start = dlt_st_meta(&sf, "first_start") ? strtod(dlt_st_meta(&sf, "first_start"), NULL) : 0;
        st->parent_line = st->parent_step = -1;
        if (dlt_st_meta(&sf, "parent_line") && dlt_st_meta(&sf, "parent_step")) {
            st->parent_line = strtoll(dlt_st_meta(&sf, "parent_line"), NULL, 10);
            st->parent_step = strtoll(dlt_st_meta(&sf, "parent_step"), NULL, 10);
        }
    }
    rc = 0;
out:
    dlt_st_free(&mf);
    dlt_st_free(&sf);
    return rc;
}

int dlt_checkpoint_load_init(dlt_net *net, const char *path, int *fc_classes, dlt_err *err)
{
    const dlt_model *m = &net->model;
    dlt_st_file f;
    int rc, other = 0;
    *fc_classes = 0;
    if ((rc = dlt_st_load(&f, path, err)) != 0)
        return rc;
    if ((rc = _check_tensors(net, &f, path, &other, err)) == 0) {
        for (int i = 0; i < m->nentries; i++) {
            const dlt_state_entry *e = &m->entries[i];
            const dlt_st_entry *x = dlt_st_find(&f, e->name);
            if (other && !strncmp(e->name, "fc.", 3))
                continue; /* kept as initialised */
            memcpy(dlt_net_state_host(net, e), dlt_st_data(&f, x), e->is_counter ? 8 : e->len * sizeof(float));
        }
        *fc_classes = other;
    }
    dlt_st_free(&f);
    return rc;
}

long long dlt_checkpoint_name_step(const char *name, int *is_state, const char **rest)
{
    const char *q = name + 5;
    long long s = 0;
    if (strncmp(name, "ckpt-", 5) || !(*q >= '0' && *q <= '9'))
        return -1;
    for (; *q >= '0' && *q <= '9'; q++) {
        if (s > (LLONG_MAX - 9) / 10)
            return -1;
        s = 10 * s + (*q - '0');
    }
    if (!strncmp(q, ".safetensors", 12)) {
        *is_state = 0;
        *rest = q + 12;
    } else if (!strncmp(q, ".state.safetensors", 18)) {
        *is_state = 1;
        *rest = q + 18;
    } else
        return -1;
    return s;
}

/* "ckpt-DIGITS.safetensors" or "ckpt-DIGITS.state.safetensors", nothing after: the step, or -1. */
static long long _ckpt_step(const char *name, int *is_state)
{
    const char *rest;
    long long s = dlt_checkpoint_name_step(name, is_state, &rest);
    return s >= 0 && !*rest ? s : -1;
}

int64_t dlt_checkpoint_dir_max_step(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    long long best = -1;
    if (!d)
        return -1;
    while ((e = readdir(d)) != NULL) {
        int is_state = 0;
        long long step = _ckpt_step(e->d_name, &is_state);
        if (step > best)
            best = step;
    }
    closedir(d);
    return best;
}

/* Copies src into dst, cut to fit. */
static void _copy(char *dst, size_t len, const char *src)
{
    size_t n = strnlen(src, len - 1);
    memcpy(dst, src, n);
    dst[n] = '\0';
}

static void _report(dlt_checkpoint_scan *s, const char *path, const char *why)
{
    if (s->refused < DLT_CKPT_SCAN_MAX) {
        _copy(s->refusal[s->refused].path, sizeof(s->refusal[s->refused].path), path);
        _copy(s->refusal[s->refused].why, sizeof(s->refusal[s->refused].why), why);
    }
    s->refused++;
}

/* The decimal value of "key":"..." in a header's text, when present (not inside another string:
 * a quote inside a value is escaped). */
static int _header_number(const char *head, const char *key, int64_t *v)
{
    char pat[64];
    const char *p = head;
    snprintf(pat, sizeof(pat), "\"%s\":\"", key);
    while ((p = strstr(p, pat)) != NULL) {
        if (p == head || p[-1] != '\\') {
            char *end;
            long long x = strtoll(p + strlen(pat), &end, 10);
            if (*end != '"')
                return 0;
            *v = x;
            return 1;
        }
        p++;
    }
    return 0;
}

int dlt_checkpoint_lineage_of(const char *model_path, dlt_checkpoint_lineage *l)
{
    char state_path[PATH_MAX], *head;
    unsigned char len8[8];
    uint64_t n = 0;
    int fd, e;
    dlt_err ignore = DLT_ERR_INIT;
    l->line = 0;
    l->parent_line = l->parent_step = -1;
    _state_path(model_path, state_path, sizeof(state_path));
    /* A FIFO or a device named like a state file must not block the scan (the verifier names it). */
    if ((fd = dlt_open_regular(NULL, state_path, O_RDONLY, 0, &ignore)) < 0)
        return fd;
    if (pread(fd, len8, 8, 0) != 8) {
        close(fd);
        return -EINVAL;
    }
    for (int i = 7; i >= 0; i--)
        n = n << 8 | len8[i];
    if (n == 0 || n > DLT_ST_HEADER_MAX || !(head = malloc(n + 1))) {
        close(fd);
        return n == 0 || n > DLT_ST_HEADER_MAX ? -EINVAL : -ENOMEM;
    }
    e = pread(fd, head, n, 8) == (ssize_t)n ? 0 : -EINVAL;
    close(fd);
    if (e == 0) {
        int64_t pl, ps;
        head[n] = '\0';
        _header_number(head, "line", &l->line);
        if (_header_number(head, "parent_line", &pl) && _header_number(head, "parent_step", &ps)) {
            l->parent_line = pl;
            l->parent_step = ps;
        }
    }
    free(head);
    return e;
}

/* Newest line first, then newest step. */
static int _by_line_step(const void *a, const void *b)
{
    const dlt_checkpoint_entry *x = a, *y = b;
    if (x->lineage.line != y->lineage.line)
        return x->lineage.line < y->lineage.line ? 1 : -1;
    return x->step < y->step ? 1 : x->step > y->step ? -1 : 0;
}

int dlt_checkpoint_list(const char *dir, dlt_checkpoint_entry **list, int *count, dlt_err *err)
{
    DIR *d;
    struct dirent *e;
    dlt_checkpoint_entry *c = NULL, *out;
    int n = 0, cap = 0, m = 0;
    *list = NULL;
    *count = 0;
    if (!(d = opendir(dir))) {
        if (errno == ENOENT)
            return 0; /* no directory yet: no checkpoint */
        return dlt_fail(err, -errno, "cannot read the checkpoint directory %s: %s", dir, strerror(errno));
    }
    /* errno set before each read: readdir says an error only through it, and a listing cut short by
     * an EIO would hide the newest checkpoint and resume from an older one without a word. */
    while ((errno = 0, e = readdir(d)) != NULL) {
        int is_state = 0, k;
        long long step = _ckpt_step(e->d_name, &is_state);
        if (step < 0)
            continue;
        for (k = 0; k < n && c[k].step != step; k++)
            ;
        if (k == n) {
            if (n == cap) {
                dlt_checkpoint_entry *nc = realloc(c, (size_t)(cap = cap ? 2 * cap : 16) * sizeof(*nc));
                if (!nc) {
                    closedir(d);
                    free(c);
                    return dlt_fail(err, -ENOMEM, "out of memory listing %s", dir);
                }
                c = nc;
            }
            memset(&c[n], 0, sizeof(c[n]));
            c[n].step = step;
            c[n].lineage.parent_line = c[n].lineage.parent_step = -1;
            n++;
        }
        if (is_state) {
            c[k].has_state = 1;
            if (!c[k].has_model) /* the model file's name, as the state file implies */
                snprintf(c[k].name, sizeof(c[k].name), "%.*s.safetensors",
                         (int)(strlen(e->d_name) - strlen(".state.safetensors")), e->d_name);
        } else {
            c[k].has_model = 1;
            snprintf(c[k].name, sizeof(c[k].name), "%s", e->d_name);
        }
    }
    if (errno != 0) {
        int code = errno;
        closedir(d);
        free(c);
        return dlt_fail(err, -code, "cannot read the checkpoint directory %s to its end: %s", dir, strerror(code));
    }
    closedir(d);
    if (n == 0)
        return 0;
    if (!(out = malloc((size_t)n * sizeof(*out)))) {
        free(c);
        return dlt_fail(err, -ENOMEM, "out of memory listing %s", dir);
    }
    /* A model file without its state file, or with one whose header cannot be read (truncated,
     * damaged, a FIFO), has no line it can name: it counts as the newest line's, so that the scan
     * tries it first and says why it is passed over (as line 0 it would sort below every line and
     * an older checkpoint would be taken without a word). */
    {
        int64_t top = 0;
        for (int i = 0; i < n; i++) {
            char path[PATH_MAX + 300];
            snprintf(path, sizeof(path), "%s/%s", dir, c[i].name);
            if (c[i].has_state && dlt_checkpoint_lineage_of(path, &c[i].lineage) != 0)
                c[i].unreadable = 1;
            if (c[i].lineage.line > top)
                top = c[i].lineage.line;
        }
        for (int i = 0; i < n; i++)
            if (!c[i].has_state || c[i].unreadable)
                c[i].lineage.line = top;
    }
    qsort(c, (size_t)n, sizeof(*c), _by_line_step);
    /* The chain: the newest line, then its parent line at and below the branch point, and so on. */
    {
        int64_t line = c[0].lineage.line, limit = INT64_MAX;
        for (int hops = 0; hops <= n; hops++) {
            int64_t pl = -1, ps = -1;
            for (int i = 0; i < n; i++) {
                if (c[i].lineage.line != line || c[i].step > limit || c[i].has_model < 0)
                    continue;
                if (c[i].lineage.parent_step >= 0 && pl < 0) {
                    pl = c[i].lineage.parent_line;
                    ps = c[i].lineage.parent_step;
                }
                out[m++] = c[i];
                c[i].has_model = -1; /* taken */
            }
            if (ps < 0 || pl >= line)
                break; /* a line started from scratch, or a record that does not lead back */
            line = pl;
            limit = ps;
        }
    }
    for (int i = 0; i < n; i++)
        if (c[i].has_model >= 0)
            out[m++] = c[i];
    free(c);
    *list = out;
    *count = m;
    return 0;
}

int dlt_checkpoint_scan_dir(const char *dir, dlt_checkpoint_scan *s, dlt_err *err)
{
    dlt_checkpoint_entry *c;
    int n, rc;
    memset(s, 0, sizeof(*s));
    s->step = -1;
    if ((rc = dlt_checkpoint_list(dir, &c, &n, err)) != 0)
        return rc;
    s->candidates = n;
    /* In the list's order; a later one only when every earlier one is refused (and said so). */
    for (int i = 0; i < n; i++) {
        char path[PATH_MAX + 300];
        dlt_err why = DLT_ERR_INIT;
        dlt_checkpoint_info info;
        snprintf(path, sizeof(path), "%s/%s", dir, c[i].name);
        if (!c[i].has_model) {
            _report(s, path, "missing (only its state file is there)");
            continue;
        }
        if (!c[i].has_state) {
            _report(s, path,
                    "no state file beside it: an incomplete checkpoint (a save that did not finish, or a state "
                    "file removed; momentum and step are lost, its size and CRC cannot be checked)");
            continue;
        }
        if (dlt_checkpoint_verify(path, &info, dlt_err_fresh(&why)) != 0) {
            _report(s, path, why.msg);
            continue;
        }
        s->found = 1;
        s->step = c[i].step;
        _copy(s->path, sizeof(s->path), path);
        /* Higher steps further down the order belong to lines a rollback left: said, not taken. */
        for (int j = i + 1; j < n; j++) {
            if (c[j].step <= c[i].step)
                continue;
            if (s->passed < DLT_CKPT_SCAN_MAX) {
                snprintf(s->passed_over[s->passed].path, sizeof(s->passed_over[s->passed].path), "%.800s/%.200s", dir,
                         c[j].name);
                snprintf(s->passed_over[s->passed].why, sizeof(s->passed_over[s->passed].why),
                         "of line %lld, which a rollback left (--resume auto follows line %lld)",
                         (long long)c[j].lineage.line, (long long)c[i].lineage.line);
            }
            s->passed++;
        }
        break;
    }
    free(c);
    return 0;
}

int dlt_checkpoint_config_field(const char *config, const char *key, char *out, size_t outlen)
{
    size_t k = strlen(key);
    for (const char *p = config; p && *p;) {
        while (*p == ' ')
            p++;
        if (!strncmp(p, key, k) && p[k] == '=') {
            size_t n = strcspn(p + k + 1, " ");
            snprintf(out, outlen, "%.*s", (int)n, p + k + 1);
            return 1;
        }
        p = strchr(p, ' ');
    }
    return 0;
}
