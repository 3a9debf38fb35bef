/* SPDX-License-Identifier: Apache-2.0 */
/* dataset: ImageFolder and MXNet RecordIO behind one indexed read. */
#include "config.h"

#include "trainer/data/dataset.h"

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

#include "trainer/common/io.h"
#include "trainer/common/status.h"
#include "trainer/data/dataset_internal.h"

#define RECORDIO_MAGIC 0xced7230au

static int _cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int _is_image(const char *name)
{
    const char *dot = strrchr(name, '.');
    return name[0] != '.' && dot && (!strcasecmp(dot, ".jpeg") || !strcasecmp(dot, ".jpg"));
}

/* The other extensions torchvision's ImageFolder reads (IMG_EXTENSIONS): images a user expects to
 * be used, which this reader leaves out. */
static int _is_other_image(const char *name)
{
    static const char *const ext[] = {".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp"};
    const char *dot = strrchr(name, '.');
    for (size_t i = 0; dot && i < sizeof(ext) / sizeof(ext[0]); i++)
        if (!strcasecmp(dot, ext[i]))
            return 1;
    return 0;
}

/* Whether name holds a control character (C0 or DEL). */
static int _has_control(const char *name)
{
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            return 1;
    return 0;
}

/* name with its control characters written as \n, \t or \xHH, for a message. */
static void _escape(const char *name, char *out, size_t len)
{
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)name; *p && o + 5 < len; p++) {
        if (*p == '\n')
            o += (size_t)snprintf(out + o, len - o, "\\n");
        else if (*p == '\t')
            o += (size_t)snprintf(out + o, len - o, "\\t");
        else if (*p < 0x20 || *p == 0x7f)
            o += (size_t)snprintf(out + o, len - o, "\\x%02x", *p);
        else
            out[o++] = (char)*p;
    }
    out[o] = '\0';
}

static void _note(int64_t *count, char *first, size_t firstlen, const char *dir, const char *name)
{
    if ((*count)++ == 0)
        snprintf(first, firstlen, "%.150s/%.150s", dir, name);
}

static void _free_list(char **v, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

/* st_mode's file type for a directory entry's d_type; 0 where stat() must say (a link, unknown). */
static mode_t _dtype_mode(unsigned char t)
{
    switch (t) {
    case DT_REG: return S_IFREG;
    case DT_DIR: return S_IFDIR;
    case DT_FIFO: return S_IFIFO;
    case DT_SOCK: return S_IFSOCK;
    case DT_CHR: return S_IFCHR;
    case DT_BLK: return S_IFBLK;
    default: return 0;
    }
}

/* Sorted names of the entries of dir that are directories (want_dirs) or image files; what is left
 * out is counted in lo (hidden entries, names starting with '.', aside). */
static int _list(const char *dir, int want_dirs, char ***out, int64_t *n, dlt_dataset_left_out *lo, char *err,
                 size_t errlen)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char **v = NULL;
    int64_t cap = 0, k = 0;
    if (!d)
        return dlt_fail(err, errlen, -errno, "cannot open %s: %s", dir, strerror(errno));
    while ((e = readdir(d)) != NULL) {
        char p[PATH_MAX];
        struct stat st;
        if (e->d_name[0] == '.')
            continue;
        /* The kind from the directory entry itself: one stat() per file of a 1.28M-image folder is
         * what loads a parallel filesystem's metadata server. Only a link (whose target decides)
         * or a filesystem that does not fill d_type is asked with stat(). */
        st.st_mode = _dtype_mode(e->d_type);
        if (!st.st_mode &&
            (snprintf(p, sizeof(p), "%s/%s", dir, e->d_name) >= (int)sizeof(p) || stat(p, &st) != 0)) {
            _note(&lo->unreadable, lo->first_unreadable, sizeof(lo->first_unreadable), dir, e->d_name);
            continue;
        }
        if (want_dirs ? !S_ISDIR(st.st_mode) : (!S_ISREG(st.st_mode) || !_is_image(e->d_name))) {
            if (!want_dirs && S_ISDIR(st.st_mode))
                _note(&lo->nested, lo->first_nested, sizeof(lo->first_nested), dir, e->d_name);
            else if (!S_ISREG(st.st_mode) && (_is_other_image(e->d_name) || _is_image(e->d_name)))
                _note(&lo->special, lo->first_special, sizeof(lo->first_special), dir, e->d_name);
            else if (_is_other_image(e->d_name) || _is_image(e->d_name))
                _note(&lo->images, lo->first_images, sizeof(lo->first_images), dir, e->d_name);
            else
                _note(&lo->other, lo->first_other, sizeof(lo->first_other), dir, e->d_name);
            continue;
        }
        if (want_dirs && _has_control(e->d_name)) {
            /* A class name is stored one per line (the checkpoint's state file, the data pack's
             * label list): one that cannot be, is refused here, for train, eval and pack alike. */
            char shown[256];
            _escape(e->d_name, shown, sizeof(shown));
            closedir(d);
            _free_list(v, k);
            return dlt_fail(err, errlen, -EINVAL, "class folder %s/%s: its name holds a control character (a "
                            "newline, a tab, ...), which cannot be stored as a class name: rename the folder", dir,
                            shown);
        }
        if (k == cap) {
            char **nv = realloc(v, (size_t)(cap ? 2 * cap : 256) * sizeof(*v));
            if (!nv)
                break;
            v = nv;
            cap = cap ? 2 * cap : 256;
        }
        if (!(v[k] = strdup(e->d_name)))
            break;
        k++;
    }
    closedir(d);
    if (e) { /* stopped early: out of memory (a shorter list would be a smaller data set, silently) */
        _free_list(v, k);
        return dlt_fail(err, errlen, -ENOMEM, "out of memory listing %s (%" PRId64 " entries so far)", dir, k);
    }
    if (k)
        qsort(v, (size_t)k, sizeof(*v), _cmp_str);
    *out = v;
    *n = k;
    return 0;
}

