/* SPDX-License-Identifier: Apache-2.0 */
/* spank_dltrain: the SPANK entry points of the dltrain plugin, and nothing else.
 * Each callback dispatches by context to srun_side.c (local) or stepd_side.c (remote). */
#include "config.h"

#include <errno.h>
#include <slurm/spank.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "options.h"
#include "plugin_state.h"
#include "plugstack_conf.h"
#include "srun_side.h"
#include "stepd_side.h"
#include "text_escape.h"

SPANK_PLUGIN(dltrain, 1);

/* Where Slurm carries --dl-train from srun (and sbatch) to slurmstepd: _SLURM_SPANK_OPTION_ +
 * the plugin name + the option name with '-' as '_'. */
#define DLT_SPANK_OPTION_ENV "_SLURM_SPANK_OPTION_dltrain_dl_train"

/* SPANK option callbacks receive no handle, so the parsed state has to live in this one
 * file-level struct; every other function takes it as a parameter. */
static dlt_plugin_state g_state;

/* What a --dl-train step is told when the site line was refused: which line (looked up in the
 * plugstack files only now, on this error path), the refusal, and the fix. Worked out once. */
static const char *_site_error_words(void)
{
    static const char fix[] = "The cluster administrator fixes that line and checks it with `dltrain-topo "
                              "--check-plugstack`; steps without --dl-train are not affected";
    char where[640], words[1024];
    int found;
    if (g_state.site_msg[0])
        return g_state.site_msg;
    found = dlt_plugstack_where(g_state.site_ac, g_state.site_av, getenv("SLURM_CONF"), DLT_SLURM_SYSCONFDIR, where,
                                sizeof(where)) == 0;
    dlt_name_escape(g_state.site_err.msg, words, sizeof(words));
    if (found)
        snprintf(g_state.site_msg, sizeof(g_state.site_msg),
                 "--dl-train is unavailable on this cluster: %s, which loads spank_dltrain.so, is refused: %s. %s",
                 where, words, fix);
    else
        snprintf(g_state.site_msg, sizeof(g_state.site_msg),
                 "--dl-train is unavailable on this cluster: the plugstack line that loads spank_dltrain.so is "
                 "refused: %s (the line itself was not found: %s). %s",
                 words, where, fix);
    return g_state.site_msg;
}

static int _opt_cb(int val, const char *optarg, int remote)
{
    (void)val;
    if (g_state.site_error) {
        g_state.opts_error = 1;
        if (!remote) {
            slurm_error("dltrain: %s", _site_error_words());
            return -1;
        }
        /* slurmstepd: init_post_opt fails the step and task_init says why (below). */
        dlt_fail(dlt_err_fresh(&g_state.err), -EINVAL, "%s", _site_error_words());
        return 0;
    }
    /* `#SBATCH --dl-train` with no value reaches srun (through the job's environment) as the text
     * "(null)": Slurm printed a NULL argument. It means no value, never an option list. */
    if (optarg && !strcmp(optarg, "(null)"))
        optarg = NULL;
    /* Runs twice in each slurmstepd: parsing is idempotent (the whole struct is rebuilt). */
    if (dlt_user_opts_parse(&g_state.opts, &g_state.site, optarg, dlt_err_fresh(&g_state.err)) != 0) {
        g_state.opts_error = 1;
        if (!remote) {
            slurm_error("dltrain: %s", g_state.err.msg);
            return -1;
        }
        /* slurmstepd: a refusal here reaches the user only as "Plugin initialization failed".
         * Keep the words; init_post_opt fails the step and task_init prints them to the task. */
        return 0;
    }
    g_state.opts_error = 0;
    g_state.explicit_request = 1;
    return 0;
}

/* The usage text is made from the key table (options.c) in slurm_spank_init, so srun --help
 * lists every key the parser takes. */
static char g_usage[512];
static struct spank_option g_option = {
    .name = "dl-train",
    .arginfo = "[OPTS]",
    .usage = g_usage,
    .has_arg = 2,
    .val = 0,
    .cb = _opt_cb,
};

#ifdef DLT_HAVE_SPANK_FAILURE_MODE
/* Slurm versions whose spank.h has ESPANK_JOB_FAILURE read this exported variable: a failing
 * slurm_spank_init fails the job, never drains the node. (It is a variable, not a function;
 * Slurm 22.05 has neither and fails only the job for errors after slurm_spank_init.) */
int slurm_spank_init_failure_mode = ESPANK_JOB_FAILURE;
#endif

/* The batch script, the extern step and the interactive step are not training steps: binding the
 * batch shell to one GPU would leak its settings into every srun it starts. */
