/* SPDX-License-Identifier: Apache-2.0 */
/* safetensors: reading and writing the safetensors format, strictly validated, written atomically. */
#include "config.h"

#include "trainer/checkpoint/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/crc32.h"
#include "common/io.h"
#include "common/status.h"

size_t dlt_st_dtype_size(const char *d)
{
    static const struct {
        const char *name;
        size_t size;
    } t[] = {{"F64", 8}, {"F32", 4}, {"F16", 2},  {"BF16", 2}, {"I64", 8}, {"I32", 4}, {"I16", 2},
             {"I8", 1},  {"U8", 1},  {"BOOL", 1}, {"U16", 2},  {"U32", 4}, {"U64", 8}};
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
        if (!strcmp(d, t[i].name))
            return t[i].size;
    return 0;
}

/* ------------------------------------------------------------------ writing */

typedef struct {
    char *p;
    size_t len, cap;
    int oom;
} _sb;

static void _sb_put(_sb *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 4096;
        char *np;
        while (nc < b->len + n + 1)
            nc *= 2;
        np = realloc(b->p, nc);
        if (!np) {
            b->oom = 1;
            return;
        }
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void _sb_str(_sb *b, const char *s)
{
    _sb_put(b, "\"", 1);
    for (; *s; s++) {
        char esc[8];
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            _sb_put(b, esc, 2);
        } else if (c < 0x20) {
            snprintf(esc, sizeof(esc), "\\u%04x", c);
            _sb_put(b, esc, 6);
        } else {
            _sb_put(b, (const char *)&c, 1);
        }
    }
    _sb_put(b, "\"", 1);
}

int dlt_st_write(const char *path, const dlt_st_tensor *t, int n, const char *const *meta, int nmeta, dlt_err *err)
{
    return dlt_st_write_crc(path, t, n, meta, nmeta, NULL, err);
}

/* Where the 8 hex digits of metadata key's value start in a header (key and value are written
 * as "key":"xxxxxxxx"; inside JSON strings every quote is escaped, so the pattern is structural). */
static const char *_crc_digits(const char *h, size_t len, const char *key)
{
    char pat[DLT_ST_NAME_MAX + 8];
    const char *p;
    int n = snprintf(pat, sizeof(pat), "\"%s\":\"", key);
    if (n <= 0 || (size_t)n >= sizeof(pat))
        return NULL;
    p = memmem(h, len, pat, (size_t)n);
    if (!p || (size_t)(p - h) + (size_t)n + 9 > len || p[n + 8] != '"')
        return NULL;
    return p + n;
}

/* A failed write, with errno's words and, for the two limits a user can change, which one. */
static int _write_failed(const char *tmp, dlt_err *err)
{
    int e = errno;
    return dlt_fail(err, -e, "cannot write %s: %s%s", tmp, strerror(e),
                    e == EFBIG                   ? " (the file size limit: `ulimit -f`, or the file system's)"
                    : e == ENOSPC || e == EDQUOT ? " (free space, or raise the quota)"
                                                 : "");
}

