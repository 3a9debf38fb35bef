/* SPDX-License-Identifier: Apache-2.0 */
/* opt_table: the options of every dltrain command, each with its usage beside what it sets. */
#include "config.h"

#include "trainer/cli/opt_table.h"

#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/exit_status.h"
#include "common/status.h"
#include "trainer/cli/parse.h"
#include "trainer/train/checkpointing.h"

#define F(m) offsetof(dlt_cli_opts, m)

/* ---- setters: the generic ones write the entry's field; the others say what they set. Numbers and
 * choices arrive checked (a->whole, a->real, a->whole as the choice's position). */

#define AT(type) (*(type *)((char *)o + opt->field))
#define UNUSED_SETTER_ARGS (void)opt, (void)o, (void)a, (void)err

static int _set_int(const dlt_opt *opt, dlt_cli_opts *o, const dlt_opt_arg *a, dlt_err *err)
{
    UNUSED_SETTER_ARGS;
    AT(int) = opt->kind == DLT_ARG_NONE ? (int)opt->lo : (int)a->whole;
    return 0;
}

static int _set_i64(const dlt_opt *opt, dlt_cli_opts *o, const dlt_opt_arg *a, dlt_err *err)
{
    UNUSED_SETTER_ARGS;
    AT(int64_t) = a->whole;
    return 0;
}

static int _set_real(const dlt_opt *opt, dlt_cli_opts *o, const dlt_opt_arg *a, dlt_err *err)
{
    UNUSED_SETTER_ARGS;
    AT(double) = a->real;
    return 0;
}

static int _set_text(const dlt_opt *opt, dlt_cli_opts *o, const dlt_opt_arg *a, dlt_err *err)
{
    UNUSED_SETTER_ARGS;
    AT(const char *) = a->text;
    return 0;
}

/* --synthetic: generated images are what a run without --data reads anyway; the switch sets
 * nothing, and the command refuses it with --data (it reads seen[]) rather than ignore one. */
static int _set_nothing(const dlt_opt *opt, dlt_cli_opts *o, const dlt_opt_arg *a, dlt_err *err)
{
    UNUSED_SETTER_ARGS;
    return 0;
}

static int _set_arch(const dlt_opt *opt, dlt_cli_opts *o, const dlt_opt_arg *a, dlt_err *err)
{
    UNUSED_SETTER_ARGS;
    o->given.arch = 1;
    return dlt_model_parse_arch(a->text, &o->train.model, err);
}

static int _set_width(const dlt_opt *opt, dlt_cli_opts *o, const dlt_opt_arg *a, dlt_err *err)
{
    UNUSED_SETTER_ARGS;
    o->train.model.width = (float)a->real;
    o->given.width = 1;
    return 0;
}

static int _set_image(const dlt_opt *opt, dlt_cli_opts *o, const dlt_opt_arg *a, dlt_err *err)
{
    UNUSED_SETTER_ARGS;
    o->train.model.image = (int)a->whole;
    o->given.image = 1;
    return 0;
}

/* Given classes must agree with the data's (and a checkpoint's) count: remember it was given. */
static int _set_classes(const dlt_opt *opt, dlt_cli_opts *o, const dlt_opt_arg *a, dlt_err *err)
{
    UNUSED_SETTER_ARGS;
    o->train.model.classes = (int)a->whole;
    o->train.classes_given = o->given.classes = 1;
    return 0;
}

static int _set_seed(const dlt_opt *opt, dlt_cli_opts *o, const dlt_opt_arg *a, dlt_err *err)
{
    UNUSED_SETTER_ARGS;
    o->train.seed = (uint64_t)a->whole;
    return 0;
}

/* --precision, and --tf32 (its short form). */
static int _set_precision(const dlt_opt *opt, dlt_cli_opts *o, const dlt_opt_arg *a, dlt_err *err)
{
    UNUSED_SETTER_ARGS;
    o->train.backend.precision = (dlt_precision)dlt_precision_parse(opt->kind == DLT_ARG_NONE ? "tf32" : a->text);
    return 0;
}

static int _set_log_level(const dlt_opt *opt, dlt_cli_opts *o, const dlt_opt_arg *a, dlt_err *err)
{
    UNUSED_SETTER_ARGS;
    o->train.log_level = (dlt_log_level)(int)opt->lo;
    return 0;
}

static int _set_stem_pad(const dlt_opt *opt, dlt_cli_opts *o, const dlt_opt_arg *a, dlt_err *err)
{
    UNUSED_SETTER_ARGS;
    o->train.backend.stem_pad = a->whole == 0 ? -1 : a->whole == 1; /* auto|on|off */
    return 0;
}

static int _set_wgrad_fp32(const dlt_opt *opt, dlt_cli_opts *o, const dlt_opt_arg *a, dlt_err *err)
{
    UNUSED_SETTER_ARGS;
    o->train.backend.wgrad_fp32 = a->whole == 0 ? -1 : a->whole == 1; /* auto|on|off */
    return 0;
}

static int _set_fuse_bn(const dlt_opt *opt, dlt_cli_opts *o, const dlt_opt_arg *a, dlt_err *err)
{
    UNUSED_SETTER_ARGS;
    o->train.backend.fuse_bn = a->whole == 0; /* on|off */
    return 0;
}

static int _set_augment(const dlt_opt *opt, dlt_cli_opts *o, const dlt_opt_arg *a, dlt_err *err)
{
    UNUSED_SETTER_ARGS;
    o->train.augment = a->whole == 0; /* standard|none */
    return 0;
}

