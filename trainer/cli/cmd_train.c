/* SPDX-License-Identifier: Apache-2.0 */
/* cmd_train: `dltrain train`, `dltrain eval`, `dltrain bench`: one option set, three runs. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trainer/cli/commands.h"
#include "trainer/cli/launch.h"
#include "trainer/cli/model_from_checkpoint.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/check/check.h"
#include "trainer/cli/parse.h"
#include "trainer/cli/preflight.h"
#include "trainer/common/io.h"
#include "trainer/data/loader.h"
#include "trainer/train/checkpointing.h"
#include "trainer/train/trainer.h"

enum {
    O_ARCH = 256, O_WIDTH, O_IMAGE, O_CLASSES, O_BATCH, O_PRECISION, O_EPOCHS, O_STEPS, O_LR, O_MOMENTUM, O_WD,
    O_SMOOTH, O_WARMUP, O_SCHEDULE, O_MILESTONES, O_DECAY_BN, O_NO_ZERO_INIT, O_SEED, O_SYNTH, O_SYNTH_SIZE, O_DATA,
    O_NOISE, O_LOG_EVERY, O_METRICS, O_CKPT_DIR, O_CKPT_EVERY, O_RESUME, O_EVAL_SIZE, O_CHECK_EVERY, O_COMM,
    O_TIMEOUT, O_VAL_DATA, O_VAL_LABELS, O_WORKERS, O_STRICT, O_MAX_BAD, O_STALL, O_CKPT_MIN, O_BASELINE, O_WARMUP_ITERS, O_ITERS, O_INFERENCE, O_FEED, O_JSON, O_CHECKPOINT, O_HELP,
    O_BACKEND, O_DEVICE, O_TF32, O_BUCKET, O_LOWP, O_LOSS_SCALE, O_LS_WINDOW, O_GRAPHS, O_DETERMINISTIC, O_VERIFY,
    O_QUIET, O_VERBOSE, O_STEM_PAD, O_EVAL_EVERY, O_TARGET, O_INIT, O_AUGMENT, O_DUMP_BATCH,
    O_RESUME_OVERRIDE,
    O_TENSORBOARD, O_PREFLIGHT
};

static const struct option g_opts[] = {
    {"arch", required_argument, NULL, O_ARCH},
    {"width", required_argument, NULL, O_WIDTH},
    {"image-size", required_argument, NULL, O_IMAGE},
    {"classes", required_argument, NULL, O_CLASSES},
    {"batch", required_argument, NULL, O_BATCH},
    {"precision", required_argument, NULL, O_PRECISION},
    {"epochs", required_argument, NULL, O_EPOCHS},
    {"steps", required_argument, NULL, O_STEPS},
    {"lr", required_argument, NULL, O_LR},
    {"momentum", required_argument, NULL, O_MOMENTUM},
    {"wd", required_argument, NULL, O_WD},
    {"label-smoothing", required_argument, NULL, O_SMOOTH},
    {"warmup-epochs", required_argument, NULL, O_WARMUP},
    {"schedule", required_argument, NULL, O_SCHEDULE},
    {"milestones", required_argument, NULL, O_MILESTONES},
    {"decay-bn-bias", no_argument, NULL, O_DECAY_BN},
    {"no-zero-init", no_argument, NULL, O_NO_ZERO_INIT},
    {"seed", required_argument, NULL, O_SEED},
    {"synthetic", no_argument, NULL, O_SYNTH},
    {"synthetic-size", required_argument, NULL, O_SYNTH_SIZE},
    {"noise", no_argument, NULL, O_NOISE},
    {"data", required_argument, NULL, O_DATA},
    {"val-data", required_argument, NULL, O_VAL_DATA},
    {"val-labels", required_argument, NULL, O_VAL_LABELS},
    {"workers", required_argument, NULL, O_WORKERS},
    {"strict", no_argument, NULL, O_STRICT},
    {"log-every", required_argument, NULL, O_LOG_EVERY},
    {"metrics", required_argument, NULL, O_METRICS},
    {"tensorboard", required_argument, NULL, O_TENSORBOARD},
    {"checkpoint-dir", required_argument, NULL, O_CKPT_DIR},
    {"checkpoint-every", required_argument, NULL, O_CKPT_EVERY},
    {"resume", required_argument, NULL, O_RESUME},
    {"resume-override", required_argument, NULL, O_RESUME_OVERRIDE},
    {"checkpoint-minutes", required_argument, NULL, O_CKPT_MIN},
    {"max-bad-steps", required_argument, NULL, O_MAX_BAD},
    {"stall-timeout", required_argument, NULL, O_STALL},
    {"baseline", required_argument, NULL, O_BASELINE},
    {"eval-size", required_argument, NULL, O_EVAL_SIZE},
    {"check-every", required_argument, NULL, O_CHECK_EVERY},
    {"comm", required_argument, NULL, O_COMM},
    {"timeout", required_argument, NULL, O_TIMEOUT},
    {"warmup", required_argument, NULL, O_WARMUP_ITERS},
    {"iters", required_argument, NULL, O_ITERS},
    {"inference", no_argument, NULL, O_INFERENCE},
    {"feed", no_argument, NULL, O_FEED},
    {"json", no_argument, NULL, O_JSON},
    {"checkpoint", required_argument, NULL, O_CHECKPOINT},
    {"verify", no_argument, NULL, O_VERIFY},
    {"backend", required_argument, NULL, O_BACKEND},
    {"device", required_argument, NULL, O_DEVICE},
    {"tf32", no_argument, NULL, O_TF32},
    {"bucket-mib", required_argument, NULL, O_BUCKET},
    {"allreduce-lowp", no_argument, NULL, O_LOWP},
    {"loss-scale", required_argument, NULL, O_LOSS_SCALE},
    {"loss-scale-window", required_argument, NULL, O_LS_WINDOW},
    {"cuda-graphs", no_argument, NULL, O_GRAPHS},
    {"deterministic", no_argument, NULL, O_DETERMINISTIC},
    {"stem-pad", required_argument, NULL, O_STEM_PAD},
    {"eval-every", required_argument, NULL, O_EVAL_EVERY},
    {"init", required_argument, NULL, O_INIT},
    {"augment", required_argument, NULL, O_AUGMENT},
    {"dump-batch", required_argument, NULL, O_DUMP_BATCH},
    {"target-top1", required_argument, NULL, O_TARGET},
    {"quiet", no_argument, NULL, O_QUIET},
    {"verbose", no_argument, NULL, O_VERBOSE},
    {"help", no_argument, NULL, O_HELP},
    {"preflight", optional_argument, NULL, O_PREFLIGHT},
    {NULL, 0, NULL, 0},
};

static void _usage(FILE *f, const char *cmd)
{
    fprintf(f,
            "usage: dltrain %s [OPTIONS]\n"
            "\n"
            "model:\n"
            "  --arch NAME            resnet18|34|50|101|152, -v1 suffix for stride-on-1x1 (default resnet50)\n"
            "  --width F              channel multiplier for small models (default 1.0)\n"
            "  --image-size N         input height and width (default 224)\n"
            "  --classes N            output classes (default 1000)\n"
            "  --batch N              images per rank per step (default 32)\n"
            "compute:\n"
            "  --backend B            auto | cpu | cuda (default auto: cuda when built in and a GPU is visible)\n"
            "  --precision P          fp32 | tf32 | fp16 | bf16 (default fp32). CPU: fp32, bf16 (convolutions,\n"
            "                         AVX512-BF16/AMX). CUDA: all four; fp16/bf16 are mixed precision with\n"
            "                         fp32 master weights; tf32 and bf16 need Ampere or newer\n"
            "  --tf32                 same as --precision tf32\n"
            "  --device N             CUDA device among the visible ones (default: the one --dl-train bound\n"
            "                         the task to, else the local rank modulo the visible GPUs)\n"
            "  --bucket-mib M         CUDA: gradient all-reduce bucket size (default 25)\n"
            "  --allreduce-lowp       CUDA fp16/bf16: all-reduce gradients in that type (default fp32)\n"
            "  --loss-scale S         fp16: initial dynamic loss scale (default 65536)\n"
            "  --loss-scale-window N  fp16: clean steps before the scale doubles (default 2000)\n"
            "  --cuda-graphs          CUDA: record one training step as a CUDA graph and replay it\n"
            "  --deterministic        CUDA: only cuDNN algorithms that repeat bit for bit\n"
            "  --stem-pad auto|on|off CUDA: pad the 3-channel input to 4 for tensor cores (auto: all but fp32)\n"
            "data:\n"
            "  --data PATH            ImageFolder root (PATH/train and PATH/val, or PATH/CLASS/*.JPEG) or a\n"
            "                         RecordIO file (PATH.rec + PATH.idx, as im2rec writes)\n"
            "  --val-data PATH        validation images (default PATH/val); eval without --data scores PATH\n"
            "  --val-labels FILE      \"FILENAME CLASS\" lines for a flat validation folder\n"
            "  --workers N            decode threads per rank (default: the task's CPUs minus one)\n"
            "  --strict               stop at the first unreadable image instead of skipping it\n"
            "  --synthetic            generated learnable images (the default without --data)\n"
            "  --synthetic-size N     images per epoch (default 1281167, as ILSVRC-2012 train)\n"
            "  --noise                random images (throughput only; nothing to learn)\n"
            "training (train):\n"
            "  --epochs N             (default 90)           --steps N    stop after N steps in total\n"
            "  --lr F                 base LR per 256 images of global batch (default 0.1)\n"
            "  --momentum F           (default 0.9)          --wd F       weight decay (default 1e-4)\n"
            "  --decay-bn-bias        also decay BN parameters and biases (default: not)\n"
            "  --label-smoothing F    (default 0.1)          --warmup-epochs F (default 5)\n"
            "  --schedule step|cosine (default step)         --milestones A,B,C (default 30,60,80)\n"
            "  --no-zero-init         keep the last BN gamma of each block at 1\n"
            "  --seed N               (default 1)\n"
            "  --log-every N          steps between log lines (default 10)\n"
            "  --quiet | --verbose    errors, warnings and results only | also setup details (DLT_LOG)\n"
            "  --metrics FILE         append one JSON object per log line (rank 0)\n"
            "  --tensorboard DIR      TensorBoard event file in DIR (rank 0): the metrics' scalars\n"
            "  --checkpoint-dir DIR   checkpoints (rank 0): ckpt-STEP.safetensors + .state.safetensors\n"
            "  --checkpoint-every N   steps between checkpoints (default: end and on SIGTERM/SIGUSR1)\n"
            "  --checkpoint-minutes M also checkpoint when M minutes passed since the last one\n"
            "  --baseline FILE        metrics of a smaller run: the summary adds scaling efficiency\n"
            "  --resume PATH|auto|auto-or-fresh  continue from a checkpoint. auto: the newest valid one\n"
            "                         in --checkpoint-dir; none there: from scratch; some there but none\n"
            "                         valid: stop and list them. auto-or-fresh: start from scratch then\n"
            "  --resume-override K,.. settings that may differ from the checkpoint's (batch, ranks, lr, seed,\n"
            "                         schedule, ...); any other difference refuses the resume\n"
            "  --check-every N        steps between cross-rank weight checks (default 100)\n"
            "  --max-bad-steps K      skip updates with a non-finite loss, stop after K in a row (default 5)\n"
            "  --stall-timeout S      abort when one phase (data, compute, all-reduce, checkpoint) takes\n"
            "                         longer than S seconds (default 900, 0 = off, else at least 1)\n"
            "  --eval-every N         validate every N epochs on ROOT/val or --val-data (default 1 when\n"
            "                         there are validation images, 0 = off; generated data: 0)\n"
            "  --target-top1 F        stop at the first validation with top-1 >= F (0..1), checkpoint it\n"
            "  --init FILE            start from these weights (torchvision names; another class count:\n"
            "                         fc re-initialised); step 0, no optimizer state (not --resume)\n"
            "  --augment standard|none  training crops and flips, or the evaluation transform (default\n"
            "                         standard; none: for comparisons and debugging)\n"
            "  --dump-batch FILE      debugging: rank 0 writes its first batch (uint8 NHWC + int32 labels)\n"
            "  --preflight[=quick|full]  health check before the first step (dltrain check; quick: a GEMM and\n"
            "                         all-reduces up to 1 MiB): a wrong or slow rank stops every rank, exit 3 or 4\n"
            "evaluation (eval):\n"
            "  --checkpoint PATH      model file to evaluate (checked against its state file, if beside it)\n"
            "  --verify               only check --checkpoint against its state file (size, CRC), print, exit\n"
            "  --eval-size N          synthetic validation images (default 50000)\n"
            "benchmark (bench):\n"
            "  --warmup N --iters N   untimed and timed steps (default 3, 10)\n"
            "  --inference            forward only               --json   one JSON line\n"
            "  --feed                 a new batch every step through the training input path (decoded\n"
            "                         from --data, or generated), not one batch loaded once\n"
            "ranks:\n"
            "  --comm auto|single|mpi|nccl  communicator between ranks (default auto: NCCL on GPUs when there\n"
            "                         is more than one rank, else MPI; single for one rank)\n"
            "  --timeout S            bootstrap timeout (default 300 or $DLTPMIX_TIMEOUT)\n"
            "\n"
            "A run stopped by SIGTERM or SIGUSR1 checkpoints and exits with status %d (without\n"
            "--checkpoint-dir: nothing saved, status %d). See dltrain(1).\n",
            cmd, DLT_EXIT_PREEMPTED, DLT_EXIT_STOPPED_UNSAVED);
}

/* Which commands read an option; an option not listed here serves all three. One option set may
 * serve train and eval (job scripts and tests share them), so an option the command does not read
 * is said once and the run goes on (see dltrain(1), OPTIONS). */
