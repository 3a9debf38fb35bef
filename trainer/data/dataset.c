/* SPDX-License-Identifier: Apache-2.0 */
/* dataset: what ImageFolder (imagefolder.c) and RecordIO (recordio.c) data sets share: indexed
 * reads (through the reader its opener set), class names and their mapping, digests, what was left
 * out, and the helpers of both. It calls neither kind's file. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fnv.h"
#include "common/io.h"
#include "common/status.h"
#include "trainer/data/dataset.h"
#include "trainer/data/dataset_internal.h"

int dlt_ds_cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void dlt_ds_free_list(char **v, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

int dlt_ds_grow(uint8_t **buf, size_t *cap, size_t need)
{
    uint8_t *nb;
    if (need <= *cap)
        return 0;
    nb = realloc(*buf, need);
    if (!nb)
        return -ENOMEM;
    *buf = nb;
    *cap = need;
    return 0;
}

void dlt_dataset_close(dlt_dataset *d)
{
    if (!d)
        return;
    if (d->path_arena) { /* built from a shared list: one block */
        free(d->path_arena);
        free(d->paths);
    } else if (d->paths) {
        dlt_ds_free_list(d->paths, d->n);
    }
    if (d->class_names)
        dlt_ds_free_list(d->class_names, d->nclasses);
    free(d->labels);
    free(d->offsets);
    free(d->idx_lines);
    free(d->label_map);
    if (d->fd >= 0)
        close(d->fd);
    free(d);
}

int64_t dlt_dataset_count(const dlt_dataset *d)
{
    return d->n;
}

int dlt_dataset_present(const dlt_dataset *d)
{
    struct stat st;
    return stat(d->root, &st) == 0;
}

const char *dlt_dataset_root(const dlt_dataset *d)
{
    return d->root;
}

const dlt_dataset_left_out *dlt_dataset_left(const dlt_dataset *d)
{
    return d->recordio ? NULL : &d->left;
}

int64_t dlt_dataset_describe_left_out(const dlt_dataset *d, char *buf, size_t len)
{
    const dlt_dataset_left_out *l = &d->left;
    const struct {
        int64_t n;
        const char *what, *first;
    } part[] = {
        {l->missing, "labels-file line(s) naming a file that is not there", l->first_missing},
        {l->unlisted, "image(s) without a line in the labels file", l->first_unlisted},
        {l->nested, "folder(s) inside class folders (only one level is read)", l->first_nested},
        {l->images, "image file(s) not in .JPEG/.jpg/.png (not decoded here: convert them to JPEG)", l->first_images},
        {l->special, "entr(y/ies) named as images that are not regular files (a FIFO, a device, a socket)",
         l->first_special},
        {l->unreadable, "dangling symbolic link(s), unreadable entries or paths longer than PATH_MAX",
         l->first_unreadable},
        {l->other, "other file(s)", l->first_other},
    };
    size_t o = 0;
    int64_t strict = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof(part) / sizeof(part[0]); i++) {
        int w;
        if (!part[i].n)
            continue;
        if (i + 1 < sizeof(part) / sizeof(part[0]))
            strict += part[i].n;
        w = snprintf(buf + o, o < len ? len - o : 0, "%s%lld %s (first: %s)", o ? "; " : "", (long long)part[i].n,
                     part[i].what, part[i].first);
        if (w > 0)
            o += (size_t)w;
    }
    return strict;
}

char *dlt_dataset_class_list(const dlt_dataset *d)
{
    size_t len = 1;
    char *out, *p;
    if (!d->class_names)
        return NULL;
    for (int c = 0; c < d->nclasses; c++) {
        if (strchr(d->class_names[c], '\n'))
            return NULL; /* cannot be listed one a line */
        len += strlen(d->class_names[c]) + 1;
    }
    if (!(p = out = malloc(len)))
        return NULL;
    for (int c = 0; c < d->nclasses; c++)
        p += sprintf(p, "%s%s", c ? "\n" : "", d->class_names[c]);
    *p = '\0';
    return out;
}

/* A whole number without sign or leading zeros (a class position), or -1. */
static long _class_number(const char *s)
{
    long v = 0;
    if (!*s || (s[0] == '0' && s[1]) || strlen(s) > 9)
        return -1;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return -1;
        v = v * 10 + (*s - '0');
    }
    return v;
}

