/* SPDX-License-Identifier: Apache-2.0 */
/* dltpmix_list: a name's place in a comma list, as a PMIx server's PMIX_NODE_LIST gives the nodes
 * ("n1,n2,n10"): libdltpmix's node index where the server gives no PMIX_NODEID. Not installed. */
#ifndef DLTPMIX_LIST_H
#define DLTPMIX_LIST_H

#include <string.h>

/* The index of name in the comma list (whole entries only: "n1" is not "n10"), or -1. */
static inline int dltpmix_list_index(const char *list, const char *name)
{
    size_t n = strlen(name);
    int idx = 0;
    for (const char *p = list; p && *p; idx++) {
        const char *c = strchr(p, ',');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        if (len == n && strncmp(p, name, n) == 0)
            return idx;
        p = c ? c + 1 : NULL;
    }
    return -1;
}

#endif
