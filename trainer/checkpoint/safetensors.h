/* SPDX-License-Identifier: Apache-2.0 */
/* safetensors: reading and writing the safetensors format (8-byte header length, JSON header,
 * raw little-endian data), strictly validated on read, written atomically. */
#ifndef DLT_SAFETENSORS_H
#define DLT_SAFETENSORS_H

#include "common/status.h"
#include <stddef.h>
#include <stdint.h>

#define DLT_ST_MAX_DIMS 8
#define DLT_ST_NAME_MAX 128
#define DLT_ST_HEADER_MAX (64u << 20)

typedef struct {
    const char *name;
    const char *dtype; /* "F32", "I64", "BF16", ... */
    int ndim;
    int64_t shape[DLT_ST_MAX_DIMS];
    const void *data;
    size_t bytes;
} dlt_st_tensor;

typedef struct {
    char name[DLT_ST_NAME_MAX];
    char dtype[8];
    int ndim;
    int64_t shape[DLT_ST_MAX_DIMS];
    size_t begin, end; /* byte range within the data section */
} dlt_st_entry;

typedef struct {
    uint8_t *buf; /* whole file (owned when loaded from a path) */
    size_t size;
    size_t data_off; /* 8 + header length */
    int n;
    dlt_st_entry *entries;
    int nmeta;
    char **meta_keys, **meta_values;
    int owns_buf;
} dlt_st_file;

/* Writes path atomically: temp file in the same directory, fsync, rename, fsync directory.
 * meta: nmeta key/value pairs (strings) for "__metadata__". */
int dlt_st_write(const char *path, const dlt_st_tensor *t, int n, const char *const *meta, int nmeta, dlt_err *err);

/* As dlt_st_write, and the metadata value of crc_key (given as "00000000") becomes the CRC-32 of
 * the whole file as written with those 8 digits as zeros: the file checks itself, header too. */
int dlt_st_write_crc(const char *path, const dlt_st_tensor *t, int n, const char *const *meta, int nmeta,
                     const char *crc_key, dlt_err *err);

/* The two halves of dlt_st_write_crc (crc_key may be NULL), so that files written together appear
 * together: the file is written and flushed under a temporary name beside path (tmp receives it;
 * nothing is left on failure), then dlt_st_commit renames it to path and flushes the directory
 * (tmp is removed if that fails). */
int dlt_st_write_staged(const char *path, const dlt_st_tensor *t, int n, const char *const *meta, int nmeta,
                        const char *crc_key, char *tmp, size_t tmplen, dlt_err *err);
int dlt_st_commit(const char *tmp, const char *path, dlt_err *err);

/* The CRC a file written by dlt_st_write_crc records for itself (want) and the one it has (have).
 * Returns 0, -ENOENT without that key, -EINVAL when the value is not 8 hex digits. */
int dlt_st_self_crc(const dlt_st_file *f, const char *crc_key, uint32_t *have, uint32_t *want);

/* Parses a complete file image (buf is borrowed). Every field is checked: header length, JSON,
 * dtypes, shapes vs byte ranges, ranges inside the file, no overlaps or gaps, unique names. */
int dlt_st_parse(dlt_st_file *f, const uint8_t *buf, size_t size, dlt_err *err);
int dlt_st_load(dlt_st_file *f, const char *path, dlt_err *err);
void dlt_st_free(dlt_st_file *f);

const dlt_st_entry *dlt_st_find(const dlt_st_file *f, const char *name);
const char *dlt_st_meta(const dlt_st_file *f, const char *key);
static inline const void *dlt_st_data(const dlt_st_file *f, const dlt_st_entry *e)
{
    return f->buf + f->data_off + e->begin;
}
size_t dlt_st_dtype_size(const char *dtype);

#endif