/* The watchdog counts whole seconds: 0.2 would be "limit 0 s", which means off. */
static int _set_stall(const dlt_opt *opt, dlt_cli_opts *o, const dlt_opt_arg *a, dlt_err *err)
{
    if (a->real > 0 && a->real < 1)
        return dlt_fail(err, -EINVAL, "--stall-timeout %s: 0 (off) or at least 1 second", a->text);
    return _set_real(opt, o, a, err);
}

static int _set_milestones(const dlt_opt *opt, dlt_cli_opts *o, const dlt_opt_arg *a, dlt_err *err)
{
    dlt_train_config *c = &o->train;
    const char *s = a->text;
    char *end;
    (void)opt;
    c->nmilestones = 0;
    while (*s) {
        long m;
        errno = 0;
        m = strtol(s, &end, 10);
        if (end == s || errno || m < 0 || m > 100000 || (*end && *end != ',') || c->nmilestones == 8)
            return dlt_fail(err, -EINVAL,
                            "--milestones %s: expected up to 8 epochs in [0, 100000], separated "
                            "by commas (e.g. 30,60,80)",
                            a->text);
        if (c->nmilestones > 0 && m <= c->milestones[c->nmilestones - 1])
            return dlt_fail(err, -EINVAL, "--milestones %s: the epochs must strictly increase (%d then %ld)", a->text,
                            c->milestones[c->nmilestones - 1], m);
        c->milestones[c->nmilestones++] = (int)m;
        s = *end == ',' ? end + 1 : end;
    }
    return 0;
}

static int _set_resume_override(const dlt_opt *opt, dlt_cli_opts *o, const dlt_opt_arg *a, dlt_err *err)
{
    (void)opt;
    if (dlt_resume_override_check(a->text, err) != 0)
        return -EINVAL;
    o->train.resume_override = a->text;
    return 0;
}

/* A byte count: a whole number from 8 with an optional K, M or G (binary) suffix, up to 4G. */
static int _set_bytes(const dlt_opt *opt, dlt_cli_opts *o, const dlt_opt_arg *a, dlt_err *err)
{
    char num[32], name[64];
    size_t n = strlen(a->text), shift = 0;
    int64_t w;
    dlt_err number;
    if (n > 0 && n < sizeof(num) && strchr("KkMmGg", a->text[n - 1])) {
        shift = strchr("Kk", a->text[n - 1]) ? 10 : strchr("Mm", a->text[n - 1]) ? 20 : 30;
        n--;
    }
    snprintf(name, sizeof(name), "--%s", opt->name);
    snprintf(num, sizeof(num), "%.*s", (int)(n < sizeof(num) ? n : sizeof(num) - 1), a->text);
    if (dlt_parse_whole(name, num, shift ? 1 : 8, (int64_t)4 << (30 - shift), &w, dlt_err_fresh(&number)) != 0)
        return dlt_fail(err, -EINVAL, /* these words, not the number parser's */
                        "%s %s: expected a byte count from 8 to 4G (a whole number, optionally with K, M or G)", name,
                        a->text);
    AT(size_t) = (size_t)w << shift;
    return 0;
}

/* --preflight (quick) or --preflight=quick|full. */
static int _set_preflight(const dlt_opt *opt, dlt_cli_opts *o, const dlt_opt_arg *a, dlt_err *err)
{
    UNUSED_SETTER_ARGS;
    o->preflight = (int)a->whole + 1;
    return 0;
}

/* ---- the table. Order matters twice: a warning lists the unread options in this order, and
 * --help prints each section's options in it. */

#define RUNS DLT_CMD_RUNS
#define TRAIN DLT_CMD_TRAIN
#define EVAL DLT_CMD_EVAL
#define BENCH DLT_CMD_BENCH
#define CUDA DLT_OPT_CUDA_ONLY
#define NONE(n, fld, val, setter, cmds_, flags_, sec, txt)                                                             \
    {                                                                                                                  \
        n, DLT_ARG_NONE, NULL, val, val, NULL, fld, setter, cmds_, flags_, sec, txt                                    \
    }
#define WHOLE(n, a, l, h, fld, setter, cmds_, flags_, sec, txt)                                                        \
    {                                                                                                                  \
        n, DLT_ARG_WHOLE, a, l, h, NULL, fld, setter, cmds_, flags_, sec, txt                                          \
    }
#define REAL(n, a, l, h, fld, setter, cmds_, flags_, sec, txt)                                                         \
    {                                                                                                                  \
        n, DLT_ARG_REAL, a, l, h, NULL, fld, setter, cmds_, flags_, sec, txt                                           \
    }
#define CHOICE(n, a, ch, fld, setter, cmds_, flags_, sec, txt)                                                         \
    {                                                                                                                  \
        n, DLT_ARG_CHOICE, a, 0, 0, ch, fld, setter, cmds_, flags_, sec, txt                                           \
    }
#define TEXT(n, a, fld, setter, cmds_, flags_, sec, txt)                                                               \
    {                                                                                                                  \
        n, DLT_ARG_TEXT, a, 0, 0, NULL, fld, setter, cmds_, flags_, sec, txt                                           \
    }

static const char S_MODEL[] = "model", S_COMPUTE[] = "compute", S_DATA[] = "data", S_TRAIN[] = "training (train)",
                  S_EVAL[] = "evaluation (eval)", S_BENCH[] = "benchmark (bench)", S_RANKS[] = "ranks",
                  S_OUT[] = "output";

