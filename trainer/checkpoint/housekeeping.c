/* SPDX-License-Identifier: Apache-2.0 */
/* housekeeping: unfinished saves removed, old checkpoints pruned (--keep-checkpoints). */
#include "config.h"

#include "trainer/checkpoint/housekeeping.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/status.h"
#include "trainer/checkpoint/checkpoint.h"

static int _unfinished(const char *name)
{
    const char *rest, *p;
    int is_state;
    if (dlt_checkpoint_name_step(name, &is_state, &rest) < 0 || strncmp(rest, ".tmp.", 5) || !rest[5])
        return 0;
    for (p = rest + 5; *p; p++)
        if (*p < '0' || *p > '9')
            return 0;
    return 1;
}

static void _note(char *said, size_t len, int n, const char *name)
{
    size_t at = strlen(said);
    if (n < 4 && at < len)
        snprintf(said + at, len - at, "%s%s", at ? ", " : "", name);
    else if (n == 4 && at < len)
        snprintf(said + at, len - at, ", ...");
}

/* Removes dir/name; a file already gone is no failure. */
static int _remove(int dfd, const char *dir, const char *name, dlt_err *err)
{
    if (unlinkat(dfd, name, 0) != 0 && errno != ENOENT)
        return dlt_fail(err, -errno, "cannot remove %s/%s: %s", dir, name, strerror(errno));
    return 0;
}

int dlt_checkpoint_remove_unfinished(const char *dir, int *removed, char *said, size_t saidlen, dlt_err *err)
{
    DIR *d;
    struct dirent *e;
    int rc = 0;
    *removed = 0;
    if (saidlen)
        said[0] = '\0';
    if (!(d = opendir(dir)))
        return errno == ENOENT ? 0 : dlt_fail(err, -errno, "cannot read %s: %s", dir, strerror(errno));
    while (rc == 0 && (e = readdir(d)) != NULL)
        if (_unfinished(e->d_name) && (rc = _remove(dirfd(d), dir, e->d_name, err)) == 0)
            _note(said, saidlen, (*removed)++, e->d_name);
    closedir(d);
    return rc;
}

typedef struct {
    long long step;
    int state; /* the state file: removed before its model file */
    int rank;  /* the checkpoint's place in --resume auto's order (dlt_checkpoint_list) */
    char name[256];
} _entry;

/* Most wanted first (the newest line, its chain, then abandoned lines); within a step, the state
 * file first. */
static int _order(const void *a, const void *b)
{
    const _entry *x = a, *y = b;
    if (x->rank != y->rank)
        return x->rank > y->rank ? 1 : -1;
    return y->state - x->state;
}

int dlt_checkpoint_prune(const char *dir, int keep, int64_t newest, int *removed, char *said, size_t saidlen,
                         dlt_err *err)
{
    DIR *d;
    struct dirent *e;
    _entry *v = NULL;
    dlt_checkpoint_entry *pref = NULL;
    size_t n = 0, cap = 0, distinct = 0;
    int rc = 0, npref = 0, code;
    *removed = 0;
    if (saidlen)
        said[0] = '\0';
    if (keep <= 0)
        return 0;
    /* Read before the listing below: a step it does not know (none, as rank 0 alone writes here
     * under the folder's lock) would rank last. */
    if ((rc = dlt_checkpoint_list(dir, &pref, &npref, err)) != 0)
        return rc;
    if (!(d = opendir(dir))) {
        free(pref);
        return dlt_fail(err, -errno, "cannot read %s: %s", dir, strerror(errno));
    }
    while ((errno = 0, e = readdir(d)) != NULL) { /* errno: readdir's only way to say an error */
        const char *rest;
        int is_state, k;
        long long s = dlt_checkpoint_name_step(e->d_name, &is_state, &rest);
        if (s < 0 || *rest || strlen(e->d_name) >= sizeof(v[0].name))
            continue;
        if (n == cap) {
            _entry *nv = realloc(v, (cap = cap ? 2 * cap : 64) * sizeof(*nv));
            if (!nv) {
                closedir(d);
                free(v);
                free(pref);
                return dlt_fail(err, -ENOMEM, "out of memory listing %s", dir);
            }
            v = nv;
        }
        for (k = 0; k < npref && pref[k].step != s; k++)
            ;
        v[n].step = s;
        v[n].state = is_state;
        v[n].rank = k;
        snprintf(v[n].name, sizeof(v[n].name), "%s", e->d_name);
        n++;
    }
    code = errno;
    free(pref);
    if (code != 0) { /* a listing cut short: nothing is removed on a partial view */
        closedir(d);
        free(v);
        return dlt_fail(err, -code, "cannot read %s to its end: %s", dir, strerror(code));
    }
    qsort(v, n, sizeof(*v), _order);
    for (size_t i = 0; i < n && rc == 0; i++) {
        char label[64];
        if (i == 0 || v[i].step != v[i - 1].step)
            distinct++;
        if (distinct <= (size_t)keep || v[i].step == newest)
            continue;
        if ((rc = _remove(dirfd(d), dir, v[i].name, err)) != 0)
            break;
        if (i + 1 < n && v[i + 1].step == v[i].step)
            continue; /* said once per checkpoint, after its last file */
        snprintf(label, sizeof(label), "ckpt-%08lld", v[i].step);
        _note(said, saidlen, (*removed)++, label);
    }
    closedir(d);
    free(v);
    return rc;
}

