/* SPDX-License-Identifier: Apache-2.0 */
/* dltpmix_blob: the framing of values exchanged through PMIx keys, and the key names.
 * A frame carries a magic, the collective's sequence number, the sender's rank and a CRC,
 * so a value from another collective, another program or a truncated transfer is refused. */
#ifndef DLTPMIX_BLOB_H
#define DLTPMIX_BLOB_H

#include <stddef.h>
#include <stdint.h>

#define DLTPMIX_BLOB_MAGIC 0x444c5450u /* "DLTP" */
#define DLTPMIX_BLOB_HEADER 24
#define DLTPMIX_KEY_MAX 64

typedef enum { DLTPMIX_OP_BCAST = 1, DLTPMIX_OP_ALLGATHER = 2, DLTPMIX_OP_ARRIVE = 3 } dltpmix_op;

uint32_t dltpmix_crc32(const void *data, size_t len);

/* Key for one collective: "dltpmix.<op>.<seq>". Distinct per op and sequence so a late
 * reader never sees a newer or older value under the same name. Returns 0 or -1. */
int dltpmix_key(char *key, size_t keylen, dltpmix_op op, uint64_t seq);

/* Encodes payload into out (DLTPMIX_BLOB_HEADER + len bytes). Returns the frame size or 0. */
size_t dltpmix_blob_encode(void *out, size_t outlen, uint64_t seq, int rank, const void *payload, size_t len);

/* Checks a frame and returns a pointer to its payload, or NULL with why (static string). */
const void *dltpmix_blob_decode(const void *frame, size_t framelen, uint64_t seq, int rank, size_t expect_len,
                                const char **why);

#endif