static const dlt_opt g_table[] = {
    TEXT("arch", "NAME", 0, _set_arch, RUNS | DLT_CMD_INFO, 0, S_MODEL,
         "resnet18|34|50|101|152, -v1 suffix for stride-on-1x1 (default resnet50)"),
    REAL("width", "F", 0.01, 4, 0, _set_width, RUNS | DLT_CMD_INFO, 0, S_MODEL,
         "channel multiplier for small models (default 1.0)"),
    WHOLE("image-size", "N", 32, 1024, 0, _set_image, RUNS | DLT_CMD_INFO, 0, S_MODEL,
          "input height and width (default 224)"),
    WHOLE("classes", "N", 2, 100000, 0, _set_classes, RUNS | DLT_CMD_INFO, 0, S_MODEL, "output classes (default 1000)"),
    WHOLE("batch", "N", 1, 65536, F(train.model.batch), _set_int, RUNS, 0, S_MODEL,
          "images per rank per step (default 32)"),
    CHOICE("precision", "P", "fp32|tf32|fp16|bf16", 0, _set_precision, RUNS, 0, S_COMPUTE,
           "fp32 | tf32 | fp16 | bf16 (default fp32). CPU: fp32, bf16 (convolutions,\n"
           "AVX512-BF16/AMX). CUDA: all four; fp16/bf16 are mixed precision with\n"
           "fp32 master weights; tf32 and bf16 need Ampere or newer"),
    WHOLE("epochs", "N", 1, 100000, F(train.epochs), _set_i64, TRAIN, 0, S_TRAIN, "(default 90)"),
    WHOLE("steps", "N", 1, 1000000000000LL, F(train.max_steps), _set_i64, TRAIN, 0, S_TRAIN,
          "stop after N steps in total"),
    REAL("lr", "F", 0, 1e9, F(train.base_lr), _set_real, TRAIN, 0, S_TRAIN,
         "base LR per 256 images of global batch (default 0.1)"),
    REAL("momentum", "F", 0, 1, F(train.momentum), _set_real, TRAIN, 0, S_TRAIN, "(default 0.9)"),
    REAL("wd", "F", 0, 1, F(train.weight_decay), _set_real, TRAIN, 0, S_TRAIN, "weight decay (default 1e-4)"),
    REAL("label-smoothing", "F", 0, 0.99, F(train.label_smoothing), _set_real, TRAIN, 0, S_TRAIN, "(default 0.1)"),
    REAL("warmup-epochs", "F", 0, 1000, F(train.warmup_epochs), _set_real, TRAIN, 0, S_TRAIN,
         "linear warm-up epochs (default 5)"),
    CHOICE("schedule", "step|cosine", "step|cosine", F(train.cosine), _set_int, TRAIN, 0, S_TRAIN,
           "learning-rate schedule (default step)"),
    TEXT("milestones", "A,B,C", 0, _set_milestones, TRAIN, 0, S_TRAIN,
         "epochs where the step schedule divides the LR by 10 (default 30,60,80)"),
    NONE("decay-bn-bias", F(train.decay_bn_bias), 1, _set_int, TRAIN, 0, S_TRAIN,
         "also decay BN parameters and biases (default: not)"),
    NONE("no-zero-init", F(train.zero_init_residual), 0, _set_int, TRAIN, 0, S_TRAIN,
         "keep the last BN gamma of each block at 1"),
    WHOLE("seed", "N", 0, 9223372036854775807.0, 0, _set_seed, RUNS, 0, S_TRAIN, "(default 1)"),
    NONE("synthetic", 0, 1, _set_nothing, RUNS, 0, S_DATA,
         "generated learnable images (the default without --data; refused with it)"),
    WHOLE("synthetic-size", "N", 1, 10000000000LL, F(train.synthetic_size), _set_i64, TRAIN, 0, S_DATA,
          "images per epoch (default 1281167, as ILSVRC-2012 train)"),
    NONE("noise", F(train.learnable), 0, _set_int, RUNS, 0, S_DATA,
         "random images (throughput only; nothing to learn)"),
    TEXT("data", "PATH", F(train.data), _set_text, RUNS, 0, S_DATA,
         "ImageFolder root (PATH/train and PATH/val, or PATH/CLASS/*.JPEG) or a\n"
         "RecordIO file (PATH.rec + PATH.idx, as im2rec writes)"),
    TEXT("val-data", "PATH", F(train.val_data), _set_text, TRAIN | EVAL, 0, S_DATA,
         "validation images (default PATH/val); eval without --data scores PATH"),
    TEXT("val-labels", "FILE", F(train.val_labels), _set_text, TRAIN | EVAL, 0, S_DATA,
         "\"FILENAME CLASS\" lines for a flat validation folder"),
    WHOLE("workers", "N", 0, 1024, F(train.workers), _set_int, RUNS, 0, S_DATA,
          "decode threads per rank (default: the task's CPUs minus one)"),
    NONE("strict", F(train.strict), 1, _set_int, RUNS, 0, S_DATA,
         "stop at the first unreadable image instead of skipping it"),
    REAL("max-bad-share", "F", 0, 1, F(train.max_bad_share), _set_real, RUNS, 0, S_DATA,
         "training (and bench --feed) stops when more than this share of the\n"
         "data set's images proved unreadable (default 0.01; 1: never)"),
    WHOLE("log-every", "N", 0, 1000000000, F(train.log_every), _set_int, TRAIN, 0, S_OUT,
          "steps between log lines (default 10)"),
    TEXT("metrics", "FILE", F(train.metrics_path), _set_text, TRAIN, 0, S_OUT,
         "append one JSON object per log line (rank 0)"),
    CHOICE("preflight", "quick|full", "quick|full", 0, _set_preflight, TRAIN, DLT_OPT_OPTIONAL_ARG, S_TRAIN,
           "health check before the first step (dltrain check; quick: a GEMM and\n"
           "all-reduces up to 1 MiB): a wrong or slow rank stops every rank, exit 3 or 4"),
    TEXT("tensorboard", "DIR", F(train.tensorboard_dir), _set_text, TRAIN, 0, S_OUT,
         "TensorBoard event file in DIR (rank 0): the metrics' scalars"),
    TEXT("checkpoint-dir", "DIR", F(train.checkpoint_dir), _set_text, TRAIN, 0, S_TRAIN,
         "checkpoints (rank 0): ckpt-STEP.safetensors + .state.safetensors"),
    WHOLE("checkpoint-every", "N", 0, 1000000000000LL, F(train.checkpoint_every), _set_i64, TRAIN, 0, S_TRAIN,
          "steps between checkpoints (default: end and on SIGTERM/SIGUSR1/SIGINT)"),
    WHOLE("keep-checkpoints", "N", 0, 1000000000, F(train.keep_checkpoints), _set_int, TRAIN, 0, S_TRAIN,
          "keep only the newest N checkpoints in --checkpoint-dir (default 0: all)"),
    TEXT("resume", "PATH|auto|auto-or-fresh", F(train.resume), _set_text, TRAIN, 0, S_TRAIN,
         "continue from a checkpoint. auto: the newest valid one in\n"
         "--checkpoint-dir; none there: from scratch; some there but none valid:\n"
         "stop and list them. auto-or-fresh: start from scratch then"),
    TEXT("resume-override", "K,..", 0, _set_resume_override, TRAIN, 0, S_TRAIN,
         "settings that may differ from the checkpoint's (batch, ranks, lr, seed,\n"
         "schedule, ...); any other difference refuses the resume"),
    REAL("checkpoint-minutes", "M", 0, 1e6, F(train.checkpoint_minutes), _set_real, TRAIN, 0, S_TRAIN,
         "also checkpoint when M minutes passed since the last one"),
    WHOLE("max-bad-steps", "K", 0, 1000000, F(train.max_bad_steps), _set_int, TRAIN, 0, S_TRAIN,
          "skip updates with a non-finite loss, stop after K in a row (default 5)"),
    REAL("stall-timeout", "S", 0, 1e7, F(train.stall_timeout), _set_stall, TRAIN, 0, S_TRAIN,
         "abort when one phase (data, compute, all-reduce, checkpoint) takes\n"
         "longer than S seconds (default 900, 0 = off, else at least 1)"),
    TEXT("baseline", "FILE", F(train.baseline), _set_text, TRAIN, 0, S_OUT,
         "metrics of a smaller run: the summary adds scaling efficiency"),
    WHOLE("eval-size", "N", 1, 10000000000LL, F(train.eval_size), _set_i64, TRAIN | EVAL, 0, S_EVAL,
          "synthetic validation images (default 50000)"),
    WHOLE("check-every", "N", 0, 1000000000, F(train.check_every), _set_int, TRAIN, 0, S_TRAIN,
          "steps between cross-rank weight checks (default 100)"),
    CHOICE("comm", "auto|single|mpi|nccl", "auto|single|mpi|nccl", F(comm), _set_text, RUNS, 0, S_RANKS,
           "communicator between ranks (default auto: NCCL on GPUs when there is\n"
           "more than one rank, else MPI; single for one rank)"),
    REAL("timeout", "S", 1, 86400, F(timeout), _set_real, RUNS | DLT_CMD_ENV | DLT_CMD_CHECK, 0, S_RANKS,
         "bootstrap timeout (default 300 or $DLTPMIX_TIMEOUT)"),
    WHOLE("warmup", "N", 0, 1000000, F(bench.warmup), _set_int, BENCH, 0, S_BENCH, "untimed steps (default 3)"),
    WHOLE("iters", "N", 1, 1000000, F(bench.iters), _set_int, BENCH, 0, S_BENCH, "timed steps (default 10)"),
    NONE("inference", F(bench.inference), 1, _set_int, BENCH, 0, S_BENCH, "forward only"),
    NONE("feed", F(bench.feed), 1, _set_int, BENCH, 0, S_BENCH,
         "a new batch every step through the training input path (decoded\n"
         "from --data, or generated), not one batch loaded once"),
    NONE("input-only", F(bench.input_only), 1, _set_int, BENCH, 0, S_BENCH,
         "the training input path alone (read, decode, crop, flip into the\n"
         "batch ring, --workers per rank): images/s and the GPUs that feeds"),
    REAL("per-gpu", "N", 1, 1e6, F(bench.per_gpu), _set_real, BENCH, 0, S_BENCH,
         "images/s one GPU trains at, for --input-only's \"feeds N GPUs\"\n"
         "(default: ResNet-50 224x224 on an H200 as measured, 7138 fp16,\n"
         "6588 bf16, scaled by FLOPs for other models and sizes; none for\n"
         "fp32 and tf32)"),
    NONE("profile", F(bench.profile), 1, _set_int, BENCH, 0, S_BENCH,
         "after the timed steps, as many again with each backend call timed\n"
         "(CUDA events on a GPU, the host clock on the CPU): the share of\n"
         "convolutions, batch norm, element-wise, SGD, ... in a step; not\n"
         "with --cuda-graphs"),
    NONE("json", F(bench.json), 1, _set_int, BENCH, 0, S_BENCH, "one JSON line"),
    TEXT("checkpoint", "PATH", F(checkpoint), _set_text, EVAL | DLT_CMD_INFO, 0, S_EVAL,
         "model file (checked against its state file, if beside it)"),
    NONE("verify", F(verify), 1, _set_int, EVAL | DLT_CMD_INFO, 0, S_EVAL,
         "only check --checkpoint against its state file (size, CRC), print, exit"),
    CHOICE("backend", "B", "auto|cpu|cuda", F(train.backend.kind), _set_text, RUNS, 0, S_COMPUTE,
           "auto | cpu | cuda (default auto: cuda when built in and a GPU is visible)"),
    WHOLE("device", "N", 0, 1024, F(train.backend.device), _set_int, RUNS, CUDA, S_COMPUTE,
          "CUDA device among the visible ones (default: the one --dl-train bound\n"
          "the task to, else the local rank modulo the visible GPUs)"),
    NONE("tf32", 0, 0, _set_precision, RUNS, 0, S_COMPUTE, "same as --precision tf32"),
    REAL("bucket-mib", "M", 0.0625, 4096, F(train.reduce.bucket_mib), _set_real, TRAIN | BENCH, 0, S_COMPUTE,
         "largest gradient all-reduce bucket (default 25)"),
    REAL("bottom-bucket-mib", "M", 0.0625, 4096, F(train.reduce.bottom_mib), _set_real, TRAIN | BENCH, 0, S_COMPUTE,
         "the bottom bucket, reduced after backward (default 1; at most --bucket-mib)"),
    NONE("allreduce-lowp", F(train.reduce.lowp), 1, _set_int, TRAIN | BENCH, CUDA, S_COMPUTE,
         "CUDA fp16/bf16: all-reduce gradients in that type (default fp32)"),
    REAL("loss-scale", "S", 1, 16777216, F(train.loss_scale), _set_real, TRAIN | BENCH, CUDA, S_COMPUTE,
         "fp16: initial dynamic loss scale (default 65536)"),
    WHOLE("loss-scale-window", "N", 1, 1000000000, F(train.loss_scale_window), _set_int, TRAIN | BENCH, CUDA, S_COMPUTE,
          "fp16: clean steps before the scale doubles (default 2000)"),
    NONE("cuda-graphs", F(train.cuda_graphs), 1, _set_int, TRAIN | BENCH, CUDA, S_COMPUTE,
         "CUDA: record one training step as a CUDA graph and replay it"),
    NONE("deterministic", F(train.backend.deterministic), 1, _set_int, RUNS, CUDA, S_COMPUTE,
         "CUDA: only cuDNN algorithms that repeat bit for bit"),
    TEXT("cudnn-cache", "FILE", F(train.backend.algo_cache), _set_text, RUNS, CUDA, S_COMPUTE,
         "CUDA: keep the cuDNN algorithm choices in FILE across runs (each\n"
         "shape searched once per GPU model, cuDNN version and precision)"),
    CHOICE("stem-pad", "auto|on|off", "auto|on|off", 0, _set_stem_pad, RUNS, CUDA, S_COMPUTE,
           "CUDA: pad the 3-channel input to 4 for tensor cores (auto: all but fp32)"),
    CHOICE("wgrad-fp32", "auto|on|off", "auto|on|off", 0, _set_wgrad_fp32, RUNS, CUDA, S_COMPUTE,
           "CUDA fp16/bf16: filter gradients written in fp32 by cuDNN's graph\n"
           "API, not in fp16/bf16 and cast (auto: where faster at planning)"),
    CHOICE("fuse-bn", "on|off", "on|off", 0, _set_fuse_bn, RUNS, CUDA, S_COMPUTE,
           "CUDA fp16/bf16: each convolution writes its batch norm's statistics\n"
           "and applies the batch norm before it (cuDNN's graph API; default off)"),
    WHOLE("eval-every", "N", 0, 1000000, F(train.eval_every), _set_int, TRAIN, 0, S_TRAIN,
          "validate every N epochs on ROOT/val or --val-data (default 1 when\n"
          "there are validation images, 0 = off; generated data: 0)"),
    TEXT("init", "FILE", F(train.init), _set_text, TRAIN, 0, S_TRAIN,
         "start from these weights (torchvision names; another class count:\n"
         "fc re-initialised); step 0, no optimizer state (not --resume)"),
    CHOICE("augment", "standard|none", "standard|none", 0, _set_augment, TRAIN | BENCH, 0, S_TRAIN,
           "training crops and flips, or the evaluation transform (default\n"
           "standard; none: for comparisons and debugging)"),
    TEXT("dump-batch", "FILE", F(train.dump_batch), _set_text, TRAIN, 0, S_OUT,
         "debugging: rank 0 writes its first batch (uint8 NHWC + int32 labels)"),
    REAL("target-top1", "F", 0, 1, F(train.target_top1), _set_real, TRAIN, 0, S_TRAIN,
         "stop at the first validation with top-1 >= F (0..1), checkpoint it"),
    NONE("quiet", 0, DLT_LOG_QUIET, _set_log_level, RUNS, 0, S_OUT,
         "errors, warnings and results only (also DLT_LOG=quiet)"),
    NONE("verbose", 0, DLT_LOG_VERBOSE, _set_log_level, RUNS, 0, S_OUT, "also setup details (also DLT_LOG=verbose)"),
    /* info */
    NONE("layers", F(layers), 1, _set_int, DLT_CMD_INFO, 0, NULL, "every layer with its output shape"),
    NONE("state-dict", F(state_dict), 1, _set_int, DLT_CMD_INFO, 0, NULL,
         "the checkpoint's tensor names and shapes (torchvision's)"),
    /* data pack */
    WHOLE("resize", "SHORT_SIDE", 16, 4096, F(resize), _set_int, DLT_CMD_DATA, 0, NULL,
          "re-encode each image with its shorter side at SHORT_SIDE pixels\n"
          "(16..4096; default: keep the original bytes)"),
    WHOLE("quality", "Q", 1, 100, F(quality), _set_int, DLT_CMD_DATA, 0, NULL,
          "JPEG quality of re-encoded images (1..100, default 90)"),
    TEXT("labels", "FILE", F(labels), _set_text, DLT_CMD_DATA, 0, NULL,
         "SRC_DIR is a flat folder; FILE has \"FILENAME CLASS\" lines"),
    NONE("force", F(force), 1, _set_int, DLT_CMD_DATA, 0, NULL,
         "replace an existing OUT.rec/.idx/.classes (a job reading them keeps\n"
         "the old files it has open)"),
    NONE("quiet", F(quiet), 1, _set_int, DLT_CMD_DATA, 0, NULL,
         "no progress (also DLT_LOG=quiet). Progress: on a terminal one line\n"
         "updated in place, elsewhere a line every DLT_PROGRESS_SECONDS (60)"),
    /* env: NCCL needs the CUDA backend, which env does not open */
    CHOICE("comm", "auto|single|mpi", "auto|single|mpi", F(comm), _set_text, DLT_CMD_ENV, 0, NULL,
           "host communicator to check (default auto)"),
    /* check (dltrain check; trainer/check/check.h) */
    CHOICE("backend", "auto|cpu|cuda", "auto|cpu|cuda", F(train.backend.kind), _set_text, DLT_CMD_CHECK, 0, NULL,
           "the device the GEMM runs on (default auto, as dltrain train)"),
    CHOICE("precision", "P", "fp32|tf32|fp16|bf16", 0, _set_precision, DLT_CMD_CHECK, 0, NULL,
           "fp32 | tf32 | fp16 | bf16: the GEMM's (GPU; the CPU checks fp32)"),
    WHOLE("device", "N", 0, 1024, F(train.backend.device), _set_int, DLT_CMD_CHECK, 0, NULL,
          "CUDA device among the visible ones (default: as dltrain train)"),
    WHOLE("gemm-size", "N", 16, 32768, F(check.gemm_n), _set_int, DLT_CMD_CHECK, 0, NULL,
          "square GEMM size (default 8192 on a GPU, 1024 on a CPU)"),
    REAL("gemm-seconds", "S", 0, 600, F(check.gemm_seconds), _set_real, DLT_CMD_CHECK, 0, NULL,
         "time spent in timed GEMMs per rank (default 0.5)"),
    REAL("min-fraction", "F", 0, 1, F(check.fraction), _set_real, DLT_CMD_CHECK, 0, NULL,
         "a rank below F x the median TFLOP/s of its device model is named, and\n"
         "a node or node pair below F x the median busbw (default 0.85)"),
    REAL("min-tflops", "T", 0, 1e6, F(check.min_tflops), _set_real, DLT_CMD_CHECK, 0, NULL,
         "site threshold: a rank below T TFLOP/s is named"),
    REAL("min-busbw", "G", 0, 1e6, F(check.min_busbw), _set_real, DLT_CMD_CHECK, 0, NULL,
         "site threshold: busbw below G GB/s at the largest size is named"),
    TEXT("min-bytes", "B", F(check.min_bytes), _set_bytes, DLT_CMD_CHECK, 0, NULL,
         "the sweep's smallest size (default 8; K, M, G suffixes)"),
    TEXT("max-bytes", "B", F(check.max_bytes), _set_bytes, DLT_CMD_CHECK, 0, NULL,
         "the sweep's largest size (default 256M, less with more than 8 ranks\n"
         "on a node: 2G over the ranks of the busiest node)"),
    REAL("seconds", "S", 0, 86400, F(check.budget_s), _set_real, DLT_CMD_CHECK, 0, NULL,
         "time budget of the whole check (default 60, 0 = none): the sweep\n"
         "stops before a size that would not end in time, isolation runs at a\n"
         "size that fits what is left"),
    WHOLE("iters", "N", 1, 1000, F(check.iters), _set_int, DLT_CMD_CHECK, 0, NULL,
          "at most N timed all-reduces per size (default 20, fewer from 4 MiB)"),
    NONE("no-isolate", F(check.isolate), 0, _set_int, DLT_CMD_CHECK, 0, NULL, "only the sweep over all ranks"),
    NONE("pairs", F(check.pairs), 1, _set_int, DLT_CMD_CHECK, 0, NULL,
         "always test node pairs (default: when the cross-node figure is low)"),
    NONE("json", F(check.json), 1, _set_int, DLT_CMD_CHECK, 0, NULL, "one JSON object instead of the table"),
    CHOICE("comm", "auto|single|mpi|nccl", "auto|single|mpi|nccl", F(comm), _set_text, DLT_CMD_CHECK, 0, NULL,
           "the communicator to check (default auto, as dltrain train)"),
    NONE("help", 0, 0, NULL, RUNS | DLT_CMD_INFO | DLT_CMD_DATA | DLT_CMD_ENV | DLT_CMD_CHECK, 0, S_OUT, "this text"),
};

