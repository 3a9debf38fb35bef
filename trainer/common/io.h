/* io: small file I/O helpers shared by the checkpoint writer and the RecordIO packer, and the
 * CRC-32 checkpoints record. */
#ifndef DLT_IO_H
#define DLT_IO_H

#include <stddef.h>
#include <stdint.h>

/* Writes all n bytes, retrying on EINTR and short writes. Returns 0 or -1 with errno set. */
int dlt_write_all(int fd, const void *p, size_t n);

/* CRC-32 (IEEE 802.3, reflected; zlib's crc32 and dltpmix_crc32): crc = dlt_crc32_update(0, p, n)
 * for one buffer, chained over several by passing the previous result. */
uint32_t dlt_crc32_update(uint32_t crc, const void *p, size_t n);

#endif
