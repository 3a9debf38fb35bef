/* SPDX-License-Identifier: Apache-2.0 */
/* srun_side: the local (srun) context: refuse a step that cannot work before anything runs.
 * Reads srun's own environment and command line: the user's own process, nothing privileged. */
#include "srun_side.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oci_container.h"

extern char **environ;

/* srun's own command line, NUL-separated words, into buf (cap bytes): its length, or -1. */
static long _cmdline(char *buf, size_t cap)
{
    FILE *f = fopen("/proc/self/cmdline", "re");
    size_t n;
    if (!f)
        return -1;
    n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = '\0';
    return (long)n;
}

/* srun has no SPANK item for GPUs: look where a GPU request can come from. Inside an allocation
 * the job's GPUs are in the environment; a direct srun has them only on its command line. A false
 * "yes" only skips the refusal, so every argument is scanned. */
static int _gpus_requested(void)
{
    static const char *const env_exact[] = {
        "SLURM_GPUS",     "SLURM_GPUS_PER_NODE", "SLURM_GPUS_PER_TASK", "SLURM_GPUS_PER_SOCKET",
        "SLURM_JOB_GPUS", "SLURM_STEP_GPUS",     "SLURM_GPUS_ON_NODE",  "SBATCH_GPUS",
        "SALLOC_GPUS"};
    static const char *const gres_env[] = {"SLURM_GRES", "SLURM_TRES_PER_TASK", "SLURM_STEP_GRES", "SLURM_JOB_GRES"};
    char buf[8192];
    long got;
    size_t n;

    for (size_t i = 0; i < sizeof(env_exact) / sizeof(env_exact[0]); i++) {
        const char *v = getenv(env_exact[i]);
        if (v && *v && strcmp(v, "0"))
            return 1;
    }
    for (size_t i = 0; i < sizeof(gres_env) / sizeof(gres_env[0]); i++) {
        const char *v = getenv(gres_env[i]);
        if (v && strstr(v, "gpu"))
            return 1;
    }
    if ((got = _cmdline(buf, sizeof(buf))) < 0)
        return 1; /* cannot tell: do not refuse */
    n = (size_t)got;
    for (size_t off = 0; off < n; off += strlen(buf + off) + 1) {
        const char *a = buf + off;
        if (!strncmp(a, "--gpus", 6) || !strncmp(a, "-G", 2) || (!strncmp(a, "--gres", 6) && strstr(a, "gpu")) ||
            (!strncmp(a, "--tres-per-task", 15) && strstr(a, "gpu")))
            return 1;
        if (!strcmp(a, "--gres") || !strcmp(a, "--tres-per-task")) {
            size_t next = off + strlen(a) + 1;
            if (next < n && strstr(buf + next, "gpu"))
                return 1;
        }
    }
    return 0;
}

int dlt_srun_validate(spank_t sp, dlt_plugin_state *st)
{
    char opts[256];
    const char *mpi = getenv("SLURM_MPI_TYPE");
    int gpus;
    (void)sp;
    /* enable=always applies to every step; only an explicit --dl-train is refused. */
    if (!st->explicit_request)
        return 0;
    if (mpi && strncmp(mpi, "pmix", 4) != 0) {
        slurm_error("dltrain: --dl-train needs the PMIx launcher but this step uses --mpi=%.32s: add --mpi=pmix "
                    "(or set MpiDefault=pmix in slurm.conf)",
                    mpi);
        return -1;
    }
    gpus = _gpus_requested();
    /* Only an explicit gpus=task|step is refused here: whether a step without GPUs is a CPU step
     * depends on its nodes (a node without GPUs, a cpu_partitions partition), which slurmstepd
     * knows and srun does not; a GPU node refuses it there with the same words. */
    if (st->opts.gpus_given && st->opts.gpus != DLT_GPUS_NONE && !gpus) {
        slurm_error("dltrain: --dl-train=gpus=%s needs GPUs but this step requests none: add --gpus-per-node=N "
                    "(or --gres=gpu:N, --gpus-per-task=1), or leave gpus= out (a node without GPUs then runs "
                    "the step as gpus=none); a CPU step says so with --dl-train=gpus=none",
                    st->opts.gpus == DLT_GPUS_STEP ? "step" : "task");
        return -1;
    }
    if (dlt_user_opts_format(&st->opts, opts, sizeof(opts)) == 0 && st->opts.verbose)
        slurm_spank_log("dltrain: step options %s%s", opts,
                        !st->opts.gpus_given && !gpus ? " (no GPUs requested: gpus=none on nodes without a GPU and "
                                                        "in the site's cpu_partitions, refused on GPU nodes)"
                                                      : "");
    return 0;
}

int dlt_srun_container_check(spank_t sp)
{
    char buf[8192], msg[1024];
    char *major = NULL, *minor = NULL;
    long n;
    /* srun sets SLURM_CONTAINER for its step when --container is given; an allocation made with
     * --container leaves it set for every srun inside, so the command line decides. */
    if (!getenv("SLURM_CONTAINER") || (n = _cmdline(buf, sizeof(buf))) < 0 || !dlt_oci_container_asked(buf, (size_t)n))
        return 0;
    if (spank_get_item(sp, S_SLURM_VERSION_MAJOR, &major) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_SLURM_VERSION_MINOR, &minor) != ESPANK_SUCCESS || !major || !minor)
        return 0; /* cannot tell the release: the step runs (and dltrain env inside says what is missing) */
    if (dlt_oci_task_env(atoi(major), atoi(minor)))
        return 0;
    dlt_oci_refusal(msg, sizeof(msg), atoi(major), atoi(minor));
    slurm_error("dltrain: %s", msg);
    return -1;
}
