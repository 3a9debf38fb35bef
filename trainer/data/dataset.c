/* SPDX-License-Identifier: Apache-2.0 */
/* dataset: ImageFolder and MXNet RecordIO behind one indexed read. */
#include "config.h"

#include "trainer/data/dataset.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trainer/common/io.h"
#include "trainer/common/status.h"

#define RECORDIO_MAGIC 0xced7230au

struct dlt_dataset {
    int recordio;
    int64_t n;
    int nclasses;
    char **class_names;
    char **paths;      /* folder: file paths */
    int32_t *labels;   /* folder: labels; recordio: unused */
    uint64_t *offsets; /* recordio: record offsets */
    int fd;            /* recordio */
    char rec_path[PATH_MAX];
    char root[PATH_MAX]; /* folder root, or the .rec path */
};

static int _cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int _is_image(const char *name)
{
    const char *dot = strrchr(name, '.');
    return name[0] != '.' && dot && (!strcasecmp(dot, ".jpeg") || !strcasecmp(dot, ".jpg"));
}

/* Sorted names of the entries of dir that are directories (want_dirs) or image files. */
static int _list(const char *dir, int want_dirs, char ***out, int64_t *n, char *err, size_t errlen)
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
        if (snprintf(p, sizeof(p), "%s/%s", dir, e->d_name) >= (int)sizeof(p) || stat(p, &st) != 0)
            continue;
        if (want_dirs ? !S_ISDIR(st.st_mode) : (!S_ISREG(st.st_mode) || !_is_image(e->d_name)))
            continue;
        if (k == cap) {
            char **nv = realloc(v, (size_t)(cap = cap ? 2 * cap : 256) * sizeof(*v));
            if (!nv)
                break;
            v = nv;
        }
        v[k] = strdup(e->d_name);
        if (!v[k])
            break;
        k++;
    }
    closedir(d);
    if (k)
        qsort(v, (size_t)k, sizeof(*v), _cmp_str);
    *out = v;
    *n = k;
    return 0;
}