const dlt_opt *dlt_opt_table(size_t *count)
{
    *count = sizeof(g_table) / sizeof(g_table[0]);
    return g_table;
}

/* ---- commands */

static const struct {
    const char *name;
    unsigned bit;
    const char *synopsis; /* the usage lines before the options */
    const char *epilogue;
} g_cmds[] = {
    {"train", DLT_CMD_TRAIN, "usage: dltrain train [OPTIONS]\n", NULL},
    {"eval", DLT_CMD_EVAL, "usage: dltrain eval --checkpoint PATH [OPTIONS]\n", NULL},
    {"bench", DLT_CMD_BENCH, "usage: dltrain bench [OPTIONS]\n", NULL},
    {"info", DLT_CMD_INFO,
     "usage: dltrain info [--arch NAME] [--width F] [--image-size N] [--classes N] [--layers] [--state-dict]\n"
     "       dltrain info --checkpoint FILE --verify\n",
     "--verify: exit 0 when FILE verifies, 1 when damaged or unverifiable.\n"},
    {"data", DLT_CMD_DATA,
     "usage: dltrain data pack SRC_DIR OUT.rec [--resize SHORT_SIDE] [--quality Q] [--labels FILE] [--force] "
     "[--quiet]\n"
     "\n"
     "Packs an ImageFolder (SRC_DIR/CLASS/IMAGE.JPEG, classes numbered in sorted order) into OUT.rec\n"
     "and OUT.idx in MXNet's RecordIO format. Unreadable images are named and left out. The files are\n"
     "written under temporary names and take their names at the end, the index last; OUT inside\n"
     "SRC_DIR is refused, and existing files are replaced only with --force.\n",
     NULL},
    {"env", DLT_CMD_ENV,
     "usage: dltrain env [--comm auto|single|mpi] [--timeout SECONDS]\n"
     "\n"
     "Bootstraps through PMIx (srun --mpi=pmix), then rank 0 prints one line per rank: host, node,\n"
     "local rank, CUDA_VISIBLE_DEVICES, CPU binding and NCCL_TOPO_FILE as the task sees them, and\n"
     "checks the host communicator: the sum of all ranks must be size*(size-1)/2.\n",
     "Exit status: 0 all checks passed, 1 a check failed, 2 usage error.\n"},
    {"check", DLT_CMD_CHECK,
     "usage: dltrain check [OPTIONS]   (srun --mpi=pmix [--dl-train] dltrain check, or alone)\n"
     "\n"
     "Each rank runs a GEMM on its device (cuBLAS on a GPU, oneDNN on the CPU) with small-integer\n"
     "inputs whose exact product is checked, then an all-reduce sweep on the trainer's communicator\n"
     "(time, algbw, busbw = algbw x 2(n-1)/n, every sum checked), then within each node, one rank\n"
     "per node across nodes, and node pairs, so that a slow or wrong rank, node or link is named.\n",
     "Exit status: 0 healthy, 3 degraded (slow ranks, nodes or links named), 4 broken (a wrong\n"
     "result named), 1 the check could not run, 2 usage. See dltrain(1), CHECK.\n"},
};

