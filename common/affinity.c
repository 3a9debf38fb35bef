/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include "common/affinity.h"

#include <sched.h>
#include <stdio.h>

int dlt_affinity_list(char *out, size_t outlen)
{
    cpu_set_t set;
    size_t used = 0;
    int count = 0;
    if (outlen)
        out[0] = '\0';
    if (sched_getaffinity(0, sizeof(set), &set) != 0)
        return -1;
    for (int c = 0; c < CPU_SETSIZE; c++) {
        int end = c;
        if (!CPU_ISSET(c, &set))
            continue;
        while (end + 1 < CPU_SETSIZE && CPU_ISSET(end + 1, &set))
            end++;
        count += end - c + 1;
        if (used < outlen) {
            int w = end > c ? snprintf(out + used, outlen - used, "%s%d-%d", used ? "," : "", c, end)
                            : snprintf(out + used, outlen - used, "%s%d", used ? "," : "", c);
            if (w > 0)
                used += (size_t)w;
        }
        c = end;
    }
    return count;
}
