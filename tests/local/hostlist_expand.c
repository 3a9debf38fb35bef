/* SPDX-License-Identifier: Apache-2.0 */
/* hostlist_expand: prints the hosts of a Slurm host list as the project expands them, one a line,
 * as `scontrol show hostnames` does; for tests/local/hostlist_scontrol.sh. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hostlist.h"

int main(int argc, char **argv)
{
    dlt_hostlist *hl;
    char why[256], host[1100];
    unsigned a = 0, b = 0, c = 0;
    int rc;
    if (argc != 3 || sscanf(argv[1], "%u.%u.%u", &a, &b, &c) != 3) {
        fprintf(stderr, "usage: hostlist_expand SLURM_VERSION (e.g. 22.05.8) LIST\n");
        return 2;
    }
    rc = dlt_hostlist_parse(argv[2], DLT_SLURM_VERSION(a, b, c), &hl, why, sizeof(why));
    if (rc != 0) {
        fprintf(stderr, "Invalid hostlist: %s (%s)\n", argv[2], why);
        return 1;
    }
    for (size_t i = 0; i < dlt_hostlist_count(hl); i++) {
        rc = dlt_hostlist_nth(hl, i, host, sizeof(host));
        if (rc != 0) {
            fprintf(stderr, "host %zu of %s: %s\n", i, argv[2], strerror(-rc));
            dlt_hostlist_free(hl);
            return 1;
        }
        puts(host);
    }
    dlt_hostlist_free(hl);
    return 0;
}