unsigned dlt_cmd_bit(const char *cmd)
{
    for (size_t i = 0; i < sizeof(g_cmds) / sizeof(g_cmds[0]); i++)
        if (!strcmp(g_cmds[i].name, cmd))
            return g_cmds[i].bit;
    return 0;
}

/* The option set cmd's command line is parsed against. */
static unsigned _family(unsigned cmd)
{
    return cmd & DLT_CMD_RUNS ? DLT_CMD_RUNS : cmd;
}

int dlt_opt_find(unsigned cmd, const char *name)
{
    for (size_t i = 0; i < sizeof(g_table) / sizeof(g_table[0]); i++)
        if ((g_table[i].cmds & _family(cmd)) && !strcmp(g_table[i].name, name))
            return (int)i;
    return -1;
}

/* "a|b|c" -> "a, b or c", for a refusal. */
static void _choice_words(const char *choices, char *out, size_t len)
{
    size_t n = 0, k = 0;
    const char *p;
    for (p = choices; *p && n + 3 < len; p++)
        if (*p == '|') {
            const char *more = strchr(p + 1, '|');
            const char *sep = more ? ", " : " or ";
            k = strlen(sep);
            if (n + k >= len)
                break;
            memcpy(out + n, sep, k);
            n += k;
        } else
            out[n++] = *p;
    out[n] = 0;
}

