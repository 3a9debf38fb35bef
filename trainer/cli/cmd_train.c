/* SPDX-License-Identifier: Apache-2.0 */
/* cmd_train: `dltrain train`, `dltrain eval`, `dltrain bench`: one option set, three runs. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/exit_status.h"
#include "common/io.h"
#include "common/stop_signal.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/cli/commands.h"
#include "trainer/cli/launch.h"
#include "trainer/cli/model_from_checkpoint.h"
#include "trainer/cli/opt_table.h"
#include "trainer/data/dataset.h"
#include "trainer/data/loader.h"
#include "trainer/train/checkpointing.h"
#include "trainer/train/preflight.h"
#include "trainer/train/trainer.h"

/* Removes "key=value" from a settings record ("k1=v1 k2=v2 ..."), so a resume does not compare it. */
static void _drop_setting(char *config, const char *key)
{
    size_t k = strlen(key);
    for (char *p = config; *p;) {
        char *end = p + strcspn(p, " ");
        if (!strncmp(p, key, k) && p[k] == '=') {
            memmove(p, *end ? end + 1 : end, strlen(*end ? end + 1 : end) + 1);
            return;
        }
        p = *end ? end + 1 : end;
    }
}

/* Appends "--NAME" to a comma-separated list. */
static void _list_add(char *list, size_t len, const char *name)
{
    size_t n = strlen(list);
    snprintf(list + n, len - n, "%s--%s", n ? ", " : "", name);
}

/* The options given that the command does not read, said in one line. */
static void _warn_unused(const char *cmd, const unsigned char *seen)
{
    char list[1024];
    dlt_opt_unread(dlt_cmd_bit(cmd), seen, list, sizeof(list));
    if (list[0])
        fprintf(stderr, "dltrain: warning: %s does not use %s (see dltrain %s --help): ignored\n", cmd, list, cmd);
}

/* Why this run has the CPU backend, for a refusal. */
static const char *_why_cpu(const dlt_train_config *c)
{
    if (c->backend.kind && !strcmp(c->backend.kind, "cpu"))
        return "--backend cpu";
#ifdef DLT_HAVE_CUDA_BACKEND
    return "--backend auto and this task sees no GPU";
#else
    return "this dltrain was built without the CUDA backend";
#endif
}

/* What the options ask of each other, the command and the backend, decided from the command line
 * and the build alone: every rank decides alike, before anything starts. Returns 0 or 2. */