enum { C_TRAIN = 1, C_EVAL = 2, C_BENCH = 4 };
static const struct {
    const char *name;
    unsigned cmds;
} g_scope[] = {
    {"epochs", C_TRAIN}, {"steps", C_TRAIN}, {"lr", C_TRAIN}, {"momentum", C_TRAIN}, {"wd", C_TRAIN},
    {"label-smoothing", C_TRAIN}, {"warmup-epochs", C_TRAIN}, {"schedule", C_TRAIN}, {"milestones", C_TRAIN},
    {"decay-bn-bias", C_TRAIN}, {"no-zero-init", C_TRAIN}, {"synthetic-size", C_TRAIN}, {"log-every", C_TRAIN},
    {"metrics", C_TRAIN}, {"checkpoint-dir", C_TRAIN}, {"checkpoint-every", C_TRAIN}, {"resume", C_TRAIN},
    {"checkpoint-minutes", C_TRAIN}, {"baseline", C_TRAIN}, {"check-every", C_TRAIN}, {"max-bad-steps", C_TRAIN},
    {"stall-timeout", C_TRAIN}, {"eval-every", C_TRAIN}, {"target-top1", C_TRAIN}, {"init", C_TRAIN},
    {"dump-batch", C_TRAIN}, {"resume-override", C_TRAIN}, {"augment", C_TRAIN | C_BENCH}, {"loss-scale", C_TRAIN | C_BENCH},
    {"loss-scale-window", C_TRAIN | C_BENCH}, {"bucket-mib", C_TRAIN | C_BENCH}, {"allreduce-lowp", C_TRAIN | C_BENCH},
    {"cuda-graphs", C_TRAIN | C_BENCH}, {"eval-size", C_TRAIN | C_EVAL}, {"val-data", C_TRAIN | C_EVAL},
    {"val-labels", C_TRAIN | C_EVAL}, {"checkpoint", C_EVAL}, {"warmup", C_BENCH}, {"iters", C_BENCH},
    {"inference", C_BENCH}, {"feed", C_BENCH}, {"json", C_BENCH},
    {"preflight", C_TRAIN},
};

