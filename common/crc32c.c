/* SPDX-License-Identifier: Apache-2.0 */
/* crc32c: four bits a step through a 16-entry table (reflected polynomial 0x82f63b78): TensorBoard's
 * event files are small, and zlib has no CRC-32C. */
#include "common/crc32c.h"

static const uint32_t g_nibble[16] = {
    0x00000000u, 0x105ec76fu, 0x20bd8edeu, 0x30e349b1u, 0x417b1dbcu, 0x5125dad3u, 0x61c69362u, 0x7198540du,
    0x82f63b78u, 0x92a8fc17u, 0xa24bb5a6u, 0xb21572c9u, 0xc38d26c4u, 0xd3d3e1abu, 0xe330a81au, 0xf36e6f75u,
};

uint32_t dlt_crc32c(uint32_t crc, const void *data, size_t len)
{
    const unsigned char *p = data;
    crc = ~crc;
    for (size_t i = 0; i < len; i++) {
        crc ^= p[i];
        crc = (crc >> 4) ^ g_nibble[crc & 15u];
        crc = (crc >> 4) ^ g_nibble[crc & 15u];
    }
    return ~crc;
}

uint32_t dlt_crc32c_masked(const void *data, size_t len)
{
    uint32_t crc = dlt_crc32c(0, data, len);
    return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}
