/* SPDX-License-Identifier: Apache-2.0 */
/* affinity: the CPUs the calling thread may run on, as a list ("0-3,8"), for the messages and
 * reports that name a CPU rank's "device" (dltrain env, dltrain check, stragglers). */
#ifndef DLT_AFFINITY_H
#define DLT_AFFINITY_H

#include <stddef.h>

/* Writes the affinity mask as a CPU list into out (truncated to outlen, "" on failure) and returns
 * the number of CPUs in it, or -1 when the mask cannot be read. */
int dlt_affinity_list(char *out, size_t outlen);

#endif
