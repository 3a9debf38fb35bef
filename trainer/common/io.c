/* io: small file I/O helpers (whole writes, whole reads). */
#include "config.h"

#include "trainer/common/io.h"

#include <errno.h>
#include <stdint.h>
#include <unistd.h>

int dlt_write_all(int fd, const void *p, size_t n)
{
    const uint8_t *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (w == 0)
                errno = EIO;
            return -1;
        }
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

size_t dlt_read_full(int fd, void *p, size_t n)
{
    uint8_t *c = p;
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, c + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    return got;
}
