/* io: small file I/O helpers shared by the checkpoint writer and the RecordIO packer. */
#ifndef DLT_IO_H
#define DLT_IO_H

#include <stddef.h>

/* Writes all n bytes, retrying on EINTR and short writes. Returns 0 or -1 with errno set. */
int dlt_write_all(int fd, const void *p, size_t n);

#endif
