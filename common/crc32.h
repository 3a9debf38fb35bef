/* SPDX-License-Identifier: Apache-2.0 */
/* crc32: the CRC-32 (IEEE 802.3, zlib's) of checkpoint files and of libdltpmix's exchanged
 * blobs, written once and compiled into both. */
#ifndef DLT_CRC32_H
#define DLT_CRC32_H

#include <stddef.h>
#include <stdint.h>

/* CRC of data continuing from crc (0 to start), as zlib's crc32(crc, data, len). */
uint32_t dlt_crc32(uint32_t crc, const void *data, size_t len);

/* A reflected CRC-32 of any polynomial, four bits a step through its 16-entry table (the one loop
 * behind dlt_crc32 and dlt_crc32c). */
uint32_t dlt_crc_nibbles(const uint32_t table[16], uint32_t crc, const void *data, size_t len);

#endif