/* Options only the CUDA backend reads: on the CPU backend they are refused, since the run would
 * not do what they ask (a job script meant for GPUs landing on a node where none is visible). */
static const char *const g_cuda_only[] = {"device", "bucket-mib", "allreduce-lowp", "loss-scale", "loss-scale-window",
                                          "cuda-graphs", "deterministic", "stem-pad"};

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

static unsigned _scope(const char *name)
{
    for (size_t i = 0; i < sizeof(g_scope) / sizeof(g_scope[0]); i++)
        if (!strcmp(g_scope[i].name, name))
            return g_scope[i].cmds;
    return C_TRAIN | C_EVAL | C_BENCH;
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
    unsigned bit = !strcmp(cmd, "train") ? C_TRAIN : !strcmp(cmd, "eval") ? C_EVAL : C_BENCH;
    char list[1024] = "";
    for (size_t i = 0; g_opts[i].name; i++)
        if (seen[i] && !(_scope(g_opts[i].name) & bit))
            _list_add(list, sizeof(list), g_opts[i].name);
    if (list[0])
        fprintf(stderr, "dltrain: warning: %s does not use %s (see dltrain %s --help): ignored\n", cmd, list, cmd);
}

/* The CUDA-only options given, as a list (empty: none). */
static void _cuda_options(const unsigned char *seen, char *list, size_t len)
{
    list[0] = 0;
    for (size_t i = 0; g_opts[i].name; i++)
        for (size_t k = 0; k < sizeof(g_cuda_only) / sizeof(g_cuda_only[0]); k++)
            if (seen[i] && !strcmp(g_opts[i].name, g_cuda_only[k]))
                _list_add(list, len, g_opts[i].name);
}