static int _add(dlt_dataset *d, int64_t *cap, const char *path, int32_t label)
{
    if (d->n == *cap) {
        int64_t nc = *cap ? *cap * 2 : 1024;
        char **np = realloc(d->paths, (size_t)nc * sizeof(char *));
        int32_t *nl;
        if (!np)
            return -ENOMEM;
        d->paths = np;
        nl = realloc(d->labels, (size_t)nc * sizeof(int32_t));
        if (!nl)
            return -ENOMEM;
        d->labels = nl;
        *cap = nc;
    }
    d->paths[d->n] = strdup(path);
    if (!d->paths[d->n])
        return -ENOMEM;
    d->labels[d->n++] = label;
    return 0;
}

/* ROOT/CLASS/IMAGE.JPEG: classes are the sorted subdirectories, numbered in that order. */
static int _read_class_folders(dlt_dataset *d, const char *root, int64_t *cap, char ***classes, int64_t *ncls,
                               char *err, size_t errlen)
{
    char **files = NULL;
    int64_t nfiles = 0;
    int rc;
    if ((rc = _list(root, 1, classes, ncls, &d->left, err, errlen)) != 0)
        return rc;
    if (*ncls < 1)
        return dlt_fail(err, errlen, -ENOENT, "%s has no class subdirectories (expected ROOT/CLASS/*.JPEG)", root);
    for (int64_t c = 0; c < *ncls; c++) {
        char dir[PATH_MAX], p[PATH_MAX];
        if (snprintf(dir, sizeof(dir), "%s/%s", root, (*classes)[c]) >= (int)sizeof(dir))
            continue;
        if ((rc = _list(dir, 0, &files, &nfiles, &d->left, err, errlen)) != 0)
            return rc;
        /* torchvision's ImageFolder refuses a class without images: its number would exist with
         * nothing to learn or score. */
        if (nfiles < 1)
            rc = dlt_fail(err, errlen, -ENOENT,
                          "class folder %s holds no .JPEG/.jpg images (as torchvision's ImageFolder, a class "
                          "without images is refused): add images or remove the folder",
                          dir);
        for (int64_t i = 0; i < nfiles && rc == 0; i++) {
            if (snprintf(p, sizeof(p), "%s/%s", dir, files[i]) >= (int)sizeof(p))
                continue; /* a path longer than PATH_MAX cannot be opened anyway */
            if (_add(d, cap, p, (int32_t)c) != 0)
                rc = dlt_fail(err, errlen, -ENOMEM, "out of memory listing %s", dir);
        }
        _free_list(files, nfiles);
        files = NULL;
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* A labels file's "FILENAME CLASS" lines, in file order. */
typedef struct {
    char **files, **classes;
    int64_t n, cap;
} label_lines;

static void _lines_free(label_lines *l)
{
    _free_list(l->files, l->n);
    _free_list(l->classes, l->n);
    memset(l, 0, sizeof(*l));
}

/* The lines of labels_file into l (blank lines and # comments aside). A line that is not
 * "FILENAME CLASS" would drop its image from the set without a word: it is refused, as is a read
 * error (which would end the list early). On failure l holds what was read, for _lines_free. */
static int _read_lines(const char *labels_file, label_lines *l, char *err, size_t errlen)
{
    FILE *f = dlt_fopen_regular("labels file", labels_file, "r", err, errlen);
    char line[1024];
    long long lineno = 0;
    int rc = 0;
    if (!f)
        return -errno;
    while (rc == 0 && fgets(line, sizeof(line), f)) {
        char fn[512], cl[256], extra[2];
        int fields;
        lineno++;
        if (!strchr(line, '\n') && !feof(f)) {
            rc = dlt_fail(err, errlen, -EINVAL, "labels file %s, line %lld: longer than %zu characters", labels_file,
                          lineno, sizeof(line) - 2);
            break;
        }
        fields = sscanf(line, "%511s %255s %1s", fn, cl, extra);
        if (fields <= 0 || fn[0] == '#')
            continue;
        if (fields != 2 || strlen(fn) >= sizeof(fn) - 1 || strlen(cl) >= sizeof(cl) - 1) {
            line[strcspn(line, "\n")] = '\0';
            rc = dlt_fail(err, errlen, -EINVAL,
                          "labels file %s, line %lld: '%.80s' is not \"FILENAME CLASS\" (one file name and one "
                          "class, separated by white space)",
                          labels_file, lineno, line);
            break;
        }
        if (l->n == l->cap) {
            int64_t nc = l->cap ? 2 * l->cap : 1024;
            char **nf = realloc(l->files, (size_t)nc * sizeof(char *)), **ncl;
            if (nf)
                l->files = nf;
            ncl = nf ? realloc(l->classes, (size_t)nc * sizeof(char *)) : NULL;
            if (ncl)
                l->classes = ncl;
            if (!nf || !ncl) {
                rc = dlt_fail(err, errlen, -ENOMEM, "out of memory reading labels file %s (line %lld)", labels_file,
                              lineno);
                break;
            }
            l->cap = nc;
        }
        l->files[l->n] = strdup(fn);
        l->classes[l->n] = strdup(cl);
        l->n++; /* counted even when a copy failed: _lines_free frees both (free(NULL) is nothing) */
        if (!l->files[l->n - 1] || !l->classes[l->n - 1])
            rc = dlt_fail(err, errlen, -ENOMEM, "out of memory reading labels file %s (line %lld)", labels_file,
                          lineno);
    }
    if (rc == 0 && ferror(f))
        rc = dlt_fail(err, errlen, -EIO, "reading labels file %s after line %lld: %s", labels_file, lineno,
                      strerror(errno));
    fclose(f);
    return rc;
}

/* A flat folder and a labels file of "FILENAME CLASS" lines: class names numbered in sorted order.
 * A line naming no file, and an image no line names, are left out and counted (d->left). */
static int _read_labels(dlt_dataset *d, const char *root, const char *labels_file, int64_t *cap, char ***classes,
                        int64_t *ncls, char *err, size_t errlen)
{
    label_lines l;
    dlt_dataset_left_out scratch;
    char **sorted = NULL, **files = NULL;
    int64_t nfiles = 0, u = 0;
    int rc;
    memset(&l, 0, sizeof(l));
    if ((rc = _read_lines(labels_file, &l, err, errlen)) != 0)
        goto out;
    if (l.n < 1) {
        rc = dlt_fail(err, errlen, -EINVAL, "labels file %s lists no \"FILENAME CLASS\" lines", labels_file);
        goto out;
    }
    if (!(sorted = malloc((size_t)l.n * sizeof(char *)))) {
        rc = dlt_fail(err, errlen, -ENOMEM, "out of memory reading labels file %s", labels_file);
        goto out;
    }
    /* The same file twice would be scored twice. */
    memcpy(sorted, l.files, (size_t)l.n * sizeof(char *));
    qsort(sorted, (size_t)l.n, sizeof(char *), _cmp_str);
    for (int64_t i = 1; i < l.n; i++)
        if (!strcmp(sorted[i - 1], sorted[i])) {
            rc = dlt_fail(err, errlen, -EINVAL, "labels file %s lists %.300s more than once", labels_file, sorted[i]);
            goto out;
        }
    memcpy(sorted, l.classes, (size_t)l.n * sizeof(char *));
    qsort(sorted, (size_t)l.n, sizeof(char *), _cmp_str);
    for (int64_t i = 0; i < l.n; i++)
        if (!u || strcmp(sorted[u - 1], sorted[i]))
            sorted[u++] = sorted[i];
    if (!(*classes = calloc((size_t)u, sizeof(char *)))) {
        rc = dlt_fail(err, errlen, -ENOMEM, "out of memory reading labels file %s", labels_file);
        goto out;
    }
    *ncls = u;
    for (int64_t i = 0; i < u; i++)
        if (!((*classes)[i] = strdup(sorted[i]))) {
            rc = dlt_fail(err, errlen, -ENOMEM, "out of memory reading labels file %s", labels_file);
            goto out;
        }
    for (int64_t i = 0; i < l.n; i++) {
        char p[PATH_MAX];
        struct stat st;
        char *const *hit = bsearch(&l.classes[i], *classes, (size_t)u, sizeof(char *), _cmp_str);
        /* A line naming no file would have its read fail and another image replace it: in an
         * evaluation that image would be scored twice. Left out and counted instead. */
        if (snprintf(p, sizeof(p), "%s/%s", root, l.files[i]) >= (int)sizeof(p) || stat(p, &st) != 0 ||
            !S_ISREG(st.st_mode)) {
            _note(&d->left.missing, d->left.first_missing, sizeof(d->left.first_missing), root, l.files[i]);
            continue;
        }
        if (_add(d, cap, p, (int32_t)(hit - *classes)) != 0) {
            rc = dlt_fail(err, errlen, -ENOMEM, "out of memory reading labels file %s (%" PRId64 " images so far)",
                          labels_file, d->n);
            goto out;
        }
    }
    if (d->n < 1) {
        rc = dlt_fail(err, errlen, -ENOENT, "none of the %" PRId64 " file(s) labels file %s names is in %s (first: "
                      "%.300s)", l.n, labels_file, root, l.files[0]);
        goto out;
    }
    /* Images of the folder that no line names are left out: count them. */
    memset(&scratch, 0, sizeof(scratch));
    qsort(l.files, (size_t)l.n, sizeof(char *), _cmp_str);
    if ((rc = _list(root, 0, &files, &nfiles, &scratch, err, errlen)) != 0)
        goto out;
    for (int64_t i = 0; i < nfiles; i++)
        if (!bsearch(&files[i], l.files, (size_t)l.n, sizeof(char *), _cmp_str))
            _note(&d->left.unlisted, d->left.first_unlisted, sizeof(d->left.first_unlisted), root, files[i]);
out:
    _free_list(files, nfiles);
    free(sorted);
    _lines_free(&l);
    return rc;
}

int dlt_dataset_open_folder(dlt_dataset **out, const char *root, const char *labels_file, char *err, size_t errlen)
{
    dlt_dataset *d = calloc(1, sizeof(*d));
    char **classes = NULL;
    int64_t ncls = 0, cap = 0;
    int rc;
    *out = NULL;
    if (!d)
        return dlt_fail(err, errlen, -ENOMEM, "out of memory opening %s", root);
    d->fd = -1;
    rc = labels_file ? _read_labels(d, root, labels_file, &cap, &classes, &ncls, err, errlen)
                     : _read_class_folders(d, root, &cap, &classes, &ncls, err, errlen);
    if (rc == 0 && d->n < 1)
        rc = dlt_fail(err, errlen, -ENOENT, "%s holds no .JPEG/.jpg images", root);
    if (rc != 0) {
        _free_list(classes, ncls);
        dlt_dataset_close(d);
        return rc;
    }
    d->class_names = classes;
    d->nclasses = d->local_classes = (int)ncls;
    d->numbered = labels_file != NULL;
    snprintf(d->root, sizeof(d->root), "%s", root);
    *out = d;
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
        _free_list(d->paths, d->n);
    }
    if (d->class_names)
        _free_list(d->class_names, d->nclasses);
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
        {l->images, "image file(s) not in .JPEG/.jpg (not decoded here: convert them to JPEG)", l->first_images},
        {l->special, "entr(y/ies) named as images that are not regular files (a FIFO, a device, a socket)",
         l->first_special},
        {l->unreadable, "dangling symbolic link(s) or unreadable entries", l->first_unreadable},
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

int dlt_dataset_map_classes(dlt_dataset *d, const char *list, char *note, size_t notelen, char *err, size_t errlen)
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
        rc = n < 1 ? dlt_fail(err, errlen, -EINVAL, "an empty class list") : -ENOMEM;
        goto out;
    }
    memcpy(sorted, names, (size_t)n * sizeof(char *));
    qsort(sorted, (size_t)n, sizeof(char *), _cmp_str);
    for (int c = 0; c < d->local_classes; c++) {
        char num[16];
        const char *mine = d->class_names ? d->class_names[c] : (snprintf(num, sizeof(num), "%d", c), num);
        char *const *hit = bsearch(&mine, sorted, (size_t)n, sizeof(char *), _cmp_str);
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
        rc = dlt_fail(err, errlen, -EINVAL,
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
        snprintf(note, notelen,
                 "%d class(es) given as numbers are taken as positions 0..%d in the class list%s", by_number, n - 1,
                 zero ? "" : "; 0 is never used: if the numbers count from 1, every image is scored as the next class");
    /* The data's classes now mean the list's: its names, its count. */
    if (d->class_names)
        _free_list(d->class_names, d->nclasses);
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

static uint64_t _fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

void dlt_dataset_digest(const dlt_dataset *d, uint64_t *files, uint64_t *classes)
{
    uint64_t h = 0xcbf29ce484222325ull, c = 0xcbf29ce484222325ull;
    size_t root = strlen(d->root);
    for (int k = 0; d->class_names && k < d->nclasses; k++)
        c = _fnv(c, d->class_names[k], strlen(d->class_names[k]) + 1);
    c = _fnv(c, &d->nclasses, sizeof(d->nclasses));
    if (d->recordio) {
        /* The index and the file's size: the same pair on every rank (wherever it is mounted). */
        struct stat st;
        uint64_t size = fstat(d->fd, &st) == 0 ? (uint64_t)st.st_size : 0;
        h = _fnv(h, d->offsets, (size_t)d->n * sizeof(uint64_t));
        h = _fnv(h, &size, sizeof(size));
    } else {
        /* Paths under the root (ranks may mount the same data at different places) and labels. */
        for (int64_t i = 0; i < d->n; i++) {
            const char *rel = strncmp(d->paths[i], d->root, root) ? d->paths[i] : d->paths[i] + root;
            h = _fnv(h, rel, strlen(rel) + 1);
            h = _fnv(h, &d->labels[i], sizeof(d->labels[i]));
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

static int _grow(uint8_t **buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    uint8_t *nb = realloc(*buf, need);
    if (!nb)
        return -ENOMEM;
    *buf = nb;
    *cap = need;
    return 0;
}

static uint32_t _u32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* One logical record at off: parts with cflag 0 (whole) or 1, 2..., 3, rejoined with the magic
 * the writer cut out of the data between them. */
static int _read_record(dlt_dataset *d, uint64_t off, uint8_t **buf, size_t *cap, size_t *len, char *err,
                        size_t errlen)
{
    size_t total = 0;
    for (int part = 0; part < 4096; part++) {
        uint8_t h[8];
        uint32_t lrec, plen, cflag;
        if (pread(d->fd, h, 8, (off_t)off) != 8)
            return dlt_fail(err, errlen, -EINVAL, "record at offset %llu: truncated header", (unsigned long long)off);
        if (_u32(h) != RECORDIO_MAGIC)
            return dlt_fail(err, errlen, -EINVAL, "record at offset %llu: bad magic 0x%08x", (unsigned long long)off,
                         _u32(h));
        lrec = _u32(h + 4);
        cflag = lrec >> 29;
        plen = lrec & ((1u << 29) - 1);
        if (total + plen + 4 > DLT_DATASET_MAX_FILE)
            return dlt_fail(err, errlen, -EINVAL, "record at offset %llu: length %u too large", (unsigned long long)off,
                         plen);
        if (_grow(buf, cap, total + plen + 4) != 0)
            return -ENOMEM;
        if (part > 0) {
            uint32_t m = RECORDIO_MAGIC;
            memcpy(*buf + total, &m, 4);
            total += 4;
        }
        if (plen && pread(d->fd, *buf + total, plen, (off_t)(off + 8)) != (ssize_t)plen)
            return dlt_fail(err, errlen, -EINVAL, "record at offset %llu: truncated data (length %u)",
                         (unsigned long long)off, plen);
        total += plen;
        off += 8 + ((plen + 3u) & ~3u);
        if ((part == 0 && cflag == 0) || cflag == 3)
            break;
        if ((part == 0 && cflag != 1) || (part > 0 && cflag != 2))
            return dlt_fail(err, errlen, -EINVAL, "record at offset %llu: broken multi-part sequence (cflag %u)",
                         (unsigned long long)off, cflag);
    }
    *len = total;
    return 0;
}

/* The .idx beside a .rec (im2rec's naming). */
static void _idx_path(const char *rec_path, char *out, size_t outlen)
{
    size_t n = strlen(rec_path);
    if (n > 4 && !strcmp(rec_path + n - 4, ".rec"))
        snprintf(out, outlen, "%.*s.idx", (int)(n - 4), rec_path);
    else
        snprintf(out, outlen, "%s.idx", rec_path);
}

/* A whole number of up to 19 digits at *p (advanced past it). */
static int _parse_u64(const char **p, const char *end, unsigned long long *v)
{
    const char *s = *p;
    unsigned long long x = 0;
    int digits = 0;
    while (s < end && *s >= '0' && *s <= '9' && digits < 19) {
        x = x * 10 + (unsigned long long)(*s++ - '0');
        digits++;
    }
    if (!digits || (s < end && *s >= '0' && *s <= '9'))
        return -1;
    *v = x;
    *p = s;
    return 0;
}

/* Reads the whole index file; every line must be "KEY<white space>OFFSET\n" (im2rec writes a tab). A
 * damaged index would shift or drop records without a word, so the first line that is not says
 * where and why. */
static int _read_index(dlt_dataset *d, const char *idx_path, char *err, size_t errlen)
{
    int fd = open(idx_path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    char *text;
    const char *p, *end;
    int64_t cap = 0;
    long long lineno = 0;
    if (fd < 0)
        return dlt_fail(err, errlen, -errno, "cannot open the index %s: %s (im2rec writes it beside the .rec)",
                        idx_path, strerror(errno));
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > ((off_t)1 << 34)) {
        close(fd);
        return dlt_fail(err, errlen, -EINVAL, "the index %s is not a regular file under 16 GiB", idx_path);
    }
    text = malloc((size_t)st.st_size + 1);
    if (!text) {
        close(fd);
        return -ENOMEM;
    }
    if (dlt_read_full(fd, text, (size_t)st.st_size) != (size_t)st.st_size) {
        int e = errno;
        close(fd);
        free(text);
        return dlt_fail(err, errlen, -EIO, "cannot read the index %s: %s", idx_path, strerror(e));
    }
    close(fd);
    p = text;
    end = text + st.st_size;
    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p)), *s = p;
        unsigned long long key, off;
        lineno++;
        if (!eol) {
            free(text);
            return dlt_fail(err, errlen, -EINVAL,
                            "index %s, line %lld: cut short (no end of line): the index was truncated; write it "
                            "again (dltrain data pack, or im2rec)",
                            idx_path, lineno);
        }
        if (_parse_u64(&s, eol, &key) == 0 && s < eol && (*s == '\t' || *s == ' '))
            while (s < eol && (*s == '\t' || *s == ' '))
                s++;
        else
            s = p; /* fails below */
        if (s == p || _parse_u64(&s, eol, &off) != 0 || (s < eol && !(*s == '\r' && s + 1 == eol))) {
            int w = (int)(eol - p < 40 ? eol - p : 40);
            int rc = dlt_fail(err, errlen, -EINVAL, "index %s, line %lld: '%.*s' is not \"KEY<TAB>OFFSET\"", idx_path,
                              lineno, w, p);
            free(text);
            return rc;
        }
        (void)key;
        if (d->n == cap) {
            uint64_t *no = realloc(d->offsets, (size_t)(cap = cap ? 2 * cap : 1024) * sizeof(uint64_t));
            long long *nl = no ? realloc(d->idx_lines, (size_t)cap * sizeof(long long)) : NULL;
            if (no)
                d->offsets = no;
            if (nl)
                d->idx_lines = nl;
            if (!no || !nl) {
                free(text);
                return -ENOMEM;
            }
        }
        d->idx_lines[d->n] = lineno;
        d->offsets[d->n++] = off;
        p = eol + 1;
    }
    free(text);
    return 0;
}

/* Every record the index lists, checked against the .rec: inside the file, after the one before
 * it (a duplicated or reordered line would read one record twice), the RecordIO magic, a length
 * that fits, and an image header with a whole label. One pread of a few dozen bytes per record, the
 * read that finding the class count needs anyway. The class count is the largest label + 1 over
 * all of them. */
static int _check_records(dlt_dataset *d, const char *idx_path, int *maxlabel, char *err, size_t errlen)
{
    struct stat st;
    uint64_t size, next = 0;
    int last_whole = 0;
    if (fstat(d->fd, &st) != 0 || !S_ISREG(st.st_mode))
        return dlt_fail(err, errlen, -EINVAL, "%s is not a regular file", d->rec_path);
    size = (uint64_t)st.st_size;
    *maxlabel = -1;
    for (int64_t i = 0; i < d->n; i++) {
        uint8_t h[8 + 28];
        uint64_t off = d->offsets[i];
        uint32_t lrec, plen, cflag, flag;
        float label;
        ssize_t got;
        const char *why = NULL;
        char whybuf[160];
        if (off < next)
            why = i && off == d->offsets[i - 1] ? "the same offset as the line before (a duplicated line)"
                                                : "before the end of the record the line before lists (lines out of "
                                                  "order or overlapping records)";
        else if (off + 8 > size) {
            snprintf(whybuf, sizeof(whybuf), "offset %llu is past the end of the .rec (%llu bytes): the .rec was truncated",
                     (unsigned long long)off, (unsigned long long)size);
            why = whybuf;
        }
        if (!why) {
            got = pread(d->fd, h, sizeof(h), (off_t)off);
            if (got < 8)
                return dlt_fail(err, errlen, -EIO, "%s: cannot read the record at offset %llu: %s", d->rec_path,
                                (unsigned long long)off, got < 0 ? strerror(errno) : "short read");
            lrec = _u32(h + 4);
            cflag = lrec >> 29;
            plen = lrec & ((1u << 29) - 1);
            if (_u32(h) != RECORDIO_MAGIC) {
                snprintf(whybuf, sizeof(whybuf), "no record starts at offset %llu (magic 0x%08x, not 0x%08x)",
                         (unsigned long long)off, _u32(h), RECORDIO_MAGIC);
                why = whybuf;
            } else if (off + 8 + plen > size) {
                snprintf(whybuf, sizeof(whybuf),
                         "the record at offset %llu (%u bytes) runs past the end of the .rec (%llu bytes): the "
                         ".rec was truncated",
                         (unsigned long long)off, plen, (unsigned long long)size);
                why = whybuf;
            } else if ((cflag != 0 && cflag != 1) || plen < 16 || got < 24) {
                snprintf(whybuf, sizeof(whybuf), "the record at offset %llu has no image header (length %u, part %u)",
                         (unsigned long long)off, plen, cflag);
                why = whybuf;
            } else {
                memcpy(&flag, h + 8, 4);
                memcpy(&label, h + 12, 4);
                if (flag > 0) { /* that many float labels follow the header; the first is the class */
                    if (flag > 1024 || plen < 28 || got < 8 + 28)
                        label = -1.f;
                    else
                        memcpy(&label, h + 8 + 24, 4);
                }
                if (!(label >= 0 && label < 1e6) || label != (float)(int)label) {
                    snprintf(whybuf, sizeof(whybuf), "the record at offset %llu has label %g, not a class number",
                             (unsigned long long)off, (double)label);
                    why = whybuf;
                } else if ((int)label > *maxlabel)
                    *maxlabel = (int)label;
            }
        }
        if (why)
            return dlt_fail(err, errlen, -EINVAL, "index %s, line %lld: %s; refusing the pair %s + %s", idx_path,
                            d->idx_lines[i], why, d->rec_path, idx_path);
        next = off + 8 + ((plen + 3u) & ~3u);
        last_whole = cflag == 0;
    }
    /* A whole last record ends the file (im2rec and dltrain data pack write them back to back): bytes
     * after it are records an index cut short does not list (a pack or a copy that did not finish). */
    if (d->n > 0 && last_whole && next < size)
        return dlt_fail(err, errlen, -EINVAL, "index %s lists records up to byte %llu of the %llu-byte %s: the index "
                        "is cut short (a pack or copy that did not finish?): pack again, or rebuild the index",
                        idx_path, (unsigned long long)next, (unsigned long long)size, d->rec_path);
    return 0;
}

/* PATH.classes beside PATH.rec (dltrain data pack writes it): the class names in label order, one a
 * line. With it the class count is the names' count (a class whose records were all left out is
 * still counted) and validation classes can be matched by name; without it the classes have no
 * names. */
static int _read_class_file(dlt_dataset *d, char *err, size_t errlen)
{
    char path[PATH_MAX + 16], line[1024];
    size_t n = strlen(d->rec_path);
    FILE *f;
    int k = 0, cap = 0;
    long long lineno = 0;
    if (n > 4 && !strcmp(d->rec_path + n - 4, ".rec"))
        snprintf(path, sizeof(path), "%.*s.classes", (int)(n - 4), d->rec_path);
    else
        snprintf(path, sizeof(path), "%s.classes", d->rec_path);
    if (access(path, F_OK) != 0 && errno == ENOENT)
        return 0;
    if (!(f = dlt_fopen_regular(NULL, path, "r", err, errlen)))
        return -errno;
    while (fgets(line, sizeof(line), f)) {
        size_t l = strcspn(line, "\r\n");
        lineno++;
        if (!line[l] && !feof(f)) {
            fclose(f);
            return dlt_fail(err, errlen, -EINVAL, "%s, line %lld: longer than %zu characters", path, lineno,
                            sizeof(line) - 2);
        }
        line[l] = '\0';
        if (k == cap) {
            char **nv = realloc(d->class_names, (size_t)(cap = cap ? 2 * cap : 256) * sizeof(char *));
            if (!nv) {
                fclose(f);
                d->nclasses = k;
                return -ENOMEM;
            }
            d->class_names = nv;
        }
        if (!line[0] || !(d->class_names[k] = strdup(line))) {
            fclose(f);
            d->nclasses = k;
            return line[0] ? -ENOMEM : dlt_fail(err, errlen, -EINVAL, "%s, line %lld: an empty class name", path, lineno);
        }
        k++;
    }
    fclose(f);
    if (k < d->nclasses) {
        int have = d->nclasses;
        d->nclasses = k;
        return dlt_fail(err, errlen, -EINVAL, "%s names %d classes but %s has labels up to %d: the files do not belong "
                        "together", path, k, d->rec_path, have - 1);
    }
    d->nclasses = k;
    {
        /* A name twice would make matching by name ambiguous. */
        char **sorted = malloc((size_t)(k ? k : 1) * sizeof(char *));
        const char *dup = NULL;
        if (!sorted)
            return -ENOMEM;
        if (k)
            memcpy(sorted, d->class_names, (size_t)k * sizeof(char *));
        qsort(sorted, (size_t)k, sizeof(char *), _cmp_str);
        for (int i = 1; i < k && !dup; i++)
            if (!strcmp(sorted[i - 1], sorted[i]))
                dup = sorted[i];
        if (dup) {
            int rc = dlt_fail(err, errlen, -EINVAL, "%s names the class '%.200s' more than once", path, dup);
            free(sorted);
            return rc;
        }
        free(sorted);
    }
    return 0;
}

int dlt_dataset_open_recordio(dlt_dataset **out, const char *rec_path, char *err, size_t errlen)
{
    dlt_dataset *d = calloc(1, sizeof(*d));
    char idx_path[PATH_MAX];
    int maxlabel = -1, rc;
    *out = NULL;
    if (!d)
        return -ENOMEM;
    d->recordio = 1;
    snprintf(d->rec_path, sizeof(d->rec_path), "%s", rec_path);
    snprintf(d->root, sizeof(d->root), "%s", rec_path);
    _idx_path(rec_path, idx_path, sizeof(idx_path));
    d->fd = dlt_open_regular(NULL, rec_path, O_RDONLY, 0, err, errlen);
    if (d->fd < 0) {
        int e = -d->fd;
        dlt_dataset_close(d);
        return -e;
    }
    if ((rc = _read_index(d, idx_path, err, errlen)) != 0 ||
        (rc = _check_records(d, idx_path, &maxlabel, err, errlen)) != 0) {
        dlt_dataset_close(d);
        return rc;
    }
    if (d->n < 1) {
        dlt_dataset_close(d);
        return dlt_fail(err, errlen, -EINVAL, "%s lists no records", idx_path);
    }
    d->nclasses = maxlabel + 1;
    if ((rc = _read_class_file(d, err, errlen)) != 0) {
        dlt_dataset_close(d);
        return rc;
    }
    d->local_classes = d->nclasses;
    d->numbered = 1;
    *out = d;
    return 0;
}

int dlt_dataset_read(dlt_dataset *d, int64_t i, uint8_t **buf, size_t *cap, size_t *len, int32_t *label, char *name,
                     size_t namelen, char *err, size_t errlen)
{
    if (i < 0 || i >= d->n)
        return dlt_fail(err, errlen, -EINVAL, "sample %lld out of range", (long long)i);
    if (!d->recordio) {
        /* O_NONBLOCK: a file swapped for a FIFO since the listing is refused below, not waited on
         * (no effect on a regular file's reads). */
        int fd = open(d->paths[i], O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        struct stat st;
        size_t got = 0;
        snprintf(name, namelen, "%s", d->paths[i]);
        *label = d->label_map ? d->label_map[d->labels[i]] : d->labels[i];
        if (fd < 0)
            return dlt_fail(err, errlen, -errno, "cannot open: %s", strerror(errno));
        if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > DLT_DATASET_MAX_FILE) {
            close(fd);
            return dlt_fail(err, errlen, -EINVAL, "not a regular file under %u MiB", DLT_DATASET_MAX_FILE >> 20);
        }
        if (_grow(buf, cap, (size_t)st.st_size + 1) != 0) {
            close(fd);
            return -ENOMEM;
        }
        got = dlt_read_full(fd, *buf, (size_t)st.st_size);
        close(fd);
        *len = got;
        return 0;
    }
    {
        int rc;
        uint32_t flag;
        float lab;
        size_t skip;
        snprintf(name, namelen, "%s@%llu", d->rec_path, (unsigned long long)d->offsets[i]);
        if ((rc = _read_record(d, d->offsets[i], buf, cap, len, err, errlen)) != 0)
            return rc;
        if (*len < 24)
            return dlt_fail(err, errlen, -EINVAL, "record shorter than its image header");
        memcpy(&flag, *buf, 4);
        memcpy(&lab, *buf + 4, 4);
        /* flag > 0: that many float labels follow the header; the first is the class. */
        skip = 24 + (size_t)flag * 4;
        if (flag > 1024 || skip > *len)
            return dlt_fail(err, errlen, -EINVAL, "record header claims %u labels", flag);
        if (flag > 0)
            memcpy(&lab, *buf + 24, 4);
        if (!(lab >= 0 && lab < 1e6))
            return dlt_fail(err, errlen, -EINVAL, "record label out of range");
        /* The class count came from the headers when the file was opened: a label beyond it (a
         * multi-label record, or a header changed since) would fail the loss on this rank alone. */
        if ((int)lab >= d->local_classes)
            return dlt_fail(err, errlen, -EINVAL, "record label %d outside the %d classes the file's headers give",
                            (int)lab, d->local_classes);
        *label = d->label_map ? d->label_map[(int)lab] : (int32_t)lab;
        memmove(*buf, *buf + skip, *len - skip);
        *len -= skip;
        return 0;
    }
}

int dlt_recordio_create(dlt_recordio_writer *w, const char *rec_path, char *err, size_t errlen)
{
    char idx[PATH_MAX];
    size_t n = strlen(rec_path);
    memset(w, 0, sizeof(*w));
    if (n > 4 && !strcmp(rec_path + n - 4, ".rec"))
        snprintf(idx, sizeof(idx), "%.*s.idx", (int)(n - 4), rec_path);
    else
        snprintf(idx, sizeof(idx), "%s.idx", rec_path);
    w->fd = dlt_open_regular(NULL, rec_path, O_WRONLY | O_CREAT | O_TRUNC, 0644, err, errlen);
    if (w->fd < 0)
        return w->fd;
    w->idx = dlt_fopen_regular(NULL, idx, "w", err, errlen);
    if (!w->idx) {
        int e = errno;
        close(w->fd);
        return -e;
    }
    return 0;
}

int dlt_recordio_append(dlt_recordio_writer *w, uint64_t id, float label, const uint8_t *data, size_t len, char *err,
                        size_t errlen)
{
    /* im2rec's IRHeader: flag, label, id, id2; then the image. One part (no magic inside is split:
     * the reader handles split records written by other tools). */
    uint8_t hdr[8 + 24];
    uint32_t magic = RECORDIO_MAGIC, flag = 0, lrec;
    uint64_t id2 = 0;
    size_t body = 24 + len, pad = (4 - body % 4) % 4;
    static const uint8_t zeros[4] = {0};
    if (body >= (1u << 29))
        return dlt_fail(err, errlen, -EINVAL, "image of %zu bytes too large for a record", len);
    lrec = (uint32_t)body;
    memcpy(hdr, &magic, 4);
    memcpy(hdr + 4, &lrec, 4);
    memcpy(hdr + 8, &flag, 4);
    memcpy(hdr + 12, &label, 4);
    memcpy(hdr + 16, &id, 8);
    memcpy(hdr + 24, &id2, 8);
    if (dlt_write_all(w->fd, hdr, sizeof(hdr)) || dlt_write_all(w->fd, data, len) || dlt_write_all(w->fd, zeros, pad))
        return dlt_fail(err, errlen, -errno, "write failed: %s", strerror(errno));
    fprintf(w->idx, "%llu\t%llu\n", (unsigned long long)id, (unsigned long long)w->offset);
    w->offset += sizeof(hdr) + len + pad;
    return 0;
}

int dlt_recordio_write_classes(const char *rec_path, const dlt_dataset *d, char *err, size_t errlen)
{
    char path[PATH_MAX + 16], *list = dlt_dataset_class_list(d);
    size_t n = strlen(rec_path);
    FILE *f;
    int rc = 0;
    if (!list)
        return dlt_fail(err, errlen, -EINVAL, "the classes have no names that can be written one a line");
    if (n > 4 && !strcmp(rec_path + n - 4, ".rec"))
        snprintf(path, sizeof(path), "%.*s.classes", (int)(n - 4), rec_path);
    else
        snprintf(path, sizeof(path), "%s.classes", rec_path);
    if (!(f = dlt_fopen_regular(NULL, path, "w", err, errlen)))
        rc = -errno;
    else if (fprintf(f, "%s\n", list) < 0 || fclose(f) != 0)
        rc = dlt_fail(err, errlen, -EIO, "writing %s failed", path);
    free(list);
    return rc;
}

int dlt_recordio_close(dlt_recordio_writer *w, char *err, size_t errlen)
{
    int rc = 0;
    if (fsync(w->fd) != 0 || close(w->fd) != 0)
        rc = dlt_fail(err, errlen, -errno, "closing the .rec failed: %s", strerror(errno));
    if (fclose(w->idx) != 0 && !rc)
        rc = dlt_fail(err, errlen, -EIO, "closing the .idx failed");
    return rc;
}
