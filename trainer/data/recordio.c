/* SPDX-License-Identifier: Apache-2.0 */
/* recordio: MXNet RecordIO (.rec + .idx as im2rec writes them, .classes beside them): the index
 * checked against the records, records read (split records rejoined), and the packer's writer. */
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

#include "common/io.h"
#include "common/status.h"
#include "trainer/data/dataset.h"
#include "trainer/data/dataset_internal.h"

#define RECORDIO_MAGIC 0xced7230au

static uint32_t _u32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* One logical record at off: parts with cflag 0 (whole) or 1, 2..., 3, rejoined with the magic
 * the writer cut out of the data between them. */
static int _read_record(dlt_dataset *d, uint64_t off, uint8_t **buf, size_t *cap, size_t *len, dlt_err *err)
{
    size_t total = 0;
    for (int part = 0; part < 4096; part++) {
        uint8_t h[8];
        uint32_t lrec, plen, cflag;
        if (pread(d->fd, h, 8, (off_t)off) != 8)
            return dlt_fail(err, -EINVAL, "record at offset %llu: truncated header", (unsigned long long)off);
        if (_u32(h) != RECORDIO_MAGIC)
            return dlt_fail(err, -EINVAL, "record at offset %llu: bad magic 0x%08x", (unsigned long long)off, _u32(h));
        lrec = _u32(h + 4);
        cflag = lrec >> 29;
        plen = lrec & ((1u << 29) - 1);
        if (total + plen + 4 > DLT_DATASET_MAX_FILE)
            return dlt_fail(err, -EINVAL, "record at offset %llu: length %u too large", (unsigned long long)off, plen);
        if (dlt_ds_grow(buf, cap, total + plen + 4) != 0)
            return -ENOMEM;
        if (part > 0) {
            uint32_t m = RECORDIO_MAGIC;
            memcpy(*buf + total, &m, 4);
            total += 4;
        }
        if (plen && pread(d->fd, *buf + total, plen, (off_t)(off + 8)) != (ssize_t)plen)
            return dlt_fail(err, -EINVAL, "record at offset %llu: truncated data (length %u)", (unsigned long long)off,
                            plen);
        total += plen;
        off += 8 + ((plen + 3u) & ~3u);
        if ((part == 0 && cflag == 0) || cflag == 3)
            break;
        if ((part == 0 && cflag != 1) || (part > 0 && cflag != 2))
            return dlt_fail(err, -EINVAL, "record at offset %llu: broken multi-part sequence (cflag %u)",
                            (unsigned long long)off, cflag);
    }
    *len = total;
    return 0;
}

int dlt_recordio_path(const char *path)
{
    size_t n = strlen(path);
    return n > 4 && !strcmp(path + n - 4, ".rec");
}

