/* SPDX-License-Identifier: Apache-2.0 */
/* folder_list: an ImageFolder's list as bytes, and back (folder_list.h). */
#include "config.h"

#include "trainer/data/folder_list.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/fnv.h"
#include "common/status.h"
#include "trainer/data/dataset_internal.h"

static const char LIST_MAGIC[8] = {'D', 'L', 'T', 'L', 'I', 'S', 'T', '1'};

typedef struct {
    uint8_t *p;
    size_t len, cap;
    int oom;
} out_buf;

static void _put(out_buf *b, const void *src, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 1 << 16;
        uint8_t *np;
        while (cap < b->len + n)
            cap *= 2;
        if (!(np = realloc(b->p, cap))) {
            b->oom = 1;
            return;
        }
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->len, src, n);
    b->len += n;
}

static void _put_varint(out_buf *b, uint64_t v)
{
    uint8_t t[10];
    size_t n = 0;
    do {
        t[n++] = (uint8_t)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
        v >>= 7;
    } while (v);
    _put(b, t, n);
}

static void _put_str(out_buf *b, const char *s)
{
    size_t n = strlen(s);
    _put_varint(b, n);
    _put(b, s, n);
}

int dlt_folder_list_pack(const dlt_dataset *d, uint8_t **out, size_t *len, dlt_err *err)
{
    out_buf b = {0};
    const dlt_dataset_left_out *lo = &d->left;
    const int64_t counts[7] = {lo->missing, lo->unlisted,   lo->nested, lo->images,
                               lo->other,   lo->unreadable, lo->special};
    const char *firsts[7] = {lo->first_missing, lo->first_unlisted,   lo->first_nested, lo->first_images,
                             lo->first_other,   lo->first_unreadable, lo->first_special};
    const char *prev = "";
    uint64_t sum;
    uint8_t s8[8];

    *out = NULL;
    *len = 0;
    if (d->recordio)
        return dlt_fail(err, -EINVAL, "%s: a RecordIO file has no folder list", d->root);
    _put(&b, LIST_MAGIC, sizeof(LIST_MAGIC));
    _put_varint(&b, (uint64_t)d->numbered);
    _put_varint(&b, (uint64_t)d->nclasses);
    _put_varint(&b, (uint64_t)d->n);
    for (int k = 0; k < 7; k++) {
        _put_varint(&b, (uint64_t)counts[k]);
        _put_str(&b, firsts[k]);
    }
    for (int c = 0; c < d->nclasses; c++)
        _put_str(&b, d->class_names[c]);
    for (int64_t i = 0; i < d->n; i++) {
        const char *rel = d->paths[i]; /* below the root: "CLASS/NAME.JPEG" */
        size_t shared = 0, n = strlen(rel);
        while (prev[shared] && prev[shared] == rel[shared])
            shared++;
        _put_varint(&b, (uint64_t)(uint32_t)d->labels[i]);
        _put_varint(&b, shared);
        _put_varint(&b, n - shared);
        _put(&b, rel + shared, n - shared);
        prev = rel;
    }
    sum = b.oom ? 0 : dlt_fnv1a64(DLT_FNV_OFFSET, b.p, b.len);
    for (int k = 0; k < 8; k++)
        s8[k] = (uint8_t)(sum >> (8 * k));
    _put(&b, s8, sizeof(s8));
    if (b.oom) {
        free(b.p);
        return dlt_fail(err, -ENOMEM, "out of memory for the list of %s (%lld images)", d->root, (long long)d->n);
    }
    *out = b.p;
    *len = b.len;
    return 0;
}

typedef struct {
    const uint8_t *p, *end;
    int bad;
} in_buf;

static uint64_t _get_varint(in_buf *b)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (b->p >= b->end) {
            b->bad = 1;
            return 0;
        }
        v |= (uint64_t)(*b->p & 0x7f) << shift;
        if (!(*b->p++ & 0x80))
            return v;
    }
    b->bad = 1;
    return 0;
}

