/* SPDX-License-Identifier: Apache-2.0 */
/* node_name: SLURMD_NODENAME, else the host name. */
#include "config.h"

#include "common/node_name.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

const char *dlt_node_name(char *buf, size_t len)
{
    const char *slurm = getenv("SLURMD_NODENAME");
    if (!buf || len == 0)
        return buf;
    if (slurm && *slurm) {
        snprintf(buf, len, "%s", slurm);
        return buf;
    }
    buf[len - 1] = '\0';
    if (gethostname(buf, len - 1) != 0 || !buf[0])
        snprintf(buf, len, "?");
    return buf;
}