static int _check_usage(const char *cmd, const dlt_train_config *c, const unsigned char *seen, const char *comm_kind)
{
    const char *log = getenv("DLT_LOG");
    char list[512] = "";
    if (log && *log && strcmp(log, "quiet") && strcmp(log, "info") && strcmp(log, "verbose")) {
        fprintf(stderr, "dltrain: DLT_LOG=%s: quiet, info or verbose (or unset)\n", log);
        return DLT_EXIT_USAGE;
    }
    /* Generated images and --data exclude each other: one of them would be ignored. */
    for (int k = 0; k < 2 && c->data; k++)
        if (seen[dlt_opt_find(DLT_CMD_TRAIN, k ? "noise" : "synthetic")]) {
            fprintf(stderr, "dltrain: --%s and --data %s: generated images or those of --data, not both; give one\n",
                    k ? "noise" : "synthetic", c->data);
            return DLT_EXIT_USAGE;
        }
    /* Validation images belong to real data: training on generated images validates on generated
     * ones, and evaluation without --data scores --val-data (a labels file needs one of them). */
    if (!c->data && c->val_data && !strcmp(cmd, "train")) {
        fprintf(stderr,
                "dltrain: --val-data %s without --data: training on generated images validates on generated "
                "ones; give --data too, or leave --val-data out\n",
                c->val_data);
        return DLT_EXIT_USAGE;
    }
    if (!c->data && !c->val_data && c->val_labels && (!strcmp(cmd, "train") || !strcmp(cmd, "eval"))) {
        fprintf(stderr,
                "dltrain: --val-labels %s labels the images of --val-data DIR (or of --data ROOT/val): give "
                "one\n",
                c->val_labels);
        return DLT_EXIT_USAGE;
    }
    /* Without a directory these would write nothing, silently. */
    if (!strcmp(cmd, "train") && !c->checkpoint_dir) {
        if (c->checkpoint_every > 0)
            _list_add(list, sizeof(list), "checkpoint-every");
        if (c->checkpoint_minutes > 0)
            _list_add(list, sizeof(list), "checkpoint-minutes");
        if (c->target_top1 > 0)
            _list_add(list, sizeof(list), "target-top1");
        if (list[0]) {
            fprintf(stderr,
                    "dltrain: %s: checkpoints go to --checkpoint-dir DIR, and none was given: add one, or "
                    "leave %s out\n",
                    list, strchr(list, ',') ? "them" : "it");
            return DLT_EXIT_USAGE;
        }
    }
    /* Two more the command line decides alone: refused here by every rank alike, not after the
     * bootstrap by each (the run's own checks stay for other callers). */
    if (!strcmp(cmd, "train") && c->init && c->resume) {
        fprintf(stderr,
                "dltrain: --init %s and --resume %s: --resume continues a run, --init starts one from given "
                "weights; give one\n",
                c->init, c->resume);
        return DLT_EXIT_USAGE;
    }
    /* Generated data is validated only when --eval-every N asks; --eval-every 0 never validates. */
    if (!strcmp(cmd, "train") && c->target_top1 > 0 && (c->eval_every == 0 || (!c->data && c->eval_every < 0))) {
        fprintf(stderr, "dltrain: --target-top1 %g needs validation (--eval-every N and validation images)\n",
                c->target_top1);
        return DLT_EXIT_USAGE;
    }
    if (!dlt_backend_is_gpu(&c->backend)) {
        if (c->backend.precision == DLT_PREC_FP16 || c->backend.precision == DLT_PREC_TF32) {
            fprintf(stderr,
                    "dltrain: --precision %s needs the CUDA backend (the CPU backend has fp32 and bf16), and "
                    "this run uses the CPU backend (%s)\n",
                    dlt_precision_name(c->backend.precision), _why_cpu(c));
            return DLT_EXIT_USAGE;
        }
        if (!strcmp(comm_kind, "nccl")) {
            fprintf(stderr,
                    "dltrain: --comm nccl reduces GPU buffers, and this run uses the CPU backend (%s): use "
                    "--comm mpi (or auto), or run on GPUs with --backend cuda\n",
                    _why_cpu(c));
            return DLT_EXIT_USAGE;
        }
        dlt_opt_cuda_only(seen, list, sizeof(list));
        if (list[0]) {
            fprintf(stderr,
                    "dltrain: %s: for the CUDA backend only, and this run uses the CPU backend (%s): leave "
                    "%s out, or run on GPUs\n",
                    list, _why_cpu(c), strchr(list, ',') ? "them" : "it");
            return DLT_EXIT_USAGE;
        }
    }
    _warn_unused(cmd, seen);
    return 0;
}

/* Data at PATH: a RecordIO file (PATH ending in .rec, its .idx beside it) or a folder. */
static int _check_data(const char *opt, const char *path, dlt_err *err)
{
    char idx[4096];
    if (!dlt_recordio_path(path)) {
        struct stat st;
        int rc = dlt_check_path(opt, path, 1, err);
        /* A file where a folder was expected: say what a file may be. */
        if (rc != 0 && stat(path, &st) == 0 && S_ISREG(st.st_mode))
            dlt_fail_suffix(err, rc,
                            " (give an image folder, or an MXNet RecordIO file named .rec with its .idx "
                            "beside it)");
        return rc;
    }
    if (dlt_check_path(opt, path, 0, err) != 0)
        return -1;
    dlt_recordio_sibling(path, ".idx", idx, sizeof(idx));
    return dlt_check_path("its index", idx, 0, err);
}

/* 1 with err filled when path (may be NULL) names a safetensors file: a checkpoint or its state,
 * which an option that appends to or overwrites its file would destroy. */
static int _is_checkpoint_name(const char *opt, const char *path, dlt_err *err)
{
    size_t n = path ? strlen(path) : 0;
    if (n < 12 || strcmp(path + n - 12, ".safetensors"))
        return 0;
    return dlt_fail(err, 1,
                    "%s %s: a .safetensors file (a checkpoint or its state), which %s would %s: give another "
                    "file",
                    opt, path, opt, !strcmp(opt, "--metrics") ? "append JSON lines to" : "overwrite");
}

/* What this rank finds wrong before the launch, in err (empty: nothing): every path the command
 * reads exists and is a folder or a regular file as the option needs (each rank reads them itself,
 * so each looks), an existing --dump-batch is a regular file, and the CPU can do bf16. Checked
 * without opening anything (a FIFO would block an open). */
