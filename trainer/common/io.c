/* io: small file I/O helpers. */
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

uint32_t dlt_crc32_update(uint32_t crc, const void *p, size_t n)
{
    const uint8_t *b = p;
    uint32_t table[256];
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t v = i;
        for (int k = 0; k < 8; k++)
            v = (v >> 1) ^ (0xedb88320u & (0u - (v & 1u)));
        table[i] = v;
    }
    crc = ~crc;
    for (size_t i = 0; i < n; i++)
        crc = table[(crc ^ b[i]) & 0xffu] ^ (crc >> 8);
    return ~crc;
}
