/* SPDX-License-Identifier: Apache-2.0 */
/* crc32: zlib's crc32_z (size_t lengths: a checkpoint may exceed 4 GiB). */
#include "common/crc32.h"

#include <zlib.h>

uint32_t dlt_crc32(uint32_t crc, const void *data, size_t len)
{
    return (uint32_t)crc32_z((uLong)crc, (const Bytef *)data, (z_size_t)len);
}