int dlt_dataset_map_classes(dlt_dataset *d, const char *list, char *note, size_t notelen, dlt_err *err)
{
    char *copy = strdup(list ? list : ""), **names = NULL, **sorted = NULL, *tok, *save = NULL;
    int n = 0, cap = 0, unknown = 0, by_number = 0, zero = 0, max_number = -1, rc = 0;
    int32_t *map = NULL;
    char bad[400] = "";
    size_t bo = 0;
    note[0] = '\0';
    if (!copy)
        return -ENOMEM;
    for (tok = strtok_r(copy, "\n", &save); tok; tok = strtok_r(NULL, "\n", &save)) {
        if (n == cap) {
            char **nv = realloc(names, (size_t)(cap = cap ? 2 * cap : 256) * sizeof(char *));
            if (!nv) {
                rc = -ENOMEM;
                goto out;
            }
            names = nv;
        }
        names[n++] = tok;
    }
    if (n < 1 || !(sorted = malloc((size_t)n * sizeof(char *))) ||
        !(map = malloc((size_t)(d->local_classes ? d->local_classes : 1) * sizeof(int32_t)))) {
        rc = n < 1 ? dlt_fail(err, -EINVAL, "an empty class list") : -ENOMEM;
        goto out;
    }
    memcpy(sorted, names, (size_t)n * sizeof(char *));
    qsort(sorted, (size_t)n, sizeof(char *), dlt_ds_cmp_str);
    for (int c = 0; c < d->local_classes; c++) {
        char num[16];
        const char *mine = d->class_names ? d->class_names[c] : (snprintf(num, sizeof(num), "%d", c), num);
        char *const *hit = bsearch(&mine, sorted, (size_t)n, sizeof(char *), dlt_ds_cmp_str);
        long k = d->numbered ? _class_number(mine) : -1;
        map[c] = -1;
        if (hit) { /* by name: the position of that name in the list */
            for (int i = 0; i < n; i++)
                if (!strcmp(names[i], *hit)) {
                    map[c] = i;
                    break;
                }
        } else if (k >= 0 && k < n) { /* a labels file or RecordIO may give the class's position */
            map[c] = (int32_t)k;
            by_number++;
        }
        if (k >= 0) {
            zero |= k == 0;
            max_number = k > max_number ? (int)k : max_number;
        }
        if (map[c] < 0) {
            if (unknown < 5 && bo < sizeof(bad)) {
                int w = snprintf(bad + bo, sizeof(bad) - bo, "%s'%.60s'", unknown ? ", " : "", mine);
                if (w > 0)
                    bo += (size_t)w;
            }
            unknown++;
        }
    }
    if (unknown) {
        rc = dlt_fail(err, -EINVAL,
                      "%s: %d of its %d class(es) are not among the %d classes it is scored against (%s...%s): %s%s%s",
                      d->root, unknown, d->local_classes, n, names[0], names[n - 1], bad, unknown > 5 ? ", ..." : "",
                      max_number == n && !zero
                          ? " (the class numbers run up to the class count and 0 is never used: numbers count from "
                            "0, in the training class order)"
                      : d->numbered ? " (give class names, or class numbers 0..N-1 in the training order)"
                                    : " (the class folders must have the training class names)");
        goto out;
    }
    if (by_number)
        snprintf(note, notelen, "%d class(es) given as numbers are taken as positions 0..%d in the class list%s",
                 by_number, n - 1,
                 zero ? "" : "; 0 is never used: if the numbers count from 1, every image is scored as the next class");
    /* The data's classes now mean the list's: its names, its count. */
    if (d->class_names)
        dlt_ds_free_list(d->class_names, d->nclasses);
    d->class_names = calloc((size_t)n, sizeof(char *));
    for (int i = 0; d->class_names && i < n; i++)
        if (!(d->class_names[i] = strdup(names[i])))
            rc = -ENOMEM;
    if (!d->class_names)
        rc = -ENOMEM;
    d->nclasses = d->class_names ? n : 0;
    free(d->label_map);
    d->label_map = map;
    map = NULL;
out:
    free(map);
    free(sorted);
    free(names);
    free(copy);
    return rc;
}

void dlt_dataset_digest(const dlt_dataset *d, uint64_t *files, uint64_t *classes)
{
    uint64_t h = DLT_FNV_OFFSET, c = DLT_FNV_OFFSET;
    for (int k = 0; d->class_names && k < d->nclasses; k++)
        c = dlt_fnv1a64(c, d->class_names[k], strlen(d->class_names[k]) + 1);
    c = dlt_fnv1a64(c, &d->nclasses, sizeof(d->nclasses));
    if (d->recordio) {
        /* The index and the file's size: the same pair on every rank (wherever it is mounted). */
        struct stat st;
        uint64_t size = fstat(d->fd, &st) == 0 ? (uint64_t)st.st_size : 0;
        h = dlt_fnv1a64(h, d->offsets, (size_t)d->n * sizeof(uint64_t));
        h = dlt_fnv1a64(h, &size, sizeof(size));
    } else {
        /* Paths under the root (ranks may mount the same data at different places) and labels. */
        for (int64_t i = 0; i < d->n; i++) {
            const char *rel = d->paths[i];
            h = dlt_fnv1a64(h, rel, strlen(rel) + 1);
            h = dlt_fnv1a64(h, &d->labels[i], sizeof(d->labels[i]));
        }
    }
    *files = h;
    *classes = c;
}

int dlt_dataset_classes(const dlt_dataset *d)
{
    return d->nclasses;
}

const char *dlt_dataset_class_name(const dlt_dataset *d, int c)
{
    return d->class_names && c >= 0 && c < d->nclasses ? d->class_names[c] : NULL;
}

int dlt_dataset_read(dlt_dataset *d, int64_t i, uint8_t **buf, size_t *cap, size_t *len, int32_t *label, char *name,
                     size_t namelen, dlt_err *err)
{
    if (i < 0 || i >= d->n)
        return dlt_fail(err, -EINVAL, "sample %lld out of range", (long long)i);
    return d->ops->read(d, i, buf, cap, len, label, name, namelen, err);
}
