/* checkpoint: torchvision-named model file + state file, atomic, validated. */
#include "config.h"

#include "trainer/checkpoint/checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "trainer/checkpoint/safetensors.h"
#include "trainer/common/crc32.h"

#define FORMAT_TAG "dltrain-checkpoint-1"

static int _file_crc(const char *path, uint32_t *crc, size_t *size, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    static unsigned char buf[1 << 16];
    uint32_t c = 0;
    size_t n, total = 0;
    if (!f) {
        snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return -errno;
    }
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0) {
        c = dlt_crc32(c, buf, n);
        total += n;
    }
    fclose(f);
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
                        char *err, size_t errlen)
{
    const dlt_model *m = &net->model;
    dlt_st_tensor *t = calloc((size_t)m->nentries, sizeof(*t));
    char state_path[PATH_MAX], crcbuf[32], sizebuf[32], stepbuf[32], epochbuf[32], seedbuf[32];
    char (*names)[80] = calloc((size_t)m->nentries, sizeof(*names));
    uint32_t crc;
    size_t size;
    int nt = 0, rc;

    if (!t || !names) {
        free(t);
        free(names);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "cannot create checkpoint directory %s: %s", dir, strerror(errno));
        free(t);
        free(names);
        return -errno;
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
            x->data = &net->bn_batches[e->off];
            x->bytes = 8;
        } else {
            x->dtype = "F32";
            x->data = (e->is_param ? net->params : net->stats) + e->off;
            x->bytes = e->len * sizeof(float);
        }
    }
    {
        const char *meta[] = {"format", "pt", "dltrain", FORMAT_TAG, "arch", m->cfg.arch};
        rc = dlt_st_write(path, t, nt, meta, 3, err, errlen);
    }
    if (rc == 0)
        rc = _file_crc(path, &crc, &size, err, errlen);
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
            const char *meta[] = {"dltrain", FORMAT_TAG,  "model_file", slash ? slash + 1 : path, "model_crc32", crcbuf,
                                  "model_size", sizebuf, "step", stepbuf, "epoch", epochbuf, "seed", seedbuf,
                                  "config", st->config};
            _state_path(path, state_path, sizeof(state_path));
            rc = dlt_st_write(state_path, t, nt, meta, 8, err, errlen);
        }
    }
    free(t);
    free(names);
    return rc;
}

/* Checks a loaded model file against the model: every entry present with its dtype and shape. */
static int _check_model_file(const dlt_net *net, const dlt_st_file *f, const char *path, char *err, size_t errlen)
{
    const dlt_model *m = &net->model;
    int extra = f->n;
    for (int i = 0; i < m->nentries; i++) {
        const dlt_state_entry *e = &m->entries[i];
        const dlt_st_entry *x = dlt_st_find(f, e->name);
        const char *want = e->is_counter ? "I64" : "F32";
        if (!x) {
            snprintf(err, errlen, "%s has no tensor %s: not a %s checkpoint (arch, width or classes differ?)", path,
                     e->name, m->cfg.arch);
            return -EINVAL;
        }
        if (strcmp(x->dtype, want) || x->ndim != e->ndim || memcmp(x->shape, e->shape, sizeof(int64_t) * (size_t)e->ndim)) {
            char have[96] = "", need[96] = "";
            for (int d = 0; d < x->ndim && d < 4; d++)
                snprintf(have + strlen(have), sizeof(have) - strlen(have), "%s%lld", d ? "," : "", (long long)x->shape[d]);
            for (int d = 0; d < e->ndim; d++)
                snprintf(need + strlen(need), sizeof(need) - strlen(need), "%s%lld", d ? "," : "", (long long)e->shape[d]);
            snprintf(err, errlen, "%s: tensor %s is %s [%s], this model needs %s [%s]", path, e->name, x->dtype, have,
                     want, need);
            return -EINVAL;
        }
        extra--;
    }
    if (extra) {
        snprintf(err, errlen, "%s has %d tensors this %s does not have (another architecture?)", path, extra,
                 m->cfg.arch);
        return -EINVAL;
    }
    return 0;
}