void dlt_recordio_sibling(const char *rec_path, const char *ext, char *out, size_t outlen)
{
    size_t n = strlen(rec_path);
    int cut = dlt_recordio_path(rec_path) ? 4 : 0;
    snprintf(out, outlen, "%.*s%s", (int)(n - (size_t)cut), rec_path, ext);
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
static int _read_index(dlt_dataset *d, const char *idx_path, dlt_err *err)
{
    int fd = open(idx_path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    char *text;
    const char *p, *end;
    int64_t cap = 0;
    long long lineno = 0;
    if (fd < 0)
        return dlt_fail(err, -errno, "cannot open the index %s: %s (im2rec writes it beside the .rec)", idx_path,
                        strerror(errno));
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > ((off_t)1 << 34)) {
        close(fd);
        return dlt_fail(err, -EINVAL, "the index %s is not a regular file under 16 GiB", idx_path);
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
        return dlt_fail(err, -EIO, "cannot read the index %s: %s", idx_path, strerror(e));
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
            return dlt_fail(err, -EINVAL,
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
            int rc =
                dlt_fail(err, -EINVAL, "index %s, line %lld: '%.*s' is not \"KEY<TAB>OFFSET\"", idx_path, lineno, w, p);
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
static int _check_records(dlt_dataset *d, const char *idx_path, int *maxlabel, dlt_err *err)
{
    struct stat st;
    uint64_t size, next = 0;
    int last_whole = 0;
    if (fstat(d->fd, &st) != 0 || !S_ISREG(st.st_mode))
        return dlt_fail(err, -EINVAL, "%s is not a regular file", d->rec_path);
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
            snprintf(whybuf, sizeof(whybuf),
                     "offset %llu is past the end of the .rec (%llu bytes): the .rec was truncated",
                     (unsigned long long)off, (unsigned long long)size);
            why = whybuf;
        }
        if (!why) {
            got = pread(d->fd, h, sizeof(h), (off_t)off);
            if (got < 8)
                return dlt_fail(err, -EIO, "%s: cannot read the record at offset %llu: %s", d->rec_path,
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
            return dlt_fail(err, -EINVAL, "index %s, line %lld: %s; refusing the pair %s + %s", idx_path,
                            d->idx_lines[i], why, d->rec_path, idx_path);
        next = off + 8 + ((plen + 3u) & ~3u);
        last_whole = cflag == 0;
    }
    /* A whole last record ends the file (im2rec and dltrain data pack write them back to back): bytes
     * after it are records an index cut short does not list (a pack or a copy that did not finish). */
    if (d->n > 0 && last_whole && next < size)
        return dlt_fail(err, -EINVAL,
                        "index %s lists records up to byte %llu of the %llu-byte %s: the index "
                        "is cut short (a pack or copy that did not finish?): pack again, or rebuild the index",
                        idx_path, (unsigned long long)next, (unsigned long long)size, d->rec_path);
    return 0;
}

/* PATH.classes beside PATH.rec (dltrain data pack writes it): the class names in label order, one a
 * line. With it the class count is the names' count (a class whose records were all left out is
 * still counted) and validation classes can be matched by name; without it the classes have no
 * names. */
static int _read_class_file(dlt_dataset *d, dlt_err *err)
{
    char path[PATH_MAX + 16], line[1024];
    FILE *f;
    int k = 0, cap = 0;
    long long lineno = 0;
    dlt_recordio_sibling(d->rec_path, ".classes", path, sizeof(path));
    if (access(path, F_OK) != 0 && errno == ENOENT)
        return 0;
    if (!(f = dlt_fopen_regular(NULL, path, "r", err)))
        return -errno;
    while (fgets(line, sizeof(line), f)) {
        size_t l = strcspn(line, "\r\n");
        lineno++;
        if (!line[l] && !feof(f)) {
            fclose(f);
            return dlt_fail(err, -EINVAL, "%s, line %lld: longer than %zu characters", path, lineno, sizeof(line) - 2);
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
            return line[0] ? -ENOMEM : dlt_fail(err, -EINVAL, "%s, line %lld: an empty class name", path, lineno);
        }
        k++;
    }
    fclose(f);
    if (k < d->nclasses) {
        int have = d->nclasses;
        d->nclasses = k;
        return dlt_fail(err, -EINVAL,
                        "%s names %d classes but %s has labels up to %d: the files do not belong "
                        "together",
                        path, k, d->rec_path, have - 1);
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
        qsort(sorted, (size_t)k, sizeof(char *), dlt_ds_cmp_str);
        for (int i = 1; i < k && !dup; i++)
            if (!strcmp(sorted[i - 1], sorted[i]))
                dup = sorted[i];
        if (dup) {
            int rc = dlt_fail(err, -EINVAL, "%s names the class '%.200s' more than once", path, dup);
            free(sorted);
            return rc;
        }
        free(sorted);
    }
    return 0;
}

int dlt_dataset_open_recordio(dlt_dataset **out, const char *rec_path, dlt_err *err)
{
    dlt_dataset *d = calloc(1, sizeof(*d));
    char idx_path[PATH_MAX];
    int maxlabel = -1, rc;
    *out = NULL;
    if (!d)
        return -ENOMEM;
    d->ops = &dlt_recordio_ops;
    d->recordio = 1;
    snprintf(d->rec_path, sizeof(d->rec_path), "%s", rec_path);
    snprintf(d->root, sizeof(d->root), "%s", rec_path);
    dlt_recordio_sibling(rec_path, ".idx", idx_path, sizeof(idx_path));
    d->fd = dlt_open_regular(NULL, rec_path, O_RDONLY, 0, err);
    if (d->fd < 0) {
        int e = -d->fd;
        dlt_dataset_close(d);
        return -e;
    }
    if ((rc = _read_index(d, idx_path, err)) != 0 || (rc = _check_records(d, idx_path, &maxlabel, err)) != 0) {
        dlt_dataset_close(d);
        return rc;
    }
    if (d->n < 1) {
        dlt_dataset_close(d);
        return dlt_fail(err, -EINVAL, "%s lists no records", idx_path);
    }
    d->nclasses = maxlabel + 1;
    if ((rc = _read_class_file(d, err)) != 0) {
        dlt_dataset_close(d);
        return rc;
    }
    d->local_classes = d->nclasses;
    d->numbered = 1;
    *out = d;
    return 0;
}

static int _read(dlt_dataset *d, int64_t i, uint8_t **buf, size_t *cap, size_t *len, int32_t *label, char *name,
                 size_t namelen, dlt_err *err)
{
    int rc;
    uint32_t flag;
    float lab;
    size_t skip;
    snprintf(name, namelen, "%s@%llu", d->rec_path, (unsigned long long)d->offsets[i]);
    if ((rc = _read_record(d, d->offsets[i], buf, cap, len, err)) != 0)
        return rc;
    if (*len < 24)
        return dlt_fail(err, -EINVAL, "record shorter than its image header");
    memcpy(&flag, *buf, 4);
    memcpy(&lab, *buf + 4, 4);
    /* flag > 0: that many float labels follow the header; the first is the class. */
    skip = 24 + (size_t)flag * 4;
    if (flag > 1024 || skip > *len)
        return dlt_fail(err, -EINVAL, "record header claims %u labels", flag);
    if (flag > 0)
        memcpy(&lab, *buf + 24, 4);
    if (!(lab >= 0 && lab < 1e6))
        return dlt_fail(err, -EINVAL, "record label out of range");
    /* The class count came from the headers when the file was opened: a label beyond it (a
     * multi-label record, or a header changed since) would fail the loss on this rank alone. */
    if ((int)lab >= d->local_classes)
        return dlt_fail(err, -EINVAL, "record label %d outside the %d classes the file's headers give", (int)lab,
                        d->local_classes);
    *label = d->label_map ? d->label_map[(int)lab] : (int32_t)lab;
    memmove(*buf, *buf + skip, *len - skip);
    *len -= skip;
    return 0;
}

const dlt_dataset_ops dlt_recordio_ops = {_read};

int dlt_recordio_create(dlt_recordio_writer *w, const char *rec_path, dlt_err *err)
{
    char idx[PATH_MAX];
    memset(w, 0, sizeof(*w));
    dlt_recordio_sibling(rec_path, ".idx", idx, sizeof(idx));
    w->fd = dlt_open_regular(NULL, rec_path, O_WRONLY | O_CREAT | O_TRUNC, 0644, err);
    if (w->fd < 0)
        return w->fd;
    w->idx = dlt_fopen_regular(NULL, idx, "w", err);
    if (!w->idx) {
        int e = errno;
        close(w->fd);
        return -e;
    }
    return 0;
}

int dlt_recordio_append(dlt_recordio_writer *w, uint64_t id, float label, const uint8_t *data, size_t len, dlt_err *err)
{
    /* im2rec's IRHeader: flag, label, id, id2; then the image. One part (no magic inside is split:
     * the reader handles split records written by other tools). */
    uint8_t hdr[8 + 24];
    uint32_t magic = RECORDIO_MAGIC, flag = 0, lrec;
    uint64_t id2 = 0;
    size_t body = 24 + len, pad = (4 - body % 4) % 4;
    static const uint8_t zeros[4] = {0};
    if (body >= (1u << 29))
        return dlt_fail(err, -EINVAL, "image of %zu bytes too large for a record", len);
    lrec = (uint32_t)body;
    memcpy(hdr, &magic, 4);
    memcpy(hdr + 4, &lrec, 4);
    memcpy(hdr + 8, &flag, 4);
    memcpy(hdr + 12, &label, 4);
    memcpy(hdr + 16, &id, 8);
    memcpy(hdr + 24, &id2, 8);
    if (dlt_write_all(w->fd, hdr, sizeof(hdr)) || dlt_write_all(w->fd, data, len) || dlt_write_all(w->fd, zeros, pad))
        return dlt_fail(err, -errno, "write failed: %s", strerror(errno));
    fprintf(w->idx, "%llu\t%llu\n", (unsigned long long)id, (unsigned long long)w->offset);
    w->offset += sizeof(hdr) + len + pad;
    return 0;
}

int dlt_recordio_write_classes(const char *rec_path, const dlt_dataset *d, dlt_err *err)
{
    char path[PATH_MAX + 16], *list = dlt_dataset_class_list(d);
    FILE *f;
    int rc = 0;
    if (!list)
        return dlt_fail(err, -EINVAL, "the classes have no names that can be written one a line");
    dlt_recordio_sibling(rec_path, ".classes", path, sizeof(path));
    if (!(f = dlt_fopen_regular(NULL, path, "w", err)))
        rc = -errno;
    else if (fprintf(f, "%s\n", list) < 0 || fclose(f) != 0)
        rc = dlt_fail(err, -EIO, "writing %s failed", path);
    free(list);
    return rc;
}

int dlt_recordio_close(dlt_recordio_writer *w, dlt_err *err)
{
    int rc = 0;
    if (fsync(w->fd) != 0 || close(w->fd) != 0)
        rc = dlt_fail(err, -errno, "closing the .rec failed: %s", strerror(errno));
    if (fclose(w->idx) != 0 && !rc)
        rc = dlt_fail(err, -EIO, "closing the .idx failed");
    return rc;
}
