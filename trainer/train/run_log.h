/* SPDX-License-Identifier: Apache-2.0 */
/* run_log: what a run tells its user: event lines with the `dltrain: ` prefix at three levels
 * (--quiet: errors, warnings and the end summary; default: progress too; --verbose: setup
 * details), the per-interval step line and its JSON twin in --metrics, and the end summary. Only
 * rank 0 prints progress; warnings may come from any rank. */
#ifndef DLT_RUN_LOG_H
#define DLT_RUN_LOG_H

#include <stdint.h>
#include <stdio.h>

#include "common/run_lock.h"
#include "common/status.h"

struct dlt_tb_writer;

typedef enum { DLT_LOG_QUIET = 0, DLT_LOG_INFO = 1, DLT_LOG_VERBOSE = 2 } dlt_log_level;

typedef struct {
    int rank, ranks, batch;
    dlt_log_level level;
    FILE *metrics;
    dlt_run_lock metrics_lock; /* the metrics file itself, locked as by earlier versions (the run's claims: run.h) */
    char run_id[24];           /* in every metrics line: two runs' lines told apart */
    struct dlt_tb_writer *tb;  /* --tensorboard (rank 0), NULL when off or after a failed write */
    /* the current logging interval */
    double window_t0, data_s, comm_s, total_s, loss_sum;
    int64_t images, correct;
    /* the whole run (its first step, which includes one-time setup, left out of the rate) */
    double t_start, steady_t0, steady_images;
    int64_t first_step;
} dlt_run_log;

/* metrics_path (may be NULL) is opened for appending on rank 0. */
int dlt_run_log_open(dlt_run_log *l, int rank, int ranks, int batch, dlt_log_level level, const char *metrics_path,
                     dlt_err *err);
void dlt_run_log_close(dlt_run_log *l);
/* --tensorboard DIR on rank 0: an event file there that gets each interval's scalars (the metrics
 * line's values, tagged train/...) and each validation's (val/top1, val/top5), at the step count of
 * completed optimizer steps, appended at every log line. */
int dlt_run_log_open_tensorboard(dlt_run_log *l, const char *dir, dlt_err *err);

/* An event line on rank 0 (stdout) when the run's level is at least `level`. */
void dlt_log(const dlt_run_log *l, dlt_log_level level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A warning from this rank (stderr), at every level. */
void dlt_log_warn(const dlt_run_log *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Starts the run's clocks at step first_step. */
void dlt_run_log_start(dlt_run_log *l, int64_t first_step);
/* One finished step: the summed loss and top-1 hits over all ranks, seconds waiting for data and
 * in the all-reduce, and the step's wall time. */
void dlt_run_log_step(dlt_run_log *l, int64_t step, double loss_sum, double correct, double data_s, double comm_s,
                      double step_s);

typedef struct {
    int64_t step, total, steps_per_epoch;
    double lr;
    int loss_scaled; /* fp16: show the loss scale and skipped steps */
    double loss_scale;
    int64_t skipped;
} dlt_step_status;

/* Seconds spent outside training (a validation pass): left out of images/s. */
void dlt_run_log_pause(dlt_run_log *l, double seconds);
/* The interval's line (and JSON object); starts a new interval. */
void dlt_run_log_line(dlt_run_log *l, const dlt_step_status *st);
/* An event in the metrics file (rank 0) in MLPerf's logging format (mlperf_logging's mllog: the
 * JSON after its ":::MLLOG " prefix): {"namespace":"","time_ms":UNIX MS,"event_type":TYPE,
 * "key":KEY,"value":VALUE,"metadata":{"time":RUN SECONDS,FIELDS}}. type: "POINT_IN_TIME",
 * "INTERVAL_START" or "INTERVAL_END"; value: a JSON value (NULL: null); fields: a printf format
 * of more metadata members (or ""). The step lines stay as they are. */
void dlt_run_log_event(dlt_run_log *l, const char *key, const char *type, const char *value, const char *fields, ...)
    __attribute__((format(printf, 5, 6)));
/* Mean images/s per rank of a --baseline metrics file (its first interval left out as warm-up).
 * Returns 0, or a negative errno with err naming the file and what is wrong with it (unreadable,
 * not a regular file, no interval line with a positive rate and a rank count after the first). */
int dlt_run_log_baseline(const char *path, double *per_rank, dlt_err *err);

/* A validation's result (rank 0): val/top1, val/top5 and val/nonfinite (the images whose logits
 * were not finite, counted as misses) in the TensorBoard file at step. */
void dlt_run_log_validation(dlt_run_log *l, int64_t step, double top1, double top5, double nonfinite);
/* The end: steps and time, images/s, and the scaling efficiency against a baseline metrics file. */
void dlt_run_log_summary(const dlt_run_log *l, int64_t steps, const char *baseline);

#endif