/* Whether dir/name exists (as anything: a link, a FIFO). */
static int _exists(const char *dir, const char *name)
{
    char path[PATH_MAX];
    struct stat st;
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    return lstat(path, &st) == 0;
}

int dlt_checkpoint_set_aside(const char *dir, int64_t step, int64_t line, char *said, size_t saidlen, dlt_err *err)
{
    char model[64], state[64], path[PATH_MAX], tag[48], to_model[96], to_state[96];
    dlt_checkpoint_lineage l;
    int have_model, have_state;
    said[0] = '\0';
    snprintf(model, sizeof(model), "ckpt-%08lld.safetensors", (long long)step);
    snprintf(state, sizeof(state), "ckpt-%08lld.state.safetensors", (long long)step);
    have_model = _exists(dir, model);
    have_state = _exists(dir, state);
    if (!have_model && !have_state)
        return 0;
    snprintf(path, sizeof(path), "%s/%s", dir, model);
    if (have_state && dlt_checkpoint_lineage_of(path, &l) == 0) {
        if (l.line == line)
            return 0; /* this line's own (a save of the same step again): replaced as before */
        snprintf(tag, sizeof(tag), "line%lld", (long long)l.line);
    } else {
        snprintf(tag, sizeof(tag), "unreadable"); /* damaged, or half a pair: kept for a look */
    }
    /* A name --resume auto and the pruning do not list (no step right before .safetensors), which
     * --resume FILE still loads as a pair. */
    for (int n = 1; n < 1000; n++) {
        char sfx[16] = "";
        if (n > 1)
            snprintf(sfx, sizeof(sfx), "-%d", n);
        snprintf(to_model, sizeof(to_model), "ckpt-%08lld.%s%s.safetensors", (long long)step, tag, sfx);
        snprintf(to_state, sizeof(to_state), "ckpt-%08lld.%s%s.state.safetensors", (long long)step, tag, sfx);
        if (!_exists(dir, to_model) && !_exists(dir, to_state))
            break;
    }
    for (int i = 0; i < 2; i++) {
        const char *from = i ? state : model, *to = i ? to_state : to_model;
        char a[PATH_MAX], b[PATH_MAX];
        if (!(i ? have_state : have_model))
            continue;
        snprintf(a, sizeof(a), "%s/%s", dir, from);
        snprintf(b, sizeof(b), "%s/%s", dir, to);
        if (rename(a, b) != 0)
            return dlt_fail(err, -errno, "cannot move %s aside to %s (it would be overwritten): %s", a, to,
                            strerror(errno));
    }
    snprintf(said, saidlen, "%s%s -> %s", have_model ? model : state,
             have_model && have_state ? " and its state file" : "", have_model ? to_model : to_state);
    return 1;
}