/* A length-prefixed string into out (NUL-terminated, cut to outlen). */
static void _get_str(in_buf *b, char *out, size_t outlen)
{
    uint64_t n = _get_varint(b);
    if (b->bad || n > (uint64_t)(b->end - b->p)) {
        b->bad = 1;
        out[0] = '\0';
        return;
    }
    snprintf(out, outlen, "%.*s", (int)(n < outlen ? n : outlen - 1), (const char *)b->p);
    b->p += n;
}

/* A path as the lister makes them, "CLASS/NAME": not empty, not absolute, no NUL or control
 * character, no "." or ".." component (a list must not send reads outside the folder). */
static int _path_below_root(const char *p, size_t n)
{
    size_t start = 0;
    if (n == 0 || p[0] == '/')
        return 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && ((unsigned char)p[i] < 0x20 || p[i] == 0x7f))
            return 0;
        if (i == n || p[i] == '/') {
            size_t k = i - start;
            if (k == 0 || (k == 1 && p[start] == '.') || (k == 2 && p[start] == '.' && p[start + 1] == '.'))
                return 0;
            start = i + 1;
        }
    }
    return 1;
}

static int _damaged(dlt_err *err, const char *root, const char *why)
{
    return dlt_fail(err, -EBADMSG, "the list of %s is damaged (%s)", root, why);
}

