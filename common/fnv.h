/* SPDX-License-Identifier: Apache-2.0 */
/* fnv: 64-bit FNV-1a, the one digest of lists the ranks compare (data set digests) and of the
 * folder list and index checksums: fast, no table, the same on every host. Not a defence against a
 * deliberate collision. */
#ifndef DLT_FNV_H
#define DLT_FNV_H

#include <stddef.h>
#include <stdint.h>

#define DLT_FNV_OFFSET 0xcbf29ce484222325ull

/* h (DLT_FNV_OFFSET to start) continued over n bytes at p. */
static inline uint64_t dlt_fnv1a64(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

#endif