/* The option's name as the user should type it (getopt resolved abbreviations and --opt=value). */
static const char *_opt_name(int longindex, char *buf, size_t len)
{
    snprintf(buf, len, "--%s", longindex >= 0 ? g_opts[longindex].name : "option");
    return buf;
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
        return 2;
    }
    /* Generated images and --data exclude each other: one of them would be ignored. */
    for (size_t i = 0; g_opts[i].name; i++)
        if (c->data && seen[i] && (!strcmp(g_opts[i].name, "synthetic") || !strcmp(g_opts[i].name, "noise"))) {
            fprintf(stderr, "dltrain: --%s and --data %s: generated images or those of --data, not both; give one\n",
                    g_opts[i].name, c->data);
            return 2;
        }
    /* Validation images belong to real data: training on generated images validates on generated
     * ones, and evaluation without --data scores --val-data (a labels file needs one of them). */
    if (!c->data && c->val_data && !strcmp(cmd, "train")) {
        fprintf(stderr, "dltrain: --val-data %s without --data: training on generated images validates on generated "
                "ones; give --data too, or leave --val-data out\n", c->val_data);
        return 2;
    }
    if (!c->data && !c->val_data && c->val_labels && (!strcmp(cmd, "train") || !strcmp(cmd, "eval"))) {
        fprintf(stderr, "dltrain: --val-labels %s labels the images of --val-data DIR (or of --data ROOT/val): give "
                "one\n", c->val_labels);
        return 2;
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
            fprintf(stderr, "dltrain: %s: checkpoints go to --checkpoint-dir DIR, and none was given: add one, or "
                    "leave %s out\n", list, strchr(list, ',') ? "them" : "it");
            return 2;
        }
    }
    if (!dlt_backend_is_gpu(&c->backend)) {
        if (c->backend.precision == DLT_PREC_FP16 || c->backend.precision == DLT_PREC_TF32) {
            fprintf(stderr, "dltrain: --precision %s needs the CUDA backend (the CPU backend has fp32 and bf16), and "
                    "this run uses the CPU backend (%s)\n", dlt_precision_name(c->backend.precision), _why_cpu(c));
            return 2;
        }
        if (!strcmp(comm_kind, "nccl")) {
            fprintf(stderr, "dltrain: --comm nccl reduces GPU buffers, and this run uses the CPU backend (%s): use "
                    "--comm mpi (or auto), or run on GPUs with --backend cuda\n", _why_cpu(c));
            return 2;
        }
        _cuda_options(seen, list, sizeof(list));
        if (list[0]) {
            fprintf(stderr, "dltrain: %s: for the CUDA backend only, and this run uses the CPU backend (%s): leave "
                    "%s out, or run on GPUs\n", list, _why_cpu(c), strchr(list, ',') ? "them" : "it");
            return 2;
        }
    }
    _warn_unused(cmd, seen);
    return 0;
}