int dlt_st_write_staged(const char *path, const dlt_st_tensor *t, int n, const char *const *meta, int nmeta,
                        const char *crc_key, char *tmp, size_t tmplen, dlt_err *err)
{
    _sb h = {0};
    char num[64];
    size_t off = 0, pad;
    uint8_t len8[8];
    int fd = -1, rc = 0;

    _sb_put(&h, "{", 1);
    if (nmeta > 0) {
        _sb_str(&h, "__metadata__");
        _sb_put(&h, ":{", 2);
        for (int i = 0; i < nmeta; i++) {
            if (i)
                _sb_put(&h, ",", 1);
            _sb_str(&h, meta[2 * i]);
            _sb_put(&h, ":", 1);
            _sb_str(&h, meta[2 * i + 1]);
        }
        _sb_put(&h, "}", 1);
    }
    for (int i = 0; i < n; i++) {
        size_t esz = dlt_st_dtype_size(t[i].dtype), count = 1;
        for (int d = 0; d < t[i].ndim; d++)
            count *= (size_t)t[i].shape[d];
        if (!esz || count * esz != t[i].bytes) {
            free(h.p);
            return dlt_fail(err, -EINVAL, "tensor %s: %zu bytes do not match dtype %s and its shape", t[i].name,
                            t[i].bytes, t[i].dtype);
        }
        if (i || nmeta > 0)
            _sb_put(&h, ",", 1);
        _sb_str(&h, t[i].name);
        _sb_put(&h, ":{\"dtype\":", 10);
        _sb_str(&h, t[i].dtype);
        _sb_put(&h, ",\"shape\":[", 10);
        for (int d = 0; d < t[i].ndim; d++) {
            int w = snprintf(num, sizeof(num), "%s%lld", d ? "," : "", (long long)t[i].shape[d]);
            _sb_put(&h, num, (size_t)w);
        }
        {
            int w = snprintf(num, sizeof(num), "],\"data_offsets\":[%zu,%zu]}", off, off + t[i].bytes);
            _sb_put(&h, num, (size_t)w);
        }
        off += t[i].bytes;
    }
    _sb_put(&h, "}", 1);
    /* Pad the header with spaces so the data starts 8-byte aligned, as the reference writer does. */
    pad = (8 - (8 + h.len) % 8) % 8;
    for (size_t i = 0; i < pad; i++)
        _sb_put(&h, " ", 1);
    if (h.oom) {
        free(h.p);
        return dlt_fail(err, -ENOMEM, "out of memory writing %s", path);
    }
    for (int i = 0; i < 8; i++)
        len8[i] = (uint8_t)((uint64_t)h.len >> (8 * i));
    if (crc_key) {
        /* The file's CRC over all its bytes, with these 8 digits as zeros, written into them. */
        char *d = (char *)_crc_digits(h.p, h.len, crc_key), hex[9];
        uint32_t crc;
        if (!d || memcmp(d, "00000000", 8)) {
            free(h.p);
            return dlt_fail(err, -EINVAL, "%s: metadata %s must be given as \"00000000\"", path, crc_key);
        }
        crc = dlt_crc32(0, len8, 8);
        crc = dlt_crc32(crc, h.p, h.len);
        for (int i = 0; i < n; i++)
            crc = dlt_crc32(crc, t[i].data, t[i].bytes);
        snprintf(hex, sizeof(hex), "%08x", crc);
        memcpy(d, hex, 8);
    }

    if (snprintf(tmp, tmplen, "%s.tmp.%ld", path, (long)getpid()) >= (int)tmplen) {
        free(h.p);
        return dlt_fail(err, -ENAMETOOLONG, "path too long: %s", path);
    }
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        rc = dlt_fail(err, -errno, "cannot create %s: %s", tmp, strerror(errno));
        free(h.p);
        return rc; /* not ours to remove */
    }
    if (dlt_write_all(fd, len8, 8) || dlt_write_all(fd, h.p, h.len)) {
        rc = _write_failed(tmp, err);
        goto out;
    }
    for (int i = 0; i < n; i++)
        if (t[i].bytes && dlt_write_all(fd, t[i].data, t[i].bytes)) {
            rc = _write_failed(tmp, err);
            goto out;
        }
    if (fsync(fd) != 0) {
        rc = dlt_fail(err, -errno, "cannot flush %s to disk: %s", tmp, strerror(errno));
        goto out;
    }
    if (close(fd) != 0) {
        fd = -1;
        rc = dlt_fail(err, -errno, "cannot close %s: %s", tmp, strerror(errno));
        goto out;
    }
    fd = -1;
out:
    if (fd >= 0)
        close(fd);
    if (rc != 0)
        unlink(tmp); /* the previous file at path, if any, is untouched */
    free(h.p);
    return rc;
}

int dlt_st_commit(const char *tmp, const char *path, dlt_err *err)
{
    char dirbuf[PATH_MAX];
    const char *folder;
    int dfd, rc;
    if (rename(tmp, path) != 0) {
        rc = dlt_fail(err, -errno, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
        unlink(tmp);
        return rc;
    }
    /* The rename is durable only once the folder is: a failure here is the checkpoint's (on NFS or
     * Lustre an EIO now may mean the rename is lost after a failover), so the caller keeps the
     * older checkpoints. */
    snprintf(dirbuf, sizeof(dirbuf), "%s", path);
    folder = dirname(dirbuf);
    dfd = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0 || fsync(dfd) != 0) {
        int code = errno;
        if (dfd >= 0)
            close(dfd);
        return dlt_fail(err, -code, "cannot flush the folder %s after writing %s: %s", folder, path, strerror(code));
    }
    close(dfd);
    return 0;
}

