/* SPDX-License-Identifier: Apache-2.0 */
/* crc32c: the CRC-32C (Castagnoli, iSCSI's) that TensorFlow's record files carry, and the masked
 * form they store, so that a CRC of data holding CRCs does not look like one. */
#ifndef DLT_CRC32C_H
#define DLT_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* CRC-32C of data continuing from crc (0 to start). "123456789" gives 0xe3069283. */
uint32_t dlt_crc32c(uint32_t crc, const void *data, size_t len);

/* TFRecord's mask: ((crc >> 15) | (crc << 17)) + 0xa282ead8. */
uint32_t dlt_crc32c_masked(const void *data, size_t len);

#endif