/* Data at PATH: a RecordIO file (PATH ending in .rec, its .idx beside it) or a folder. */
static int _check_data(const char *opt, const char *path, char *err, size_t errlen)
{
    size_t n = strlen(path);
    char idx[4096];
    if (n <= 4 || strcmp(path + n - 4, ".rec"))
        return dlt_check_path(opt, path, 1, err, errlen);
    if (dlt_check_path(opt, path, 0, err, errlen) != 0)
        return -1;
    snprintf(idx, sizeof(idx), "%.*s.idx", (int)(n - 4), path);
    return dlt_check_path("its index", idx, 0, err, errlen);
}

/* What this rank finds wrong before the launch, in err (empty: nothing): every path the command
 * reads exists and is a folder or a regular file as the option needs (each rank reads them itself,
 * so each looks), an existing --dump-batch is a regular file, and the CPU can do bf16. Checked
 * without opening anything (a FIFO would block an open). */
static void _check_local(const char *cmd, const dlt_train_config *c, const char *checkpoint, char *err, size_t errlen)
{
    int train = !strcmp(cmd, "train"), eval = !strcmp(cmd, "eval");
    struct stat st;
    err[0] = 0;
    if (c->data && _check_data("--data", c->data, err, errlen) != 0)
        return;
    if ((train || eval) && c->val_data && _check_data("--val-data", c->val_data, err, errlen) != 0)
        return;
    if ((train || eval) && c->val_labels && dlt_check_path("--val-labels", c->val_labels, 0, err, errlen) != 0)
        return;
    if (train && c->init && dlt_check_path("--init", c->init, 0, err, errlen) != 0)
        return;
    if (train && c->resume && strcmp(c->resume, "auto") && strcmp(c->resume, "auto-or-fresh") &&
        dlt_check_path("--resume", c->resume, 0, err, errlen) != 0)
        return;
    if (eval && checkpoint && dlt_check_path("--checkpoint", checkpoint, 0, err, errlen) != 0)
        return;
    if (train && c->dump_batch && stat(c->dump_batch, &st) == 0 &&
        dlt_check_path("--dump-batch", c->dump_batch, 0, err, errlen) != 0)
        return;
    if (!dlt_backend_is_gpu(&c->backend) && c->backend.precision == DLT_PREC_BF16 && !dlt_backend_cpu_has_bf16()) {
        char host[64] = "?";
        gethostname(host, sizeof(host) - 1);
        snprintf(err, errlen, "--precision bf16 needs a CPU with AVX512-BF16 or AMX, and oneDNN sees none on %s: "
                 "use fp32", host);
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
 * for one batch per rank is a usage error here (real data is counted when the trainer opens it). */
static int _preflight(const char *cmd, dlt_train_config *c, dlt_comm *comm, const char *checkpoint, char *resume_path,
                      size_t resume_len)
{
    char err[512], what[64], now[1024];
    int rc;
    int64_t n = !strcmp(cmd, "train") ? c->synthetic_size : c->eval_size;
    /* Training needs a full batch per rank; evaluation scores any number of images exactly. */
    if (!c->data && !strcmp(cmd, "train")) {
        snprintf(what, sizeof(what), "%s %" PRId64, !strcmp(cmd, "train") ? "--synthetic-size" : "--eval-size", n);
        if (dlt_loader_check_fit(n, c->model.batch, comm->size, what, err, sizeof(err)) != 0) {
            if (comm->rank == 0)
                fprintf(stderr, "dltrain: %s\n", err);
            return 2;
        }
    }
    if (!strcmp(cmd, "eval"))
        return dlt_preflight_eval_checkpoint(checkpoint, comm);
    if (strcmp(cmd, "train"))
        return 0;
    if (dlt_preflight_outputs(c->metrics_path, c->checkpoint_dir, c->tensorboard_dir, comm) != 0)
        return 1;
    if (c->baseline && dlt_preflight_baseline(c->baseline, comm) != 0)
        return 2;
    if (c->resume && (rc = dlt_preflight_resume(&c->resume, c->checkpoint_dir, comm, resume_path, resume_len)) != 0)
        return rc;
    if (!c->resume)
        return 0;
    dlt_run_config_text(c, comm->size, now, sizeof(now));
    if (c->data && !c->classes_given)
        _drop_setting(now, "classes"); /* not known yet: the data's, matched by name to the checkpoint's at open */
    return dlt_preflight_resume_settings(c->resume, now, c->resume_override, comm);
}

int dlt_cmd_train(int argc, char **argv)
{
    const char *cmd = argv[0];
    dlt_train_config c;
    dlt_bench_config b = {3, 10, 0, 0, 0};
    const char *comm_kind = "auto", *checkpoint = NULL;
    static char resume_path[4096];
    double v, timeout = 0;
    int64_t w;
    dlt_model_given given = {0, 0, 0, 0};
    char err[1024], name[48];
    int opt, rc, longindex, verify = 0, muted, preflight = 0; /* --preflight: 1 quick, 2 full */
    unsigned char seen[sizeof(g_opts) / sizeof(g_opts[0])];
    dltpmix_ctx *px;
    dlt_comm *comm;

    dlt_train_config_defaults(&c);
    if (!strcmp(cmd, "bench"))
        c.learnable = 0;
    memset(seen, 0, sizeof(seen));
    muted = _mute_other_ranks();
    optind = 1;
    while ((longindex = -1, opt = getopt_long(argc, argv, "h", g_opts, &longindex)) != -1) {
        if (longindex >= 0)
            seen[longindex] = 1;
        switch (opt) {
        case O_ARCH:
            if (dlt_model_parse_arch(optarg, &c.model, err, sizeof(err)) != 0) {
                fprintf(stderr, "dltrain: %s\n", err);
                return 2;
            }
            given.arch = 1;
            break;
/* Every number is checked in full: finite, in range, whole where it counts something. */
#define REAL(lo, hi, dst)                                                                                      \
    do {                                                                                                       \
        if (dlt_parse_real(_opt_name(longindex, name, sizeof(name)), optarg, lo, hi, &v, err, sizeof(err))) { \
            fprintf(stderr, "dltrain: %s\n", err);                                                             \
            return 2;                                                                                          \
        }                                                                                                      \
        dst;                                                                                                   \
    } while (0)
#define WHOLE(lo, hi, dst)                                                                                     \
    do {                                                                                                       \
        if (dlt_parse_whole(_opt_name(longindex, name, sizeof(name)), optarg, lo, hi, &w, err, sizeof(err))) { \
            fprintf(stderr, "dltrain: %s\n", err);                                                             \
            return 2;                                                                                          \
        }                                                                                                      \
        dst;                                                                                                   \
    } while (0)
        case O_WIDTH: REAL(0.01, 4, c.model.width = (float)v; given.width = 1); break;
        case O_IMAGE: WHOLE(32, 1024, c.model.image = (int)w; given.image = 1); break;
        case O_CLASSES: WHOLE(2, 100000, c.model.classes = (int)w; c.classes_given = 1); break;
        case O_WORKERS: WHOLE(0, 1024, c.workers = (int)w); break;
        case O_BATCH: WHOLE(1, 65536, c.model.batch = (int)w); break;
        case O_EPOCHS: WHOLE(1, 100000, c.epochs = w); break;
        case O_STEPS: WHOLE(1, 1000000000000LL, c.max_steps = w); break;
        case O_LR: REAL(0, 1e9, c.base_lr = v); break;
        case O_MOMENTUM: REAL(0, 1, c.momentum = v); break;
        case O_WD: REAL(0, 1, c.weight_decay = v); break;
        case O_SMOOTH: REAL(0, 0.99, c.label_smoothing = v); break;
        case O_WARMUP: REAL(0, 1000, c.warmup_epochs = v); break;
        case O_SEED: WHOLE(0, INT64_MAX, c.seed = (uint64_t)w); break;
        case O_SYNTH_SIZE: WHOLE(1, 10000000000LL, c.synthetic_size = w); break;
        case O_LOG_EVERY: WHOLE(0, 1000000000, c.log_every = (int)w); break;
        case O_CKPT_EVERY: WHOLE(0, 1000000000000LL, c.checkpoint_every = w); break;
        case O_EVAL_SIZE: WHOLE(1, 10000000000LL, c.eval_size = w); break;
        case O_EVAL_EVERY: WHOLE(0, 1000000, c.eval_every = (int)w); break;
        case O_TARGET: REAL(0, 1, c.target_top1 = v); break;
        case O_INIT: c.init = optarg; break;
        case O_DUMP_BATCH: c.dump_batch = optarg; break;
        case O_AUGMENT:
            if (strcmp(optarg, "standard") && strcmp(optarg, "none")) {
                fprintf(stderr, "dltrain: --augment %s: standard (random resized crop and flip) or none\n", optarg);
                return 2;
            }
            c.augment = !strcmp(optarg, "standard");
            break;
        case O_CHECK_EVERY: WHOLE(0, 1000000000, c.check_every = (int)w); break;
        case O_TIMEOUT: REAL(1, 86400, timeout = v); break;
        case O_CKPT_MIN: REAL(0, 1e6, c.checkpoint_minutes = v); break;
        case O_MAX_BAD: WHOLE(0, 1000000, c.max_bad_steps = (int)w); break;
        case O_STALL:
            REAL(0, 1e7, c.stall_timeout = v);
            if (v > 0 && v < 1) { /* the watchdog counts whole seconds: 0.2 would be "limit 0 s", which means off */
                fprintf(stderr, "dltrain: --stall-timeout %s: 0 (off) or at least 1 second\n", optarg);
                return 2;
            }
            break;
        case O_WARMUP_ITERS: WHOLE(0, 1000000, b.warmup = (int)w); break;
        case O_ITERS: WHOLE(1, 1000000, b.iters = (int)w); break;
        case O_PRECISION:
            if (dlt_precision_parse(optarg) < 0) {
                fprintf(stderr, "dltrain: --precision %s: one of fp32, tf32, fp16, bf16\n", optarg);
                return 2;
            }
            c.backend.precision = (dlt_precision)dlt_precision_parse(optarg);
            break;
        case O_TF32: c.backend.precision = DLT_PREC_TF32; break;
        case O_BACKEND:
            if (strcmp(optarg, "auto") && strcmp(optarg, "cpu") && strcmp(optarg, "cuda")) {
                fprintf(stderr, "dltrain: --backend %s: auto, cpu or cuda\n", optarg);
                return 2;
            }
            c.backend.kind = optarg;
            break;
        case O_DEVICE: WHOLE(0, 1024, c.backend.device = (int)w); break;
        case O_BUCKET: REAL(0.0625, 4096, c.reduce.bucket_mib = v); break;
        case O_LOWP: c.reduce.lowp = 1; break;
        case O_QUIET: c.log_level = DLT_LOG_QUIET; break;
        case O_VERBOSE: c.log_level = DLT_LOG_VERBOSE; break;
        case O_GRAPHS: c.cuda_graphs = 1; break;
        case O_DETERMINISTIC: c.backend.deterministic = 1; break;
        case O_STEM_PAD:
            if (!strcmp(optarg, "auto") || !strcmp(optarg, "on") || !strcmp(optarg, "off"))
                c.backend.stem_pad = !strcmp(optarg, "auto") ? -1 : !strcmp(optarg, "on");
            else {
                fprintf(stderr, "dltrain: --stem-pad %s: auto, on or off\n", optarg);
                return 2;
            }
            break;
        case O_LOSS_SCALE: REAL(1, 16777216, c.loss_scale = v); break;
        case O_LS_WINDOW: WHOLE(1, 1000000000, c.loss_scale_window = (int)w); break;
#undef REAL
#undef WHOLE
        case O_SCHEDULE:
            if (!strcmp(optarg, "step") || !strcmp(optarg, "cosine"))
                c.cosine = !strcmp(optarg, "cosine");
            else {
                fprintf(stderr, "dltrain: --schedule %s: step or cosine\n", optarg);
                return 2;
            }
            break;
        case O_MILESTONES: {
            char *s = optarg, *end;
            c.nmilestones = 0;
            while (*s) {
                long m;
                errno = 0;
                m = strtol(s, &end, 10);
                if (end == s || errno || m < 0 || m > 100000 || (*end && *end != ',') || c.nmilestones == 8) {
                    fprintf(stderr, "dltrain: --milestones %s: expected up to 8 epochs in [0, 100000], separated by "
                            "commas (e.g. 30,60,80)\n", optarg);
                    return 2;
                }
                if (c.nmilestones > 0 && m <= c.milestones[c.nmilestones - 1]) {
                    fprintf(stderr, "dltrain: --milestones %s: the epochs must strictly increase (%d then %ld)\n",
                            optarg, c.milestones[c.nmilestones - 1], m);
                    return 2;
                }
                c.milestones[c.nmilestones++] = (int)m;
                s = *end == ',' ? end + 1 : end;
            }
            break;
        }
        case O_DECAY_BN: c.decay_bn_bias = 1; break;
        case O_NO_ZERO_INIT: c.zero_init_residual = 0; break;
        case O_SYNTH: break;
        case O_NOISE: c.learnable = 0; break;
        case O_DATA: c.data = optarg; break;
        case O_VAL_DATA: c.val_data = optarg; break;
        case O_VAL_LABELS: c.val_labels = optarg; break;
        case O_STRICT: c.strict = 1; break;
        case O_METRICS: c.metrics_path = optarg; break;
        case O_TENSORBOARD: c.tensorboard_dir = optarg; break;
        case O_CKPT_DIR: c.checkpoint_dir = optarg; break;
        case O_RESUME: c.resume = optarg; break;
        case O_RESUME_OVERRIDE:
            if (dlt_resume_override_check(optarg, err, sizeof(err)) != 0) {
                fprintf(stderr, "dltrain: %s\n", err);
                return 2;
            }
            c.resume_override = optarg;
            break;
        case O_BASELINE: c.baseline = optarg; break;
        case O_COMM:
            if (strcmp(optarg, "auto") && strcmp(optarg, "single") && strcmp(optarg, "mpi") && strcmp(optarg, "nccl")) {
                fprintf(stderr, "dltrain: --comm %s: auto, single, mpi or nccl\n", optarg);
                return 2;
            }
            comm_kind = optarg;
            break;
        case O_INFERENCE: b.inference = 1; break;
        case O_FEED: b.feed = 1; break;
        case O_JSON: b.json = 1; break;
        case O_CHECKPOINT: checkpoint = optarg; break;
        case O_VERIFY: verify = 1; break;
        case O_PREFLIGHT:
            if (optarg && strcmp(optarg, "quick") && strcmp(optarg, "full")) {
                fprintf(stderr, "dltrain: --preflight=%s: quick or full\n", optarg);
                return 2;
            }
            preflight = optarg && !strcmp(optarg, "full") ? 2 : 1;
            break;
        case O_HELP:
        case 'h': _usage(stdout, cmd); return 0;
        default: _usage(stderr, cmd); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "dltrain %s: unexpected argument '%s'\n", cmd, argv[optind]);
        return 2;
    }
    if (!strcmp(cmd, "eval") && !checkpoint) {
        fprintf(stderr, "dltrain eval: --checkpoint PATH is required\n");
        return 2;
    }
    if (verify && strcmp(cmd, "eval")) {
        fprintf(stderr, "dltrain %s: --verify belongs to eval and info (dltrain eval --checkpoint FILE --verify)\n",
                cmd);
        return 2;
    }
    if (c.tensorboard_dir && strcmp(cmd, "train")) {
        fprintf(stderr, "dltrain %s: --tensorboard belongs to train (the scalars of a training run)\n", cmd);
        return 2;
    }
    if (verify) /* one file pair, checked by this process: nothing to launch */
        return dlt_verify_checkpoint_cmd(checkpoint);
    if (!strcmp(cmd, "eval")) {
        /* The model as the checkpoint's state file records it, unless the options say (and agree);
         * a file without one (a torchvision export) needs --arch and friends as before. */
        dlt_checkpoint_info info;
        given.classes = c.classes_given;
        if (dlt_checkpoint_verify(checkpoint, &info, err, sizeof(err)) == 0 && info.verified) {
            if (dlt_model_adopt_config(&c.model, &given, info.config, err, sizeof(err)) != 0) {
                fprintf(stderr, "dltrain: %s: %s\n", checkpoint, err);
                return 2;
            }
            c.classes_given = 1;
        }
    }
    if (c.resume_override && !c.resume) {
        fprintf(stderr, "dltrain %s: --resume-override %s applies only with --resume\n", cmd, c.resume_override);
        return 2;
    }
    if (c.resume && !*c.resume) {
        fprintf(stderr, "dltrain: --resume '': expected a checkpoint file, auto or auto-or-fresh\n");
        return 2;
    }
    if ((rc = _check_usage(cmd, &c, seen, comm_kind)) != 0)
        return rc;
    _unmute(muted);
    {
        dlt_comm_request req = {comm_kind, dlt_backend_is_gpu(&c.backend), c.backend.device};
        char problem[1024];
        _check_local(cmd, &c, checkpoint, problem, sizeof(problem));
        if ((rc = dlt_cli_launch(&req, &c.backend, timeout, problem[0] ? problem : NULL, &px, &comm, err,
                                 sizeof(err))) != 0)
            return rc;
    }
    if (preflight && !strcmp(cmd, "train") && (rc = dlt_check_preflight(preflight == 2, &c.backend, px, comm)) != 0) {
        dlt_cli_finish(px, comm); /* --preflight: every rank stops alike, before the first step */
        return rc;
    }
    rc = _preflight(cmd, &c, comm, checkpoint, resume_path, sizeof(resume_path));
    if (rc == 0 && !strcmp(cmd, "train"))
        rc = dlt_train_run(&c, comm, err, sizeof(err));
    else if (rc == 0 && !strcmp(cmd, "eval"))
        rc = dlt_eval_run(&c, comm, checkpoint, err, sizeof(err));
    else if (rc == 0)
        rc = dlt_bench_run(&c, &b, comm, err, sizeof(err));
    /* One error channel: whatever failed below wrote here; said once, with the rank. */
    if (rc < 0 && err[0]) /* empty: another rank said it for all */
        fprintf(stderr, "dltrain: rank %d: %s\n", comm->rank, err);
    dlt_cli_finish(px, comm);
    return rc < 0 ? 1 : rc;
}