static void _check_local(const char *cmd, const dlt_train_config *c, const char *checkpoint, dlt_err *err)
{
    int train = !strcmp(cmd, "train"), eval = !strcmp(cmd, "eval");
    struct stat st;
    if (c->data && _check_data("--data", c->data, err) != 0)
        return;
    if ((train || eval) && c->val_data && _check_data("--val-data", c->val_data, err) != 0)
        return;
    if ((train || eval) && c->val_labels && dlt_check_path("--val-labels", c->val_labels, 0, err) != 0)
        return;
    if (train && c->init && dlt_check_path("--init", c->init, 0, err) != 0)
        return;
    if (train && c->resume && strcmp(c->resume, "auto") && strcmp(c->resume, "auto-or-fresh") &&
        dlt_check_path("--resume", c->resume, 0, err) != 0)
        return;
    if (eval && checkpoint && dlt_check_path("--checkpoint", checkpoint, 0, err) != 0)
        return;
    if (train && c->dump_batch && stat(c->dump_batch, &st) == 0 &&
        dlt_check_path("--dump-batch", c->dump_batch, 0, err) != 0)
        return;
    /* The files this command writes over or appends to are never a checkpoint or its state. */
    if (train && (_is_checkpoint_name("--metrics", c->metrics_path, err) ||
                  _is_checkpoint_name("--dump-batch", c->dump_batch, err)))
        return;
    if (!dlt_backend_is_gpu(&c->backend) && c->backend.precision == DLT_PREC_BF16 && !dlt_backend_cpu_has_bf16()) {
        char host[64] = "?";
        gethostname(host, sizeof(host) - 1);
        dlt_fail(err, -EIO,
                 "--precision bf16 needs a CPU with AVX512-BF16 or AMX, and oneDNN sees none on %s: "
                 "use fp32",
                 host);
    }
}

/* The rank this process will be, from the launcher's environment, known before the bootstrap. */
static int _launcher_rank(void)
{
    static const char *const vars[] = {"PMIX_RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"};
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        const char *v = getenv(vars[i]);
        if (v && *v)
            return atoi(v);
    }
    return 0;
}

/* A usage error is found alike by every rank (the same command line, the same build): rank 0
 * says it and the others stay silent until the launch, so that it is said once. Returns the
 * saved stderr to give back with _unmute, or -1 when nothing was muted. */
static int _mute_other_ranks(void)
{
    int saved, null;
    if (_launcher_rank() == 0)
        return -1;
    fflush(stderr);
    if ((saved = dup(STDERR_FILENO)) < 0)
        return -1;
    if ((null = open("/dev/null", O_WRONLY | O_CLOEXEC)) < 0 || dup2(null, STDERR_FILENO) < 0) {
        if (null >= 0)
            close(null);
        close(saved);
        return -1;
    }
    close(null);
    return saved;
}

static void _unmute(int saved)
{
    if (saved < 0)
        return;
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
}

/* Checks every rank makes the same way before the run (see preflight.h); synthetic data too small
 * for one batch per rank is a usage error here (real data is counted when the trainer opens it).
 * Returns a run status (trainer.h), as the run does. */
