/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: the safetensors reader on arbitrary bytes. Whatever it accepts must be
 * internally consistent (every tensor inside the file, sizes matching shapes). */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "trainer/checkpoint/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    dlt_st_file f;
    dlt_err err = DLT_ERR_INIT;
    if (dlt_st_parse(&f, data, size, &err) != 0)
        return 0;
    for (int i = 0; i < f.n; i++) {
        const dlt_st_entry *e = &f.entries[i];
        size_t count = 1;
        for (int d = 0; d < e->ndim; d++)
            count *= (size_t)e->shape[d];
        if (f.data_off + e->end > size || e->begin > e->end || count * dlt_st_dtype_size(e->dtype) != e->end - e->begin)
            abort();
        if (dlt_st_find(&f, e->name) != e)
            abort();
        if (e->end > e->begin)
            (void)*(volatile const uint8_t *)((const uint8_t *)dlt_st_data(&f, e) + (e->end - e->begin - 1));
    }
    dlt_st_free(&f);
    return 0;
}