int dlt_st_write_crc(const char *path, const dlt_st_tensor *t, int n, const char *const *meta, int nmeta,
                     const char *crc_key, dlt_err *err)
{
    char tmp[PATH_MAX];
    int rc = dlt_st_write_staged(path, t, n, meta, nmeta, crc_key, tmp, sizeof(tmp), err);
    return rc ? rc : dlt_st_commit(tmp, path, err);
}

/* ------------------------------------------------------------------ reading: a strict JSON subset */

typedef struct {
    const char *p, *end;
    dlt_err *err;
} _js;

static void _ws(_js *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\n' || *j->p == '\r' || *j->p == '\t'))
        j->p++;
}

static int _expect(_js *j, char c)
{
    _ws(j);
    if (j->p >= j->end || *j->p != c)
        return dlt_fail(j->err, -EINVAL, "header JSON: expected '%c' (corrupted header?)", c);
    j->p++;
    return 0;
}

/* Reads a JSON string into a fresh heap copy (bounded). */
static int _string(_js *j, char **out, size_t max)
{
    _sb b = {0};
    _ws(j);
    if (j->p >= j->end || *j->p != '"')
        return dlt_fail(j->err, -EINVAL, "header JSON: expected a string");
    j->p++;
    while (j->p < j->end && *j->p != '"') {
        unsigned char c = (unsigned char)*j->p++;
        if (c < 0x20) {
            free(b.p);
            return dlt_fail(j->err, -EINVAL, "header JSON: control character in a string");
        }
        if (c == '\\') {
            char e;
            if (j->p >= j->end)
                break;
            e = *j->p++;
            if (e == 'u') {
                unsigned v = 0;
                char u8[4];
                int n = 0;
                for (int k = 0; k < 4; k++) {
                    char h = j->p < j->end ? *j->p++ : 0;
                    v <<= 4;
                    if (h >= '0' && h <= '9')
                        v |= (unsigned)(h - '0');
                    else if (h >= 'a' && h <= 'f')
                        v |= (unsigned)(h - 'a' + 10);
                    else if (h >= 'A' && h <= 'F')
                        v |= (unsigned)(h - 'A' + 10);
                    else {
                        free(b.p);
                        return dlt_fail(j->err, -EINVAL, "header JSON: bad \\u escape");
                    }
                }
                if (v < 0x80) {
                    u8[n++] = (char)v;
                } else if (v < 0x800) {
                    u8[n++] = (char)(0xc0 | (v >> 6));
                    u8[n++] = (char)(0x80 | (v & 0x3f));
                } else {
                    u8[n++] = (char)(0xe0 | (v >> 12));
                    u8[n++] = (char)(0x80 | ((v >> 6) & 0x3f));
                    u8[n++] = (char)(0x80 | (v & 0x3f));
                }
                _sb_put(&b, u8, (size_t)n);
                continue;
            }
            c = (unsigned char)(e == 'n'   ? '\n'
                                : e == 't' ? '\t'
                                : e == 'r' ? '\r'
                                : e == 'b' ? '\b'
                                : e == 'f' ? '\f'
                                           : e);
            if (e != '"' && e != '\\' && e != '/' && e != 'n' && e != 't' && e != 'r' && e != 'b' && e != 'f') {
                free(b.p);
                return dlt_fail(j->err, -EINVAL, "header JSON: bad escape");
            }
        }
        _sb_put(&b, (const char *)&c, 1);
        if (b.len > max) {
            free(b.p);
            return dlt_fail(j->err, -EINVAL, "header JSON: string longer than %zu bytes", max);
        }
    }
    if (j->p >= j->end) {
        free(b.p);
        return dlt_fail(j->err, -EINVAL, "header JSON: unterminated string");
    }
    j->p++;
    if (b.oom) {
        free(b.p);
        return dlt_fail(j->err, -ENOMEM, "out of memory");
    }
    *out = b.p ? b.p : strdup("");
    return *out ? 0 : -ENOMEM;
}