static int _preflight(const char *cmd, dlt_train_config *c, dlt_comm *comm, const char *checkpoint, char *resume_path,
                      size_t resume_len, dlt_run_claims *claims)
{
    dlt_err err = DLT_ERR_INIT;
    char what[64], now[1024];
    int rc;
    int64_t n = !strcmp(cmd, "train") ? c->synthetic_size : c->eval_size;
    /* Training needs a full batch per rank; evaluation scores any number of images exactly. */
    if (!c->data && !strcmp(cmd, "train")) {
        snprintf(what, sizeof(what), "%s %" PRId64, !strcmp(cmd, "train") ? "--synthetic-size" : "--eval-size", n);
        if (dlt_loader_check_fit(n, c->model.batch, comm->size, what, &err) != 0) {
            if (comm->rank == 0)
                fprintf(stderr, "dltrain: %s\n", err.msg);
            return DLT_RUN_REFUSED_USAGE;
        }
    }
    if (!strcmp(cmd, "eval"))
        return dlt_preflight_eval_checkpoint(checkpoint, comm);
    if (strcmp(cmd, "train"))
        return DLT_RUN_DONE;
    dlt_stop_signal_stage("checking the output paths");
    if ((rc = dlt_preflight_outputs(c->metrics_path, c->checkpoint_dir, c->tensorboard_dir, comm)) != 0)
        return rc;
    if (c->baseline && (rc = dlt_preflight_baseline(c->baseline, comm)) != 0)
        return rc;
    /* Claimed before the resume choice: a requeue that meets its previous run still saving waits
     * for it, then chooses among everything it saved. */
    dlt_stop_signal_stage("claiming the output folders");
    if ((rc = dlt_preflight_claims(claims, c->metrics_path, c->checkpoint_dir, c->tensorboard_dir, comm)) != 0)
        return rc;
    c->claims = claims;
    c->resume_chosen = c->resume && (!strcmp(c->resume, "auto") || !strcmp(c->resume, "auto-or-fresh"));
    dlt_stop_signal_stage("choosing the checkpoint to resume from");
    if (c->resume && (rc = dlt_preflight_resume(&c->resume, c->checkpoint_dir, comm, resume_path, resume_len)) != 0)
        return rc;
    /* After the resume's own agreement (which names what each rank found), for the runs it lets
     * through: a directory of one node where no rank found a checkpoint, or no --resume at all. */
    if ((rc = dlt_preflight_shared_dir(c->checkpoint_dir, comm)) != 0)
        return rc;
    if (!c->resume)
        return DLT_RUN_DONE;
    dlt_run_config_text(c, comm->size, now, sizeof(now));
    if (c->data && !c->classes_given)
        _drop_setting(now, "classes"); /* not known yet: the data's, matched by name to the checkpoint's at open */
    return dlt_preflight_resume_settings(c->resume, now, c->resume_override, comm);
}

/* The command after its options: what they ask of each other and of the backend, checked before
 * the launch; then the launch and the run. */
