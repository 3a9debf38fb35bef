/* srun_side: the local (srun) context: refuse a step that cannot work before anything runs. */
#include "srun_side.h"

#include <stdlib.h>
#include <string.h>

int dlt_srun_validate(spank_t sp, dlt_plugin_state *st)
{
    char opts[256];
    (void)sp;
    if (dlt_user_opts_format(&st->opts, opts, sizeof(opts)) == 0 && st->opts.verbose)
        slurm_spank_log("dltrain: step options %s", opts);
    return 0;
}
