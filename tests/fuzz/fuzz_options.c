/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: the --dl-train grammar and the plugstack.conf site arguments. The input is
 * split at the first NUL: the option value, then newline-separated site arguments. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "plugin/options.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size + 1), *site, *argv[32];
    int argc = 0;
    dlt_site_conf conf;
    dlt_user_opts opts;
    char txt[256];
    dlt_err err = DLT_ERR_INIT;
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';
    site = buf + strlen(buf) + (strlen(buf) < size ? 1 : 0);
    for (char *save = NULL, *tok = strtok_r(site, "\n", &save); tok && argc < 32; tok = strtok_r(NULL, "\n", &save))
        argv[argc++] = tok;
    if (dlt_site_conf_parse(&conf, argc, argv, dlt_err_fresh(&err)) != 0 && strlen(err.msg) >= sizeof(err.msg))
        abort();
    if (dlt_user_opts_parse(&opts, &conf, buf, dlt_err_fresh(&err)) == 0) {
        /* Anything accepted must format and re-parse to the same options. */
        dlt_user_opts again;
        if (dlt_user_opts_format(&opts, txt, sizeof(txt)) != 0 ||
            dlt_user_opts_parse(&again, &conf, txt, dlt_err_fresh(&err)))
            abort();
        if (again.bind != opts.bind || again.nccl != opts.nccl || strcmp(again.nic, opts.nic) ||
            again.verbose != opts.verbose || again.gpus != opts.gpus)
            abort();
    }
    free(buf);
    return 0;
}