static int _is_job_step(spank_t sp)
{
    uint32_t step = 0;
    if (spank_get_item(sp, S_JOB_STEPID, &step) != ESPANK_SUCCESS)
        return 0;
    return step < 0xfffffff0u;
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
    spank_err_t rc;

    memset(&g_state, 0, sizeof(g_state));
    if (dlt_site_conf_parse(&g_state.site, ac, av, &g_state.site_err) != 0) {
        /* A broken site line must not take down jobs that never asked for --dl-train: the site
         * defaults stand (enable=optin, whatever the line said), --dl-train is still registered and
         * a step that gives it fails naming the line. slurmd's log says so when slurmd starts and
         * once per job step; srun and sbatch stay quiet unless --dl-train is given. */
        g_state.site_error = 1;
        g_state.site_ac = ac;
        g_state.site_av = av;
        if ((spank_context() == S_CTX_REMOTE && _is_job_step(sp)) || spank_context() == S_CTX_SLURMD) {
            int always = 0;
            for (int i = 0; i < ac; i++)
                always |= av[i] && !strcmp(av[i], "enable=always");
            slurm_error("dltrain: %s%s", _site_error_words(),
                        always ? "; the line's enable=always is not applied: steps without --dl-train run without "
                                 "dltrain's setup until the line is fixed"
                               : "");
        }
    } else if (g_state.site.enable == DLT_ENABLE_ALWAYS) {
        g_state.opts.requested = 1;
        (void)dlt_user_opts_parse(&g_state.opts, &g_state.site, NULL, dlt_err_fresh(&g_state.err));
        dlt_err_clear(&g_state.err); /* the site defaults alone: a refusal here is said when --dl-train is parsed */
    }
    switch (spank_context()) {
    case S_CTX_LOCAL:
    case S_CTX_REMOTE:
    case S_CTX_ALLOCATOR:
        if (dlt_user_opts_usage(g_usage, sizeof(g_usage)) != 0) {
            slurm_error("dltrain: the --dl-train usage text does not fit in %zu bytes", sizeof(g_usage));
            return -1;
        }
        rc = spank_option_register(sp, &g_option);
        if (rc != ESPANK_SUCCESS) {
            slurm_error("dltrain: cannot register --dl-train: %s", spank_strerror(rc));
            return -1;
        }
        return 0;
    default: return 0; /* slurmd, job_script: no option to offer */
    }
}

/* A --dl-train value that reached srun only through its environment (the variable Slurm itself
 * uses to carry SPANK options to the remote side) never passed through the option callback: check
 * its words here so srun names a bad one before the step starts. Only the syntax is checked: the
 * variable also carries `#SBATCH --dl-train` into every srun of a batch script. */
static int _srun_env_option(void)
{
    dlt_user_opts opts;
    const char *val = getenv(DLT_SPANK_OPTION_ENV);
    if (g_state.explicit_request || !val)
        return 0;
    if (g_state.site_error) {
        slurm_error("dltrain: %s (--dl-train given in the environment as %s)", _site_error_words(),
                    DLT_SPANK_OPTION_ENV);
        return -1;
    }
    if (!strcmp(val, "(null)") || !*val)
        val = NULL;
    if (dlt_user_opts_parse(&opts, &g_state.site, val, dlt_err_fresh(&g_state.err)) == 0)
        return 0;
    slurm_error("dltrain: %s (given in the environment as %s)", g_state.err.msg, DLT_SPANK_OPTION_ENV);
    return -1;
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    if (g_state.opts_error && spank_context() == S_CTX_REMOTE) {
        if (!_is_job_step(sp))
            return 0;
        /* The bad value came in through the environment (srun checks its own command line). */
        g_state.active = 1;
        g_state.step_error = 1;
        slurm_error("dltrain: %s", g_state.err.msg);
        return 0;
    }
    if (g_state.opts_error)
        return -1;
    if (spank_context() == S_CTX_LOCAL && _srun_env_option() != 0)
        return -1;
    /* --dl-train on the command line or carried in from the batch script (not enable=always) */
    if (spank_context() == S_CTX_LOCAL && (g_state.explicit_request || getenv(DLT_SPANK_OPTION_ENV)) &&
        dlt_srun_container_check(sp) != 0)
        return -1;
    if (!g_state.opts.requested)
        return 0;
    switch (spank_context()) {
    case S_CTX_LOCAL: return dlt_srun_validate(sp, &g_state);
    case S_CTX_REMOTE:
        if (!_is_job_step(sp))
            return 0;
        /* Still root here (user_init runs with the user's privileges): discover the node and
         * write the step directory now. Errors would not reach the user from this callback:
         * keep them and report from task_init. */
        g_state.active = 1;
        (void)dlt_stepd_step_setup(sp, &g_state);
        return 0;
    default: return 0;
    }
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    switch (spank_context()) {
    case S_CTX_REMOTE:
        /* Every step, --dl-train or not, the batch step included: a step started from inside a
         * --dl-train task (nested srun, sbatch) must not run on that task's rank and port. */
        dlt_stepd_task_clear_inherited(sp);
        return g_state.active ? dlt_stepd_task_setup(sp, &g_state) : 0;
    default: return 0;
    }
}

int slurm_spank_task_exit(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    if (spank_context() == S_CTX_REMOTE && g_state.active)
        dlt_stepd_task_exit(sp, &g_state);
    return 0;
}

int slurm_spank_exit(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    switch (spank_context()) {
    case S_CTX_REMOTE:
        /* A step end still pending is carried out before the plugin's code is unloaded. */
        dlt_step_end_finish(&g_state.end);
        if (g_state.active)
            dlt_stepd_step_cleanup(sp, &g_state);
        return 0;
    default: return 0;
    }
}
