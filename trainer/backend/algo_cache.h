/* SPDX-License-Identifier: Apache-2.0 */
/* algo_cache: a text file of convolution algorithm choices kept across processes (--cudnn-cache):
 * one line per (device, library version, type, geometry) key, looked up before a timed search. */
#ifndef DLT_BACKEND_ALGO_CACHE_H
#define DLT_BACKEND_ALGO_CACHE_H

#include <stddef.h>

#include "common/status.h"
#include "trainer/backend/backend.h"

/* Everything that makes a choice valid: the same GPU model, cuDNN version, data and math types,
 * determinism rule, workspace limit and geometry (with the stem's padded channel count). */
typedef struct {
    char device[64]; /* the GPU's name; spaces are written as '_' */
    int cc;          /* compute capability, 90 for 9.0 */
    long library;    /* cudnnGetVersion() */
    int dtype, math, deterministic;
    size_t ws_limit;
    dlt_conv_shape s;
    int channels; /* the input channels the convolution really has (3 padded to 4) */
} dlt_algo_key;

/* Three directions' algorithms and math types (backend enums as ints); data_ok 0: no data gradient. */
typedef struct {
    int fwd, fwd_math, data, data_math, filter, filter_math, data_ok;
} dlt_algo_choice;

/* Finds key in the file at path: 1 and *out filled when a well-formed line has it (the last such
 * line wins), 0 when none has (or the file does not exist yet), -errno when the file cannot be
 * read (err says why). Lines that do not parse are skipped and counted in *damaged (may be NULL). */
int dlt_algo_cache_lookup(const char *path, const dlt_algo_key *key, dlt_algo_choice *out, int *damaged, dlt_err *err);
/* Appends key's line (one write, O_APPEND: concurrent ranks' lines never interleave). 0 or -errno. */
int dlt_algo_cache_store(const char *path, const dlt_algo_key *key, const dlt_algo_choice *c, dlt_err *err);

#endif
