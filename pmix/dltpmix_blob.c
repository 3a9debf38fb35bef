/* SPDX-License-Identifier: Apache-2.0 */
/* dltpmix_blob: the framing of values exchanged through PMIx keys, and the key names. */
#include "dltpmix_blob.h"

#include <stdio.h>
#include <string.h>

#include "common/crc32.h"

uint32_t dltpmix_crc32(const void *data, size_t len)
{
    return dlt_crc32(0, data, len);
}

int dltpmix_key(char *key, size_t keylen, dltpmix_op op, uint64_t seq)
{
    const char *name = op == DLTPMIX_OP_BCAST       ? "bcast"
                       : op == DLTPMIX_OP_ALLGATHER ? "allgather"
                       : op == DLTPMIX_OP_ARRIVE    ? "arrive"
                                                    : NULL;
    int n;
    if (!name || !key)
        return -1;
    n = snprintf(key, keylen, "dltpmix.%s.%llu", name, (unsigned long long)seq);
    return (n < 0 || (size_t)n >= keylen) ? -1 : 0;
}

static void _put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t _get_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Layout, little endian: magic u32 | seq u64 | rank u32 | len u32 | crc u32 | payload. */
size_t dltpmix_blob_encode(void *out, size_t outlen, uint64_t seq, int rank, const void *payload, size_t len)
{
    unsigned char *p = out;
    if (!out || rank < 0 || len > UINT32_MAX - DLTPMIX_BLOB_HEADER || outlen < DLTPMIX_BLOB_HEADER + len ||
        (len && !payload))
        return 0;
    _put_u32(p, DLTPMIX_BLOB_MAGIC);
    _put_u32(p + 4, (uint32_t)seq);
    _put_u32(p + 8, (uint32_t)(seq >> 32));
    _put_u32(p + 12, (uint32_t)rank);
    _put_u32(p + 16, (uint32_t)len);
    _put_u32(p + 20, dltpmix_crc32(payload, len));
    if (len)
        memcpy(p + DLTPMIX_BLOB_HEADER, payload, len);
    return DLTPMIX_BLOB_HEADER + len;
}

const void *dltpmix_blob_decode(const void *frame, size_t framelen, uint64_t seq, int rank, size_t expect_len,
                                const char **why)
{
    const unsigned char *p = frame;
    const char *dummy;
    uint64_t fseq;
    uint32_t flen;
    if (!why)
        why = &dummy;
    if (!frame || framelen < DLTPMIX_BLOB_HEADER) {
        *why = "value shorter than its header (truncated or not written by dltpmix)";
        return NULL;
    }
    if (_get_u32(p) != DLTPMIX_BLOB_MAGIC) {
        *why = "bad magic (value not written by dltpmix)";
        return NULL;
    }
    fseq = (uint64_t)_get_u32(p + 4) | (uint64_t)_get_u32(p + 8) << 32;
    if (fseq != seq) {
        *why = "sequence number differs (ranks called collectives in a different order)";
        return NULL;
    }
    if ((int)_get_u32(p + 12) != rank) {
        *why = "value carries another rank's id";
        return NULL;
    }
    flen = _get_u32(p + 16);
    if ((size_t)flen + DLTPMIX_BLOB_HEADER != framelen) {
        *why = "length field does not match the value's size (truncated)";
        return NULL;
    }
    if ((size_t)flen != expect_len) {
        *why = "ranks passed different lengths to the same collective";
        return NULL;
    }
    if (dltpmix_crc32(p + DLTPMIX_BLOB_HEADER, flen) != _get_u32(p + 20)) {
        *why = "checksum mismatch (corrupted value)";
        return NULL;
    }
    return p + DLTPMIX_BLOB_HEADER;
}
