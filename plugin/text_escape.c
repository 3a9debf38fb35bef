/* SPDX-License-Identifier: Apache-2.0 */
/* text_escape: user-given text made safe for slurmd's log and terminals. */
#include "text_escape.h"

#include <stdio.h>
#include <string.h>

void dlt_name_escape(const char *in, char *out, size_t outlen)
{
    size_t total = 0, used = 0;
    const unsigned char *p;
    if (!outlen)
        return;
    for (p = (const unsigned char *)in; *p; p++)
        total += *p == '\\' ? 2 : (*p < 0x20 || *p >= 0x7f) ? 4 : 1;
    for (p = (const unsigned char *)in; *p; p++) {
        char piece[5];
        size_t n;
        if (*p == '\\')
            n = (size_t)snprintf(piece, sizeof(piece), "\\\\");
        else if (*p < 0x20 || *p >= 0x7f)
            n = (size_t)snprintf(piece, sizeof(piece), "\\x%02x", *p);
        else
            n = (size_t)snprintf(piece, sizeof(piece), "%c", *p);
        /* Whole escapes only; "..." says the name went on. */
        if (total < outlen ? used + n >= outlen : used + n + 3 >= outlen)
            break;
        memcpy(out + used, piece, n);
        used += n;
    }
    if (total >= outlen && used + 3 < outlen) {
        memcpy(out + used, "...", 3);
        used += 3;
    }
    out[used] = '\0';
}
