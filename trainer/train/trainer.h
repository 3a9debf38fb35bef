/* SPDX-License-Identifier: Apache-2.0 */
/* trainer: what the commands call: training (train_loop.c: data -> forward -> loss -> backward
 * with the gradient all-reduce -> SGD), evaluation (eval.c) and the benchmark (bench.c), over any
 * backend and communicator, and the settings they share. */
#ifndef DLT_TRAINER_H
#define DLT_TRAINER_H

#include <stdint.h>

#include "common/exit_status.h"
#include "common/status.h"
#include "trainer/backend/backend.h"
#include "trainer/comm/comm.h"
#include "trainer/comm/grad_reducer.h"
#include "trainer/model/resnet.h"
#include "trainer/train/run_log.h"

/* How a run, or the checks every rank makes before it (preflight.h), ends besides done (0) and
 * failed with err holding the first failure (a negative status): stopped by SIGTERM/SIGUSR1 after
 * writing its checkpoint, stopped with nothing saved (no --checkpoint-dir), or refused before the
 * start, every rank alike, after saying why (a run that could not start; a usage error: an option,
 * a path or a setting to change). These are the run's statuses, not exit statuses: the command
 * decides the process's exit status from them, once (dlt_cli_exit_status gives DLT_EXIT_PREEMPTED,
 * DLT_EXIT_STOPPED_UNSAVED, DLT_EXIT_FAILED and DLT_EXIT_USAGE). */
typedef enum {
    DLT_RUN_DONE = 0,
    DLT_RUN_PREEMPTED = 1,
    DLT_RUN_STOPPED_UNSAVED = 2,
    DLT_RUN_REFUSED = 3,
    DLT_RUN_REFUSED_USAGE = 4,
} dlt_run_status;

typedef struct {
    dlt_model_config model;         /* batch is per rank */
    dlt_backend_config backend;     /* kind, precision, device */
    dlt_grad_reducer_config reduce; /* GPU buckets */
    double loss_scale;              /* fp16: initial dynamic loss scale (0: 65536) */
    int loss_scale_window;          /* fp16: clean steps before the scale grows (default 2000) */
    int cuda_graphs;                /* CUDA: record one step as a CUDA graph and replay it */
    int64_t epochs;
    int64_t max_steps; /* stop after this many optimizer steps in total (0: epochs decide) */
    double base_lr;    /* per 256 images of global batch */
    double momentum, weight_decay, label_smoothing, warmup_epochs;
    int cosine;
    int milestones[8], nmilestones;
    int decay_bn_bias; /* apply weight decay to BN parameters and biases too */
    int zero_init_residual;
    uint64_t seed;
    int64_t synthetic_size; /* images per epoch */
    const char *data;       /* ImageFolder root (or ROOT/train), or a RecordIO .rec; NULL: synthetic */
    const char *val_data;   /* validation images (default ROOT/val when data has train/ and val/) */
    const char *val_labels; /* "FILENAME CLASS" lines for a flat validation folder */
    int workers;            /* decode threads per rank (0: the task's CPUs minus one) */
    int strict;             /* a bad image stops the run instead of being skipped */
    int keep_checkpoints;   /* > 0: only the newest N checkpoints stay in checkpoint_dir */
    double max_bad_share;   /* training: more distinct unreadable images than this share of the
                             * data set stops the run (--max-bad-share, default 0.01) */
    int classes_given;      /* --classes was set: the dataset must agree */
    int learnable;
    int log_every;
    dlt_log_level log_level; /* --quiet, default, --verbose (or DLT_LOG=quiet|info|verbose) */
    const char *metrics_path;
    const char *tensorboard_dir; /* --tensorboard: rank 0's event file goes there */
    const char *checkpoint_dir;
    int64_t checkpoint_every;    /* steps; 0: only at the end and on preemption */
    double checkpoint_minutes;   /* also checkpoint when this much time passed since the last one */
    const char *baseline;        /* metrics file of a smaller run, for scaling efficiency */
    const char *resume;          /* path, "auto", or NULL */
    int resume_chosen;           /* resume was chosen by --resume auto (not named by the user): a checkpoint
                                  * of other data is refused instead of continued on purpose */
    dlt_run_claims *claims;      /* rank 0's claims on the outputs, taken before the resume choice and
                                  * handed to the run (NULL or not taken: the run takes them itself) */
    const char *resume_override; /* settings a resume may change (comma-separated names), or NULL */
    const char *init;            /* weights to start from (fine-tuning), or NULL */
    const char *eval_checkpoint; /* eval: the checkpoint scored (its state file names the classes) */
    int augment;                 /* training crops and flips (0: the evaluation transform, for comparisons) */
    const char *dump_batch;      /* debugging: rank 0 writes the first batch it trains on (uint8 NHWC, int32 labels) */
    int eval_every;              /* train: validate every N epochs (-1: 1 when there are validation images, else 0) */
    double target_top1;          /* train: stop at the first validation reaching it (0: none) */
    int64_t eval_size;
    int check_every;      /* steps between cross-rank weight checks (0: never) */
    int max_bad_steps;    /* consecutive non-finite losses tolerated (updates skipped) before stopping */
    double stall_timeout; /* seconds one phase may take before the watchdog aborts the run (0: off) */
    /* Tests: called once the backend exists, before anything uses it (a recording ops table). */
    void (*backend_hook)(dlt_backend *be, void *arg);
    void *backend_hook_arg;
} dlt_train_config;

void dlt_train_config_defaults(dlt_train_config *c);

/* Each returns 0 (dlt_train_run also DLT_RUN_PREEMPTED or DLT_RUN_STOPPED_UNSAVED) or a negative
 * status with err holding the run's first failure (empty where another rank says it for all); err
 * should be the communicator's error buffer, so that every layer reports into one place. */
int dlt_train_run(const dlt_train_config *c, dlt_comm *comm, dlt_err *err);

/* Top-1/top-5 of a checkpoint over the validation images (or generated ones). */
int dlt_eval_run(const dlt_train_config *c, dlt_comm *comm, const char *checkpoint, dlt_err *err);

typedef struct {
    int warmup, iters;
    int inference;
    int json;
    int feed;       /* a new batch every step (decoded or generated, copied ahead), not one loaded once */
    int input_only; /* the training input path alone: batches read, decoded, cropped, into the ring */
    double per_gpu; /* images/s one GPU trains at, for "feeds N GPUs" (input_only); 0: from the precision */
    int profile;    /* iters more steps with every backend call timed (trainer/backend/op_profile.h) */
} dlt_bench_config;

int dlt_bench_run(const dlt_train_config *c, const dlt_bench_config *b, dlt_comm *comm, dlt_err *err);

#endif
