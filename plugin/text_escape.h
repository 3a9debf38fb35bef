/* SPDX-License-Identifier: Apache-2.0 */
/* text_escape: user-given text (option values, file names, environment values) made safe for
 * slurmd's log and terminals, so that a newline in it cannot forge a line. */
#ifndef DLT_TEXT_ESCAPE_H
#define DLT_TEXT_ESCAPE_H

#include <stddef.h>

/* in as text safe for a log line or a terminal: bytes below 0x20, 0x7f and above as \xNN, a
 * backslash as two; cut at whole escapes with "..." when out is too small. */
void dlt_name_escape(const char *in, char *out, size_t outlen);

#endif