int dlt_folder_list_open(dlt_dataset **out, const char *root, const uint8_t *buf, size_t len, dlt_err *err)
{
    in_buf b = {buf, buf, 0};
    dlt_dataset *d;
    dlt_dataset_left_out *lo;
    int64_t *counts[7];
    char *firsts[7];
    size_t firstlens[7], arena_len = 0, used = 0, prevlen = 0;
    uint64_t sum = 0, numbered, ncls, n;
    const uint8_t *files_at;
    char *prev = NULL;

    *out = NULL;
    if (len < sizeof(LIST_MAGIC) + 8 || memcmp(buf, LIST_MAGIC, sizeof(LIST_MAGIC)))
        return _damaged(err, root, "not a dltrain folder list");
    for (int k = 0; k < 8; k++)
        sum |= (uint64_t)buf[len - 8 + k] << (8 * k);
    if (dlt_fnv1a64(DLT_FNV_OFFSET, buf, len - 8) != sum)
        return _damaged(err, root, "checksum mismatch");
    b.end = buf + len - 8;
    b.p += sizeof(LIST_MAGIC);
    numbered = _get_varint(&b);
    ncls = _get_varint(&b);
    n = _get_varint(&b);
    /* Each class name and each entry takes bytes of its own: counts beyond them are damage. */
    if (b.bad || ncls > INT32_MAX || ncls > (uint64_t)(b.end - b.p) || n > (uint64_t)(b.end - b.p) / 3 || ncls < 1)
        return _damaged(err, root, "counts out of range");
    if (!(d = calloc(1, sizeof(*d))))
        return dlt_fail(err, -ENOMEM, "out of memory for the list of %s", root);
    d->ops = &dlt_imagefolder_ops;
    d->fd = -1;
    d->numbered = numbered != 0;
    snprintf(d->root, sizeof(d->root), "%s", root);
    lo = &d->left;
    counts[0] = &lo->missing, counts[1] = &lo->unlisted, counts[2] = &lo->nested, counts[3] = &lo->images;
    counts[4] = &lo->other, counts[5] = &lo->unreadable, counts[6] = &lo->special;
    firsts[0] = lo->first_missing, firsts[1] = lo->first_unlisted, firsts[2] = lo->first_nested;
    firsts[3] = lo->first_images, firsts[4] = lo->first_other, firsts[5] = lo->first_unreadable;
    firsts[6] = lo->first_special;
    for (int k = 0; k < 7; k++)
        firstlens[k] = sizeof(lo->first_missing);
    for (int k = 0; k < 7; k++) {
        *counts[k] = (int64_t)_get_varint(&b);
        _get_str(&b, firsts[k], firstlens[k]);
    }
    d->class_names = calloc((size_t)ncls, sizeof(char *));
    d->paths = calloc((size_t)(n ? n : 1), sizeof(char *));
    d->labels = calloc((size_t)(n ? n : 1), sizeof(int32_t));
    if (!d->class_names || !d->paths || !d->labels)
        goto oom;
    d->nclasses = d->local_classes = (int)ncls;
    for (uint64_t c = 0; c < ncls && !b.bad; c++) {
        uint64_t k = _get_varint(&b);
        if (b.bad || k > (uint64_t)(b.end - b.p)) {
            b.bad = 1;
            break;
        }
        if (!(d->class_names[c] = malloc((size_t)k + 1)))
            goto oom;
        memcpy(d->class_names[c], b.p, (size_t)k);
        d->class_names[c][k] = '\0';
        b.p += k;
    }
    if (b.bad) {
        dlt_dataset_close(d);
        return _damaged(err, root, "class names cut");
    }
    /* First pass: the arena's size (each path below the root and its NUL), every bound checked. */
    files_at = b.p;
    for (uint64_t i = 0; i < n && !b.bad; i++) {
        uint64_t label = _get_varint(&b), shared = _get_varint(&b), rest = _get_varint(&b);
        if (b.bad || label >= ncls || shared > prevlen || rest > (uint64_t)(b.end - b.p) || shared + rest >= PATH_MAX) {
            b.bad = 1;
            break;
        }
        b.p += rest;
        prevlen = (size_t)(shared + rest);
        arena_len += prevlen + 1;
    }
    if (b.bad || b.p != b.end) {
        dlt_dataset_close(d);
        return _damaged(err, root, b.bad ? "an entry out of range" : "bytes after the last entry");
    }
    if (!(d->path_arena = malloc(arena_len ? arena_len : 1)) || !(prev = malloc(PATH_MAX)))
        goto oom;
    b.p = files_at;
    prevlen = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t label = _get_varint(&b), shared = _get_varint(&b), rest = _get_varint(&b);
        char *p = d->path_arena + used;
        memcpy(prev + shared, b.p, (size_t)rest);
        b.p += rest;
        prevlen = (size_t)(shared + rest);
        if (!_path_below_root(prev, prevlen)) {
            free(prev);
            dlt_dataset_close(d); /* d->n is 0: the arena holds what was copied */
            return _damaged(err, root, "a path that is not below the folder");
        }
        memcpy(p, prev, prevlen);
        p[prevlen] = '\0';
        used += prevlen + 1;
        d->paths[i] = p;
        d->labels[i] = (int32_t)label;
    }
    d->n = (int64_t)n;
    free(prev);
    *out = d;
    return 0;
oom:
    free(prev);
    d->n = 0; /* the arena holds the paths (none yet) */
    if (!d->path_arena) {
        free(d->paths);
        d->paths = NULL;
    }
    dlt_dataset_close(d);
    return dlt_fail(err, -ENOMEM, "out of memory for the list of %s (%llu images)", root, (unsigned long long)n);
}

static uint64_t _splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

int dlt_folder_list_check_sample(const dlt_dataset *d, int count, uint64_t seed, dlt_err *err)
{
    uint64_t s = seed;
    for (int k = 0; k < count && d->n > 0; k++) {
        int64_t i = (int64_t)(_splitmix(&s) % (uint64_t)d->n);
        struct stat st;
        char path[PATH_MAX];
        if (dlt_imagefolder_path(d, i, path, sizeof(path)) != 0)
            return dlt_fail(err, -ENAMETOOLONG, "%s/%s: path too long", d->root, d->paths[i]);
        if (stat(path, &st) != 0)
            return dlt_fail(err, -errno, "%s: %s", path, strerror(errno));
        if (!S_ISREG(st.st_mode))
            return dlt_fail(err, -EINVAL, "%s: not a regular file here", path);
    }
    return 0;
}