static int _uint(_js *j, uint64_t *out)
{
    uint64_t v = 0;
    int digits = 0;
    _ws(j);
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9') {
        if (v > (UINT64_MAX - 9) / 10)
            return dlt_fail(j->err, -EINVAL, "header JSON: number too large");
        v = v * 10 + (uint64_t)(*j->p++ - '0');
        digits++;
    }
    if (!digits)
        return dlt_fail(j->err, -EINVAL, "header JSON: expected a non-negative integer");
    *out = v;
    return 0;
}

/* [u, u, ...] with at most max elements. */
static int _uint_array(_js *j, uint64_t *vals, int max, int *n)
{
    int rc;
    *n = 0;
    if ((rc = _expect(j, '[')))
        return rc;
    _ws(j);
    if (j->p < j->end && *j->p == ']') {
        j->p++;
        return 0;
    }
    for (;;) {
        if (*n >= max)
            return dlt_fail(j->err, -EINVAL, "header JSON: array longer than %d", max);
        if ((rc = _uint(j, &vals[(*n)++])))
            return rc;
        _ws(j);
        if (j->p < j->end && *j->p == ',') {
            j->p++;
            continue;
        }
        return _expect(j, ']');
    }
}

static int _parse_tensor(_js *j, dlt_st_entry *e)
{
    int rc, have_dtype = 0, have_shape = 0, have_off = 0;
    if ((rc = _expect(j, '{')))
        return rc;
    for (;;) {
        char *key = NULL;
        if ((rc = _string(j, &key, 32)) || (rc = _expect(j, ':'))) {
            free(key);
            return rc;
        }
        if (!strcmp(key, "dtype") && !have_dtype) {
            char *v = NULL;
            rc = _string(j, &v, 7);
            if (!rc) {
                snprintf(e->dtype, sizeof(e->dtype), "%s", v);
                if (!dlt_st_dtype_size(e->dtype))
                    rc = dlt_fail(j->err, -EINVAL, "tensor %s: unknown dtype '%s'", e->name, v);
            }
            free(v);
            have_dtype = 1;
        } else if (!strcmp(key, "shape") && !have_shape) {
            uint64_t dims[DLT_ST_MAX_DIMS];
            rc = _uint_array(j, dims, DLT_ST_MAX_DIMS, &e->ndim);
            for (int d = 0; !rc && d < e->ndim; d++) {
                if (dims[d] > ((uint64_t)1 << 40))
                    rc = dlt_fail(j->err, -EINVAL, "tensor %s: dimension too large", e->name);
                e->shape[d] = (int64_t)dims[d];
            }
            have_shape = 1;
        } else if (!strcmp(key, "data_offsets") && !have_off) {
            uint64_t o[2] = {0, 0};
            int n = 0;
            rc = _uint_array(j, o, 2, &n);
            if (!rc && (n != 2 || o[1] < o[0]))
                rc = dlt_fail(j->err, -EINVAL, "tensor %s: bad data_offsets", e->name);
            e->begin = (size_t)o[0];
            e->end = (size_t)o[1];
            have_off = 1;
        } else {
            rc = dlt_fail(j->err, -EINVAL, "tensor %s: unexpected or repeated field '%.32s'", e->name, key);
        }
        free(key);
        if (rc)
            return rc;
        _ws(j);
        if (j->p < j->end && *j->p == ',') {
            j->p++;
            continue;
        }
        if ((rc = _expect(j, '}')))
            return rc;
        break;
    }
    if (!have_dtype || !have_shape || !have_off)
        return dlt_fail(j->err, -EINVAL, "tensor %s: dtype, shape and data_offsets are all required", e->name);
    return 0;
}

static int _parse_meta(_js *j, dlt_st_file *f)
{
    int rc;
    if ((rc = _expect(j, '{')))
        return rc;
    _ws(j);
    if (j->p < j->end && *j->p == '}') {
        j->p++;
        return 0;
    }
    for (;;) {
        char *k = NULL, *v = NULL;
        char **nk, **nv;
        if ((rc = _string(j, &k, 256)) || (rc = _expect(j, ':')) || (rc = _string(j, &v, 1 << 20))) {
            free(k);
            free(v);
            return rc;
        }
        nk = realloc(f->meta_keys, (size_t)(f->nmeta + 1) * sizeof(char *));
        if (nk)
            f->meta_keys = nk;
        nv = realloc(f->meta_values, (size_t)(f->nmeta + 1) * sizeof(char *));
        if (nv)
            f->meta_values = nv;
        if (!nk || !nv) {
            free(k);
            free(v);
            return -ENOMEM;
        }
        f->meta_keys[f->nmeta] = k;
        f->meta_values[f->nmeta] = v;
        f->nmeta++;
        _ws(j);
        if (j->p < j->end && *j->p == ',') {
            j->p++;
            continue;
        }
        return _expect(j, '}');
    }
}