static void _free_list(char **v, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
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

int dlt_dataset_open_folder(dlt_dataset **out, const char *root, const char *labels_file, char *err, size_t errlen)
{
    dlt_dataset *d = calloc(1, sizeof(*d));
    char **classes = NULL, **files = NULL;
    int64_t ncls = 0, nfiles = 0, cap = 0;
    int rc;
    *out = NULL;
    if (!d)
        return -ENOMEM;
    d->fd = -1;
    if (!labels_file) {
        if ((rc = _list(root, 1, &classes, &ncls, err, errlen)) != 0)
            goto fail;
        if (ncls < 1) {
            rc = dlt_fail(err, errlen, -ENOENT, "%s has no class subdirectories (expected ROOT/CLASS/*.JPEG)", root);
            goto fail;
        }
        for (int64_t c = 0; c < ncls; c++) {
            char dir[PATH_MAX], p[PATH_MAX];
            if (snprintf(dir, sizeof(dir), "%s/%s", root, classes[c]) >= (int)sizeof(dir))
                continue;
            if ((rc = _list(dir, 0, &files, &nfiles, err, errlen)) != 0)
                goto fail;
            for (int64_t i = 0; i < nfiles; i++) {
                if (snprintf(p, sizeof(p), "%s/%s", dir, files[i]) >= (int)sizeof(p))
                    continue; /* a path longer than PATH_MAX cannot be opened anyway */
                if ((rc = _add(d, &cap, p, (int32_t)c)) != 0)
                    goto fail;
            }
            _free_list(files, nfiles);
            files = NULL;
        }
    } else {
        /* Flat folder + "FILENAME CLASS" lines; class names are numbered in sorted order. */
        FILE *f = fopen(labels_file, "r");
        char line[1024];
        char **names = NULL, **fnames = NULL;
        int64_t nl = 0, capl = 0;
        long long lineno = 0;
        if (!f) {
            rc = dlt_fail(err, errlen, -errno, "cannot open labels file %s: %s", labels_file, strerror(errno));
            goto fail;
        }
        while (fgets(line, sizeof(line), f)) {
            char fn[512], cl[256], extra[2];
            int fields;
            lineno++;
            /* A line that is not "FILENAME CLASS" would drop its image from the set without a word:
             * refuse it (blank lines and # comments aside). */
            if (!strchr(line, '\n') && !feof(f)) {
                fclose(f);
                _free_list(names, nl);
                _free_list(fnames, nl);
                rc = dlt_fail(err, errlen, -EINVAL, "labels file %s, line %lld: longer than %zu characters",
                              labels_file, lineno, sizeof(line) - 2);
                goto fail;
            }
            fields = sscanf(line, "%511s %255s %1s", fn, cl, extra);
            if (fields <= 0 || fn[0] == '#')
                continue;
            if (fields != 2 || strlen(fn) >= sizeof(fn) - 1 || strlen(cl) >= sizeof(cl) - 1) {
                fclose(f);
                _free_list(names, nl);
                _free_list(fnames, nl);
                line[strcspn(line, "\n")] = '\0';
                rc = dlt_fail(err, errlen, -EINVAL,
                              "labels file %s, line %lld: '%.80s' is not \"FILENAME CLASS\" (one file name and one "
                              "class, separated by white space)",
                              labels_file, lineno, line);
                goto fail;
            }
            if (nl == capl) {
                int64_t nc = capl ? 2 * capl : 1024;
                char **nn = realloc(names, (size_t)nc * sizeof(char *)), **nf;
                if (nn)
                    names = nn;
                nf = nn ? realloc(fnames, (size_t)nc * sizeof(char *)) : NULL;
                if (nf)
                    fnames = nf;
                if (!nn || !nf) {
                    fclose(f);
                    _free_list(names, nl);
                    _free_list(fnames, nl);
                    rc = -ENOMEM;
                    goto fail;
                }
                capl = nc;
            }
            fnames[nl] = strdup(fn);
            names[nl] = strdup(cl);
            if (!fnames[nl] || !names[nl]) {
                free(fnames[nl]);
                free(names[nl]);
                fclose(f);
                _free_list(names, nl);
                _free_list(fnames, nl);
                rc = -ENOMEM;
                goto fail;
            }
            nl++;
        }
        fclose(f);
        {
            /* The same file twice would be scored twice. */
            char **byname = malloc((size_t)(nl ? nl : 1) * sizeof(char *));
            const char *dup = NULL;
            if (!byname) {
                _free_list(names, nl);
                _free_list(fnames, nl);
                rc = -ENOMEM;
                goto fail;
            }
            if (nl)
                memcpy(byname, fnames, (size_t)nl * sizeof(char *));
            qsort(byname, (size_t)nl, sizeof(char *), _cmp_str);
            for (int64_t i = 1; i < nl && !dup; i++)
                if (!strcmp(byname[i - 1], byname[i]))
                    dup = byname[i];
            if (dup) {
                rc = dlt_fail(err, errlen, -EINVAL, "labels file %s lists %.300s more than once", labels_file, dup);
                free(byname);
                _free_list(names, nl);
                _free_list(fnames, nl);
                goto fail;
            }
            free(byname);
        }
        {
            char **sorted = malloc((size_t)(nl ? nl : 1) * sizeof(char *));
            int64_t u = 0;
            if (!sorted) {
                _free_list(names, nl);
                _free_list(fnames, nl);
                rc = -ENOMEM;
                goto fail;
            }
            if (nl)
                memcpy(sorted, names, (size_t)nl * sizeof(char *));
            qsort(sorted, (size_t)nl, sizeof(char *), _cmp_str);
            for (int64_t i = 0; i < nl; i++)
                if (!u || strcmp(sorted[u - 1], sorted[i]))
                    sorted[u++] = sorted[i];
            classes = calloc((size_t)(u ? u : 1), sizeof(char *));
            for (int64_t i = 0; classes && i < u; i++)
                classes[i] = strdup(sorted[i]);
            ncls = classes ? u : 0;
            free(sorted);
            for (int64_t i = 0; i < nl; i++) {
                char p[PATH_MAX];
                char *const *hit = bsearch(&names[i], classes, (size_t)ncls, sizeof(char *), _cmp_str);
                if (snprintf(p, sizeof(p), "%s/%s", root, fnames[i]) >= (int)sizeof(p))
                    continue;
                if (hit && _add(d, &cap, p, (int32_t)(hit - classes)) != 0) {
                    rc = -ENOMEM;
                    break;
                }
            }
            _free_list(names, nl);
            _free_list(fnames, nl);
        }
        if (ncls < 1 || d->n < 1) {
            rc = dlt_fail(err, errlen, -EINVAL, "labels file %s lists no \"FILENAME CLASS\" lines", labels_file);
            goto fail;
        }
    }
    if (d->n < 1) {
        rc = dlt_fail(err, errlen, -ENOENT, "%s holds no .JPEG/.jpg images", root);
        goto fail;
    }
    d->class_names = classes;
    d->nclasses = (int)ncls;
    snprintf(d->root, sizeof(d->root), "%s", root);
    *out = d;
    return 0;
fail:
    _free_list(classes, ncls);
    if (files)
        _free_list(files, nfiles);
    dlt_dataset_close(d);
    return rc ? rc : -EINVAL;
}

int dlt_dataset_open_recordio(dlt_dataset **out, const char *rec_path, char *err, size_t errlen)
{
    dlt_dataset *d = calloc(1, sizeof(*d));
    char idx_path[PATH_MAX], line[256];
    size_t n = strlen(rec_path);
    FILE *f;
    int64_t cap = 0;
    int maxlabel = -1;
    *out = NULL;
    if (!d)
        return -ENOMEM;
    d->recordio = 1;
    snprintf(d->rec_path, sizeof(d->rec_path), "%s", rec_path);
    snprintf(d->root, sizeof(d->root), "%s", rec_path);
    if (n > 4 && !strcmp(rec_path + n - 4, ".rec"))
        snprintf(idx_path, sizeof(idx_path), "%.*s.idx", (int)(n - 4), rec_path);
    else
        snprintf(idx_path, sizeof(idx_path), "%s.idx", rec_path);
    d->fd = open(rec_path, O_RDONLY | O_CLOEXEC);
    if (d->fd < 0) {
        int e = errno;
        dlt_dataset_close(d);
        return dlt_fail(err, errlen, -e, "cannot open %s: %s", rec_path, strerror(e));
    }
    f = fopen(idx_path, "r");
    if (!f) {
        int e = errno;
        dlt_dataset_close(d);
        return dlt_fail(err, errlen, -e, "cannot open the index %s: %s (im2rec writes it beside the .rec)", idx_path,
                     strerror(e));
    }
    while (fgets(line, sizeof(line), f)) {
        unsigned long long key, off;
        if (sscanf(line, "%llu %llu", &key, &off) != 2)
            continue;
        if (d->n == cap) {
            uint64_t *no = realloc(d->offsets, (size_t)(cap = cap ? 2 * cap : 1024) * sizeof(uint64_t));
            if (!no) {
                fclose(f);
                dlt_dataset_close(d);
                return -ENOMEM;
            }
            d->offsets = no;
        }
        d->offsets[d->n++] = off;
    }
    fclose(f);
    if (d->n < 1) {
        dlt_dataset_close(d);
        return dlt_fail(err, errlen, -EINVAL, "%s lists no records", idx_path);
    }
    /* Class count: the largest label + 1, from each record's header (16 bytes per record). */
    for (int64_t i = 0; i < d->n; i++) {
        uint8_t h[16];
        float label;
        uint32_t flag;
        if (pread(d->fd, h, sizeof(h), (off_t)d->offsets[i]) != (ssize_t)sizeof(h))
            continue;
        memcpy(&flag, h + 8, 4);
        memcpy(&label, h + 12, 4);
        if (flag == 0 && label >= 0 && label < 1e6 && (int)label > maxlabel)
            maxlabel = (int)label;
    }
    d->nclasses = maxlabel + 1;
    if (d->nclasses < 1) {
        dlt_dataset_close(d);
        return dlt_fail(err, errlen, -EINVAL,
                        "%s: no record header with a valid label at the offsets %s lists (not a RecordIO file of "
                        "images, or the index belongs to another file)",
                        rec_path, idx_path);
    }
    *out = d;
    return 0;
}

void dlt_dataset_close(dlt_dataset *d)
{
    if (!d)
        return;
    if (d->paths)
        _free_list(d->paths, d->n);
    if (d->class_names)
        _free_list(d->class_names, d->nclasses);
    free(d->labels);
    free(d->offsets);
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

int dlt_dataset_read(dlt_dataset *d, int64_t i, uint8_t **buf, size_t *cap, size_t *len, int32_t *label, char *name,
                     size_t namelen, char *err, size_t errlen)
{
    if (i < 0 || i >= d->n)
        return dlt_fail(err, errlen, -EINVAL, "sample %lld out of range", (long long)i);
    if (!d->recordio) {
        int fd = open(d->paths[i], O_RDONLY | O_CLOEXEC);
        struct stat st;
        size_t got = 0;
        snprintf(name, namelen, "%s", d->paths[i]);
        *label = d->labels[i];
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
        if ((int)lab >= d->nclasses)
            return dlt_fail(err, errlen, -EINVAL, "record label %d outside the %d classes the file's headers give",
                            (int)lab, d->nclasses);
        *label = (int32_t)lab;
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
    w->fd = open(rec_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0)
        return dlt_fail(err, errlen, -errno, "cannot create %s: %s", rec_path, strerror(errno));
    w->idx = fopen(idx, "w");
    if (!w->idx) {
        close(w->fd);
        return dlt_fail(err, errlen, -errno, "cannot create %s: %s", idx, strerror(errno));
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

int dlt_recordio_close(dlt_recordio_writer *w, char *err, size_t errlen)
{
    int rc = 0;
    if (fsync(w->fd) != 0 || close(w->fd) != 0)
        rc = dlt_fail(err, errlen, -errno, "closing the .rec failed: %s", strerror(errno));
    if (fclose(w->idx) != 0 && !rc)
        rc = dlt_fail(err, errlen, -EIO, "closing the .idx failed");
    return rc;
}