/* The position of arg among the choices, or -1. */
static int _choice(const char *choices, const char *arg)
{
    size_t k = strlen(arg);
    int i = 0;
    for (const char *p = choices;; i++) {
        size_t n = strcspn(p, "|");
        if (n == k && !strncmp(p, arg, k))
            return i;
        if (!p[n])
            return -1;
        p += n + 1;
    }
}

static int _apply(const dlt_opt *opt, dlt_cli_opts *o, const char *arg, dlt_err *err)
{
    char name[64], words[128];
    dlt_opt_arg a = {arg, 0, 0};
    snprintf(name, sizeof(name), "--%s", opt->name);
    switch (opt->kind) {
    case DLT_ARG_NONE:
    case DLT_ARG_TEXT: break;
    case DLT_ARG_WHOLE: {
        int64_t hi = opt->hi >= 9.2e18 ? INT64_MAX : (int64_t)opt->hi;
        if (dlt_parse_whole(name, arg, (int64_t)opt->lo, hi, &a.whole, err) != 0)
            return -EINVAL;
        break;
    }
    case DLT_ARG_REAL:
        if (dlt_parse_real(name, arg, opt->lo, opt->hi, &a.real, err) != 0)
            return -EINVAL;
        break;
    case DLT_ARG_CHOICE:
        if (!arg && (opt->flags & DLT_OPT_OPTIONAL_ARG)) {
            a.whole = 0; /* the first choice */
            break;
        }
        if ((a.whole = _choice(opt->choices, arg)) < 0) {
            _choice_words(opt->choices, words, sizeof(words));
            return dlt_fail(err, -EINVAL, "%s %s: %s", name, arg, words);
        }
        break;
    }
    return opt->set(opt, o, &a, err);
}

