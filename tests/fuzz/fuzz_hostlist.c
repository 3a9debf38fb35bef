/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: Slurm's host-list grammar (common/hostlist.c). The input is the list,
 * read under 22.05, 23.02.0 and 23.02.5. Checks: the count matches what nth gives;
 * a list 23.02.0 takes is taken alike by 22.05 (23.02.0 only refuses more) and by 23.02.5 (which
 * only takes more). The list is bounded (128 bytes) so that one input stays fast. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/hostlist.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const unsigned versions[3] = {DLT_SLURM_VERSION(22, 5, 8), DLT_SLURM_VERSION(23, 2, 0),
                                     DLT_SLURM_VERSION(23, 2, 5)};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char list[129], why[256];
    dlt_hostlist *hl[3] = {NULL, NULL, NULL};
    int rc[3];
    if (size > sizeof(list) - 1)
        size = sizeof(list) - 1;
    memcpy(list, data, size);
    list[size] = '\0';
    for (int v = 0; v < 3; v++) {
        rc[v] = dlt_hostlist_parse(list, versions[v], &hl[v], why, sizeof(why));
        if (rc[v] != 0 && rc[v] != -EINVAL && rc[v] != -E2BIG && rc[v] != -ENOMEM)
            abort();
        if (rc[v] != 0 && (hl[v] || !why[0]))
            abort(); /* a refusal says why and returns nothing */
    }
    if (rc[1] == 0) {
        char a[1100], b[1100];
        size_t n = dlt_hostlist_count(hl[1]);
        if (rc[0] != 0 || rc[2] != 0 || dlt_hostlist_count(hl[0]) != n || dlt_hostlist_count(hl[2]) != n)
            abort();
        for (size_t i = 0; i < n && i < 64; i++) {
            int r1 = dlt_hostlist_nth(hl[1], i, a, sizeof(a));
            if (r1 != 0 && r1 != -ENOSPC)
                abort();
            for (int v = 0; v < 3; v += 2)
                if (dlt_hostlist_nth(hl[v], i, b, sizeof(b)) != r1 || strcmp(a, b))
                    abort();
        }
        if (dlt_hostlist_nth(hl[1], n, a, sizeof(a)) != -ENOENT)
            abort();
    }
    for (int v = 0; v < 3; v++)
        dlt_hostlist_free(hl[v]);
    return 0;
}