static int _run(const char *cmd, const dlt_cli_opts *o, const unsigned char *seen, int argc, char **argv, int next,
                int muted, char *resume_path, size_t resume_len)
{
    dlt_train_config c = o->train;
    dlt_bench_config b = o->bench;
    dlt_model_given given = o->given;
    const char *comm_kind = o->comm, *checkpoint = o->checkpoint;
    double timeout = o->timeout;
    int verify = o->verify, rc;
    dlt_err err = DLT_ERR_INIT;
    dltpmix_ctx *px;
    dlt_comm *comm;
    dlt_run_claims claims;

    if (next < argc) {
        fprintf(stderr, "dltrain %s: unexpected argument '%s'\n", cmd, argv[next]);
        return DLT_EXIT_USAGE;
    }
    if (!strcmp(cmd, "eval") && !checkpoint) {
        fprintf(stderr, "dltrain eval: --checkpoint PATH is required\n");
        return DLT_EXIT_USAGE;
    }
    if (verify && strcmp(cmd, "eval")) {
        fprintf(stderr, "dltrain %s: --verify belongs to eval and info (dltrain eval --checkpoint FILE --verify)\n",
                cmd);
        return DLT_EXIT_USAGE;
    }
    if (c.tensorboard_dir && strcmp(cmd, "train")) {
        fprintf(stderr, "dltrain %s: --tensorboard belongs to train (the scalars of a training run)\n", cmd);
        return DLT_EXIT_USAGE;
    }
    if (verify) /* one file pair, checked by this process: nothing to launch */
        return dlt_cli_exit_status(dlt_verify_checkpoint_cmd(checkpoint));
    if (!strcmp(cmd, "eval")) {
        /* The model as the checkpoint's state file records it, unless the options say (and agree);
         * a file without one (a torchvision export) needs --arch and friends as before. */
        dlt_checkpoint_info info;
        dlt_err probe = DLT_ERR_INIT; /* a file that is no checkpoint of ours is judged later, not here */
        given.classes = c.classes_given;
        if (dlt_checkpoint_verify(checkpoint, &info, &probe) == 0 && info.verified) {
            if (dlt_model_adopt_config(&c.model, &given, info.config, &probe) != 0) {
                fprintf(stderr, "dltrain: %s: %s\n", checkpoint, probe.msg);
                return DLT_EXIT_USAGE;
            }
            c.classes_given = 1;
        } else if (!info.verified) {
            /* no state file: the tensors say which ResNet it is */
            int found;
            char said[96];
            if (dlt_model_infer_from_tensors(checkpoint, &c.model, &given, &found, said, sizeof(said), &probe) != 0) {
                fprintf(stderr, "dltrain: %s: %s\n", checkpoint, probe.msg);
                return DLT_EXIT_USAGE;
            }
            if (found) {
                c.classes_given = 1;
                if (c.log_level != DLT_LOG_QUIET && _launcher_rank() == 0)
                    fprintf(stderr,
                            "dltrain: %s has no state file (a torchvision export?): its tensors are those of "
                            "%s\n",
                            checkpoint, said);
            }
        }
    }
    if (c.resume_override && !c.resume) {
        fprintf(stderr, "dltrain %s: --resume-override %s applies only with --resume\n", cmd, c.resume_override);
        return DLT_EXIT_USAGE;
    }
    if (c.resume && !*c.resume) {
        fprintf(stderr, "dltrain: --resume '': expected a checkpoint file, auto or auto-or-fresh\n");
        return DLT_EXIT_USAGE;
    }
    if ((rc = _check_usage(cmd, &c, seen, comm_kind)) != 0)
        return rc;
    _unmute(muted);
    {
        dlt_comm_request req = {comm_kind, dlt_backend_is_gpu(&c.backend), c.backend.device};
        dlt_err problem = DLT_ERR_INIT;
        _check_local(cmd, &c, checkpoint, &problem);
        if (c.checkpoint_dir) /* a stop in start-up then leaves the run resumable: requeue it */
            dlt_stop_signal_startup_status(DLT_EXIT_PREEMPTED);
        if (c.stall_timeout > 0) /* the bound on a stuck phase, as in training (at most 60 s) */
            dlt_stop_signal_startup_grace(c.stall_timeout);
        dlt_stop_signal_stage("bootstrap (the ranks and the communicator)");
        if ((rc = dlt_cli_launch(&req, &c.backend, timeout, problem.code ? problem.msg : NULL, &px, &comm, &err)) != 0)
            return rc;
    }
    dlt_stop_signal_stage("the --preflight health check");
    if (o->preflight && !strcmp(cmd, "train") &&
        (rc = dlt_check_preflight(o->preflight == 2, &c.backend, px, comm)) != 0) {
        dlt_cli_finish(px, comm); /* --preflight: every rank stops alike, before the first step */
        return rc;
    }
    dlt_run_claims_init(&claims);
    rc = _preflight(cmd, &c, comm, checkpoint, resume_path, resume_len, &claims); /* a run status */
    if (rc == DLT_RUN_DONE) {
        dlt_stop_signal_stage("opening the run (data, backend, network)");
        rc = !strcmp(cmd, "train")  ? dlt_train_run(&c, comm, &err)
             : !strcmp(cmd, "eval") ? dlt_eval_run(&c, comm, checkpoint, &err)
                                    : dlt_bench_run(&c, &b, comm, &err);
        /* The run's first failure, said once, with the rank. */
        if (rc < 0 && err.msg[0]) /* empty: another rank said it for all */
            dlt_rank_say(comm->rank, "%s", err.msg);
    }
    rc = dlt_cli_exit_status(rc);
    dlt_run_claims_release(&claims); /* held here only when the run never took them over */
    dlt_cli_finish(px, comm);
    return rc;
}

int dlt_cmd_train(int argc, char **argv)
{
    const char *cmd = argv[0];
    dlt_cli_opts o;
    static char resume_path[4096];
    int rc, next, muted;
    unsigned char seen[DLT_OPT_MAX] = {0};

    /* First of all: a stop signal during start-up is a request, answered before the first step
     * (common/stop_signal.h), not the default action. */
    if (!strcmp(cmd, "train")) {
        dlt_stop_signal_install();
        dlt_stop_signal_stage("reading the options");
    }
    memset(&o, 0, sizeof(o));
    dlt_train_config_defaults(&o.train);
    o.bench = (dlt_bench_config){.warmup = 3, .iters = 10}; /* per_gpu 0: by precision and model (bench.c) */
    o.comm = "auto";
    if (!strcmp(cmd, "bench"))
        o.train.learnable = 0;
    muted = _mute_other_ranks();
    if ((rc = dlt_opt_parse_command(dlt_cmd_bit(cmd), NULL, argc, argv, 1, &o, seen, &next, 1)) >= 0)
        return rc;
    return _run(cmd, &o, seen, argc, argv, next, muted, resume_path, sizeof(resume_path));
}