_Static_assert(sizeof(g_table) / sizeof(g_table[0]) <= DLT_OPT_MAX, "DLT_OPT_MAX: room for every option");

int dlt_opt_parse(unsigned cmd, int argc, char **argv, int first, dlt_cli_opts *o, unsigned char *seen, int *next,
                  dlt_err *err)
{
    struct option longopts[DLT_OPT_MAX + 1];
    const char *given[DLT_OPT_MAX] = {0}; /* each option's last value, for a repeat that differs */
    int index[DLT_OPT_MAX], n = 0, opt, longindex;
    unsigned fam = _family(cmd);
    for (size_t i = 0; i < sizeof(g_table) / sizeof(g_table[0]) && n < DLT_OPT_MAX; i++) {
        if (!(g_table[i].cmds & fam))
            continue;
        longopts[n] = (struct option){g_table[i].name,
                                      g_table[i].kind == DLT_ARG_NONE           ? no_argument
                                      : g_table[i].flags & DLT_OPT_OPTIONAL_ARG ? optional_argument
                                                                                : required_argument,
                                      NULL, 0};
        index[n++] = (int)i;
    }
    longopts[n] = (struct option){NULL, 0, NULL, 0};
    optind = first;
    while ((longindex = -1, opt = getopt_long(argc, argv, "h", longopts, &longindex)) != -1) {
        const dlt_opt *e;
        if (opt == 'h')
            return 1;
        if (opt != 0 || longindex < 0)
            return -EINVAL; /* getopt said what was wrong */
        e = &g_table[index[longindex]];
        seen[index[longindex]] = 1;
        if (!e->set)
            return 1; /* --help */
        if (_apply(e, o, optarg, err) != 0)
            return -EINVAL;
        /* A valid repeat with another value is said (the last wins, as job scripts that append an
         * override to a default line rely on); the same value twice is no news. */
        if (optarg && given[index[longindex]] && strcmp(given[index[longindex]], optarg))
            fprintf(stderr, "dltrain: warning: --%s given twice (%.64s, then %.64s): the last is used\n", e->name,
                    given[index[longindex]], optarg);
        given[index[longindex]] = optarg;
    }
    *next = optind;
    return 0;
}