int dlt_checkpoint_load(dlt_net *net, const char *model_path, dlt_train_state *st, char *err, size_t errlen)
{
    const dlt_model *m = &net->model;
    dlt_st_file mf, sf;
    char state_path[PATH_MAX];
    int rc;
    memset(&sf, 0, sizeof(sf));
    if ((rc = dlt_st_load(&mf, model_path, err, errlen)) != 0)
        return rc;
    if ((rc = _check_model_file(net, &mf, model_path, err, errlen)) != 0)
        goto out;
    if (st) {
        const char *v;
        uint32_t crc;
        size_t size;
        char crcbuf[32];
        _state_path(model_path, state_path, sizeof(state_path));
        if ((rc = dlt_st_load(&sf, state_path, err, errlen)) != 0)
            goto out;
        v = dlt_st_meta(&sf, "dltrain");
        if (!v || strcmp(v, FORMAT_TAG)) {
            snprintf(err, errlen, "%s is not a dltrain state file", state_path);
            rc = -EINVAL;
            goto out;
        }
        if ((rc = _file_crc(model_path, &crc, &size, err, errlen)) != 0)
            goto out;
        snprintf(crcbuf, sizeof(crcbuf), "%08x", crc);
        if (!dlt_st_meta(&sf, "model_crc32") || strcmp(dlt_st_meta(&sf, "model_crc32"), crcbuf) ||
            !dlt_st_meta(&sf, "model_size") || strtoull(dlt_st_meta(&sf, "model_size"), NULL, 10) != size) {
            snprintf(err, errlen, "%s does not belong to %s (size or CRC differ: a partial or mixed checkpoint)",
                     state_path, model_path);
            rc = -EINVAL;
            goto out;
        }
        for (int i = 0; i < m->nentries; i++) {
            const dlt_state_entry *e = &m->entries[i];
            char name[96];
            const dlt_st_entry *x;
            if (!e->is_param)
                continue;
            snprintf(name, sizeof(name), "momentum.%s", e->name);
            x = dlt_st_find(&sf, name);
            if (!x || strcmp(x->dtype, "F32") || x->end - x->begin != e->len * sizeof(float)) {
                snprintf(err, errlen, "%s: %s missing or the wrong size", state_path, name);
                rc = -EINVAL;
                goto out;
            }
        }
    }
    /* Everything checked: now copy. */
    for (int i = 0; i < m->nentries; i++) {
        const dlt_state_entry *e = &m->entries[i];
        const dlt_st_entry *x = dlt_st_find(&mf, e->name);
        if (e->is_counter)
            memcpy(&net->bn_batches[e->off], dlt_st_data(&mf, x), 8);
        else
            memcpy((e->is_param ? net->params : net->stats) + e->off, dlt_st_data(&mf, x), e->len * sizeof(float));
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
    }
    rc = 0;
out:
    dlt_st_free(&mf);
    dlt_st_free(&sf);
    return rc;
}

static int _valid_pair(const char *model_path, char *why, size_t whylen)
{
    dlt_st_file sf;
    char state_path[PATH_MAX];
    uint32_t crc;
    size_t size;
    char crcbuf[32];
    int rc;
    _state_path(model_path, state_path, sizeof(state_path));
    if ((rc = dlt_st_load(&sf, state_path, why, whylen)) != 0)
        return rc;
    rc = _file_crc(model_path, &crc, &size, why, whylen);
    snprintf(crcbuf, sizeof(crcbuf), "%08x", crc);
    if (rc == 0 && (!dlt_st_meta(&sf, "model_crc32") || strcmp(dlt_st_meta(&sf, "model_crc32"), crcbuf))) {
        snprintf(why, whylen, "model file CRC does not match its state file");
        rc = -EINVAL;
    }
    dlt_st_free(&sf);
    return rc;
}

int dlt_checkpoint_find_latest(const char *dir, char *path, size_t pathlen,
                               void (*skipped)(const char *path, const char *why, void *arg), void *arg)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    long long *steps = NULL;
    int n = 0, cap = 0, found = -ENOENT;
    if (!d)
        return -errno;
    while ((e = readdir(d)) != NULL) {
        long long s;
        char tail[32];
        if (sscanf(e->d_name, "ckpt-%lld%31s", &s, tail) == 2 && !strcmp(tail, ".safetensors")) {
            if (n >= cap) {
                long long *ns = realloc(steps, (size_t)(cap = cap ? 2 * cap : 16) * sizeof(*ns));
                if (!ns)
                    break;
                steps = ns;
            }
            steps[n++] = s;
        }
    }
    closedir(d);
    /* Newest first; fall back to older ones when the newest is damaged. */
    for (;;) {
        int best = -1;
        char why[512];
        for (int i = 0; i < n; i++)
            if (steps[i] >= 0 && (best < 0 || steps[i] > steps[best]))
                best = i;
        if (best < 0)
            break;
        snprintf(path, pathlen, "%s/ckpt-%08lld.safetensors", dir, steps[best]);
        steps[best] = -1;
        if (_valid_pair(path, why, sizeof(why)) == 0) {
            found = 0;
            break;
        }
        if (skipped)
            skipped(path, why, arg);
    }
    free(steps);
    return found;
}
