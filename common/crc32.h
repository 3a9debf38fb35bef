/* SPDX-License-Identifier: Apache-2.0 */
/* crc32: the CRC-32 (IEEE 802.3, zlib's) of checkpoint files and of libdltpmix's exchanged
 * blobs: zlib's own crc32_z, which every machine has (a hand-written table was 12x slower). */
#ifndef DLT_CRC32_H
#define DLT_CRC32_H

#include <stddef.h>
#include <stdint.h>

/* CRC of data continuing from crc (0 to start), as zlib's crc32(crc, data, len); any length. */
uint32_t dlt_crc32(uint32_t crc, const void *data, size_t len);

#endif