/* Appends "--NAME" to a comma-separated list. */
static void _list_add(char *list, size_t len, const char *name)
{
    size_t n = strlen(list);
    snprintf(list + n, len - n, "%s--%s", n ? ", " : "", name);
}

void dlt_opt_unread(unsigned cmd, const unsigned char *seen, char *list, size_t len)
{
    list[0] = 0;
    for (size_t i = 0; i < sizeof(g_table) / sizeof(g_table[0]); i++)
        if (seen[i] && !(g_table[i].cmds & cmd))
            _list_add(list, len, g_table[i].name);
}

void dlt_opt_cuda_only(const unsigned char *seen, char *list, size_t len)
{
    list[0] = 0;
    for (size_t i = 0; i < sizeof(g_table) / sizeof(g_table[0]); i++)
        if (seen[i] && (g_table[i].flags & DLT_OPT_CUDA_ONLY))
            _list_add(list, len, g_table[i].name);
}

/* One option: "  --name ARG" and its help from column 26, continuation lines indented alike. */
static void _print_opt(FILE *f, const dlt_opt *e)
{
    char head[64];
    const char *h = e->help;
    int opt_arg = (e->flags & DLT_OPT_OPTIONAL_ARG) != 0;
    int n = snprintf(head, sizeof(head), "  --%s%s%s%s", e->name,
                     !e->arg   ? ""
                     : opt_arg ? "[="
                               : " ",
                     e->arg ? e->arg : "", e->arg && opt_arg ? "]" : "");
    if (n > 24)
        fprintf(f, "%s\n%-25s", head, "");
    else
        fprintf(f, "%-25s", head);
    while (*h) {
        size_t k = strcspn(h, "\n");
        fprintf(f, "%.*s\n", (int)k, h);
        h += k;
        if (*h == '\n' && *++h)
            fprintf(f, "%-25s", "");
    }
}

void dlt_opt_usage(FILE *f, unsigned cmd)
{
    static const char *const sections[] = {S_MODEL, S_COMPUTE, S_DATA, S_TRAIN, S_EVAL, S_BENCH, S_OUT, S_RANKS};
    unsigned fam = _family(cmd);
    size_t c = 0, count = sizeof(g_table) / sizeof(g_table[0]);
    while (c + 1 < sizeof(g_cmds) / sizeof(g_cmds[0]) && g_cmds[c].bit != cmd)
        c++;
    fputs(g_cmds[c].synopsis, f);
    fputs("\n", f);
    if (fam == DLT_CMD_RUNS) {
        for (size_t s = 0; s < sizeof(sections) / sizeof(sections[0]); s++) {
            fprintf(f, "%s:\n", sections[s]);
            for (size_t i = 0; i < count; i++)
                if ((g_table[i].cmds & fam) && g_table[i].section == sections[s])
                    _print_opt(f, &g_table[i]);
        }
        fprintf(f,
                "\nOptions of another command (train, eval, bench) are named in a warning and ignored.\n"
                "A run stopped by SIGTERM, SIGUSR1 or Ctrl-C checkpoints and exits with status %d (without\n"
                "--checkpoint-dir: nothing saved, status %d). See dltrain(1).\n",
                DLT_EXIT_PREEMPTED, DLT_EXIT_STOPPED_UNSAVED);
        return;
    }
    for (size_t i = 0; i < count; i++)
        if (g_table[i].cmds & fam)
            _print_opt(f, &g_table[i]);
    if (g_cmds[c].epilogue)
        fprintf(f, "\n%s", g_cmds[c].epilogue);
}

int dlt_opt_parse_command(unsigned cmd, const char *name, int argc, char **argv, int first, dlt_cli_opts *o,
                          unsigned char *seen, int *next, int usage_after_getopt)
{
    dlt_err err = DLT_ERR_INIT;
    int rc = dlt_opt_parse(cmd, argc, argv, first, o, seen, next, &err);
    if (rc == 1) {
        dlt_opt_usage(stdout, cmd);
        return 0;
    }
    if (rc != 0) {
        if (err.msg[0])
            fprintf(stderr, "dltrain: %s\n", err.msg);
        else if (usage_after_getopt) /* getopt said which option */
            dlt_opt_usage(stderr, cmd);
        return DLT_EXIT_USAGE;
    }
    if (name && *next < argc) {
        fprintf(stderr, "dltrain %s: unexpected argument '%s'\n", name, argv[*next]);
        return DLT_EXIT_USAGE;
    }
    return -1;
}
