/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: image decode (JPEG or PNG, by content) + RandomResizedCrop/flip + resize, and
 * the evaluation crop, on arbitrary bytes: errors are fine, crashes, overflows and reads past the
 * input are not. The seeds hold JPEGs and PNGs of every kind (run.sh). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "trainer/data/transform.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static dlt_decoder *d;
    static uint8_t out[48 * 48 * 3];
    dlt_err err = DLT_ERR_INIT;
    dlt_rng r;
    if (!d)
        d = dlt_decoder_create();
    if (!d)
        abort();
    dlt_rng_seed(&r, size, 1);
    (void)dlt_decode_transform(d, data, size, 48, 1, &r, out, dlt_err_fresh(&err));
    (void)dlt_decode_transform(d, data, size, 48, 0, NULL, out, dlt_err_fresh(&err));
    return 0;
}