static int _cmp_begin(const void *a, const void *b)
{
    const dlt_st_entry *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : (x->end > y->end) - (x->end < y->end);
}

int dlt_st_parse(dlt_st_file *f, const uint8_t *buf, size_t size, dlt_err *err)
{
    uint64_t hlen = 0;
    _js j;
    int rc = 0, cap = 0;
    dlt_st_entry *sorted = NULL;
    size_t data_len;

    memset(f, 0, sizeof(*f));
    f->buf = (uint8_t *)buf;
    f->size = size;
    if (size < 8)
        return dlt_fail(err, -EINVAL, "file of %zu bytes is too short to be safetensors (truncated?)", size);
    for (int i = 0; i < 8; i++)
        hlen |= (uint64_t)buf[i] << (8 * i);
    if (hlen < 2 || hlen > DLT_ST_HEADER_MAX || hlen > size - 8)
        return dlt_fail(err, -EINVAL, "header length %llu does not fit a %zu-byte file (truncated or not safetensors)",
                        (unsigned long long)hlen, size);
    f->data_off = 8 + (size_t)hlen;
    data_len = size - f->data_off;
    j = (_js){(const char *)buf + 8, (const char *)buf + 8 + hlen, err};
    if ((rc = _expect(&j, '{')))
        goto fail;
    _ws(&j);
    if (j.p < j.end && *j.p == '}') {
        j.p++;
    } else {
        for (;;) {
            char *name = NULL;
            if ((rc = _string(&j, &name, DLT_ST_NAME_MAX - 1)) || (rc = _expect(&j, ':'))) {
                free(name);
                goto fail;
            }
            if (!strcmp(name, "__metadata__")) {
                free(name);
                if (f->meta_keys) {
                    rc = dlt_fail(err, -EINVAL, "two __metadata__ objects");
                    goto fail;
                }
                if ((rc = _parse_meta(&j, f)))
                    goto fail;
            } else {
                dlt_st_entry *e;
                if (dlt_st_find(f, name)) {
                    rc = dlt_fail(err, -EINVAL, "tensor %s listed twice", name);
                    free(name);
                    goto fail;
                }
                if (f->n >= cap) {
                    dlt_st_entry *ne;
                    cap = cap ? cap * 2 : 64;
                    if (cap > 1000000 || !(ne = realloc(f->entries, (size_t)cap * sizeof(*ne)))) {
                        free(name);
                        rc = dlt_fail(err, -ENOMEM, "too many tensors");
                        goto fail;
                    }
                    f->entries = ne;
                }
                e = &f->entries[f->n];
                memset(e, 0, sizeof(*e));
                snprintf(e->name, sizeof(e->name), "%s", name);
                free(name);
                if ((rc = _parse_tensor(&j, e)))
                    goto fail;
                f->n++;
            }
            _ws(&j);
            if (j.p < j.end && *j.p == ',') {
                j.p++;
                continue;
            }
            if ((rc = _expect(&j, '}')))
                goto fail;
            break;
        }
    }
    _ws(&j);
    if (j.p != j.end) {
        rc = dlt_fail(err, -EINVAL, "header JSON: trailing bytes after the object");
        goto fail;
    }
    /* Sizes, bounds, and a data section covered exactly once. */
    for (int i = 0; i < f->n; i++) {
        dlt_st_entry *e = &f->entries[i];
        uint64_t count = 1;
        for (int d = 0; d < e->ndim; d++) {
            if (e->shape[d] && count > UINT64_MAX / (uint64_t)e->shape[d]) {
                rc = dlt_fail(err, -EINVAL, "tensor %s: shape overflows", e->name);
                goto fail;
            }
            count *= (uint64_t)e->shape[d];
        }
        if (count > (uint64_t)SIZE_MAX / 8 || count * dlt_st_dtype_size(e->dtype) != e->end - e->begin) {
            rc = dlt_fail(err, -EINVAL, "tensor %s: data_offsets cover %zu bytes, its shape and dtype need %llu",
                          e->name, e->end - e->begin, (unsigned long long)(count * dlt_st_dtype_size(e->dtype)));
            goto fail;
        }
        if (e->end > data_len) {
            rc = dlt_fail(err, -EINVAL, "tensor %s ends at byte %zu of a %zu-byte data section (truncated file)",
                          e->name, e->end, data_len);
            goto fail;
        }
    }
    if (f->n) {
        size_t pos = 0;
        sorted = malloc((size_t)f->n * sizeof(*sorted));
        if (!sorted) {
            rc = -ENOMEM;
            goto fail;
        }
        memcpy(sorted, f->entries, (size_t)f->n * sizeof(*sorted));
        qsort(sorted, (size_t)f->n, sizeof(*sorted), _cmp_begin);
        for (int i = 0; i < f->n; i++) {
            if (sorted[i].begin != pos) {
                rc = dlt_fail(err, -EINVAL, "tensor %s: data overlaps another or leaves a gap", sorted[i].name);
                free(sorted);
                goto fail;
            }
            pos = sorted[i].end;
        }
        free(sorted);
        if (pos != data_len) {
            rc = dlt_fail(err, -EINVAL, "%zu bytes after the last tensor (not a safetensors file we wrote?)",
                          data_len - pos);
            goto fail;
        }
    }
    return 0;
fail:
    dlt_st_free(f);
    return rc ? rc : -EINVAL;
}

