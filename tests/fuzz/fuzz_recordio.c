/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: the RecordIO reader on arbitrary .rec contents (multi-part records, bad
 * magics and lengths, huge claimed label counts) with an index pointing at a few offsets. */
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "trainer/data/dataset.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char rec[64], idx[64];
    dlt_dataset *ds;
    FILE *f;
    char name[1024];
    dlt_err err = DLT_ERR_INIT;
    uint8_t *buf = NULL;
    size_t cap = 0, len;
    int32_t label;
    if (!rec[0]) {
        snprintf(rec, sizeof(rec), "/tmp/dlt-fuzz-rec-%d.rec", (int)getpid());
        snprintf(idx, sizeof(idx), "/tmp/dlt-fuzz-rec-%d.idx", (int)getpid());
    }
    f = fopen(rec, "wb");
    if (!f)
        return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    f = fopen(idx, "w");
    if (!f)
        goto out;
    /* Offsets: the start, a few 4-byte aligned places, and one past the end. */
    fprintf(f, "0\t0\n1\t%zu\n2\t%zu\n3\t%zu\n", (size / 3) & ~(size_t)3, (size / 2) & ~(size_t)3, size + 8);
    fclose(f);
    if (dlt_dataset_open_recordio(&ds, rec, dlt_err_fresh(&err)) != 0)
        goto out;
    for (int64_t i = 0; i < dlt_dataset_count(ds); i++)
        if (dlt_dataset_read(ds, i, &buf, &cap, &len, &label, name, sizeof(name), dlt_err_fresh(&err)) == 0) {
            if (len > cap || label < 0)
                abort();
            if (len)
                (void)*(volatile uint8_t *)(buf + len - 1);
        }
    free(buf);
    dlt_dataset_close(ds);
out:
    /* Nothing left in /tmp when the fuzzer ends (it may end after any input). */
    unlink(rec);
    unlink(idx);
    return 0;
}
