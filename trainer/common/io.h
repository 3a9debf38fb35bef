/* SPDX-License-Identifier: Apache-2.0 */
/* io: small file I/O helpers shared by the checkpoint writer and reader, the RecordIO packer and
 * the image reader. */
#ifndef DLT_IO_H
#define DLT_IO_H

#include <stddef.h>

/* Writes all n bytes, retrying on EINTR and short writes. Returns 0 or -1 with errno set. */
int dlt_write_all(int fd, const void *p, size_t n);

/* Reads up to n bytes, retrying on EINTR and short reads; returns how many were read (fewer at end
 * of file or on an error, errno then set). */
size_t dlt_read_full(int fd, void *p, size_t n);

/* mkdir -p: creates path and its missing parents (0755). Returns 0 (also when it exists as a
 * directory) or -1 with errno set. */
int dlt_mkdirs(const char *path);

#endif