int dlt_st_load(dlt_st_file *f, const char *path, dlt_err *err)
{
    struct stat st;
    uint8_t *buf;
    size_t got = 0;
    int fd, rc;
    dlt_err perr = DLT_ERR_INIT;
    memset(f, 0, sizeof(*f));
    /* A FIFO named as a checkpoint must not block the run in open(). */
    if ((fd = dlt_open_regular(NULL, path, O_RDONLY, 0, err)) < 0)
        return fd;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return dlt_fail(err, -EINVAL, "%s is not a regular file", path);
    }
    buf = malloc(st.st_size ? (size_t)st.st_size : 1);
    if (!buf) {
        close(fd);
        return dlt_fail(err, -ENOMEM, "cannot allocate %lld bytes for %s", (long long)st.st_size, path);
    }
    got = dlt_read_full(fd, buf, (size_t)st.st_size);
    close(fd);
    if (got != (size_t)st.st_size) {
        free(buf);
        return dlt_fail(err, -EIO, "short read of %s", path);
    }
    rc = dlt_st_parse(f, buf, got, &perr);
    if (rc) {
        free(buf);
        return dlt_fail(err, rc, "%s: %s", path, perr.msg);
    }
    f->owns_buf = 1;
    return 0;
}

void dlt_st_free(dlt_st_file *f)
{
    for (int i = 0; i < f->nmeta; i++) {
        free(f->meta_keys[i]);
        free(f->meta_values[i]);
    }
    free(f->meta_keys);
    free(f->meta_values);
    free(f->entries);
    if (f->owns_buf)
        free(f->buf);
    memset(f, 0, sizeof(*f));
}

const dlt_st_entry *dlt_st_find(const dlt_st_file *f, const char *name)
{
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->entries[i].name, name))
            return &f->entries[i];
    return NULL;
}

int dlt_st_self_crc(const dlt_st_file *f, const char *crc_key, uint32_t *have, uint32_t *want)
{
    const char *v = dlt_st_meta(f, crc_key), *d;
    char *end;
    unsigned long w;
    if (!v)
        return -ENOENT;
    w = strtoul(v, &end, 16);
    d = _crc_digits((const char *)f->buf + 8, f->data_off - 8, crc_key);
    if (end == v || *end || strlen(v) != 8 || !d)
        return -EINVAL;
    {
        size_t at = (size_t)((const uint8_t *)d - f->buf);
        uint32_t c = dlt_crc32(0, f->buf, at);
        c = dlt_crc32(c, "00000000", 8);
        *have = dlt_crc32(c, f->buf + at + 8, f->size - at - 8);
    }
    *want = (uint32_t)w;
    return 0;
}

const char *dlt_st_meta(const dlt_st_file *f, const char *key)
{
    for (int i = 0; i < f->nmeta; i++)
        if (!strcmp(f->meta_keys[i], key))
            return f->meta_values[i];
    return NULL;
}
