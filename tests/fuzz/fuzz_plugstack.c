/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: plugstack.conf text read as Slurm reads it (includes noted, not followed), and
 * the same bytes as slurm.conf for PlugStackConfig; every line found goes through the site parser. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "plugin/options.h"
#include "plugin/plugstack_conf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static dlt_plugstack_scan s;
    char out[256];
    int lines = 1;
    for (size_t i = 0; i < size; i++)
        lines += data[i] == '\n';
    dlt_plugstack_scan_init(&s, DLT_PS_PLUGIN_NAME, 0);
    dlt_plugstack_scan_text(&s, "fuzz.conf", (const char *)data, size);
    if (s.notes_len != strlen(s.notes) || s.notes_len >= sizeof(s.notes) || s.nhits > DLT_PS_HITS_MAX ||
        s.nhits > s.nfound)
        abort();
    for (int i = 0; i < s.nhits; i++) {
        const dlt_plugstack_hit *h = &s.hits[i];
        dlt_site_conf site;
        dlt_err err = DLT_ERR_INIT;
        int first;
        if (h->line < 1 || h->line > lines || h->argc > DLT_PS_ARGS_MAX || h->argc > h->argc_total ||
            h->argv[h->argc] != NULL || (i && h->line < s.hits[i - 1].line))
            abort();
        /* a line's own arguments find it, or an earlier line with the same ones */
        if (h->argc == h->argc_total && ((first = dlt_plugstack_find_args(&s, h->argc, h->argv)) < 0 || first > i))
            abort();
        if (dlt_site_conf_parse(&site, h->argc, h->argv, &err) != 0 && !err.msg[0])
            abort();
    }
    if (dlt_slurm_conf_plugstack((const char *)data, size, out, sizeof(out)) == 0 && strlen(out) >= sizeof(out))
        abort();
    return 0;
}
