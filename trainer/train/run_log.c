/* SPDX-License-Identifier: Apache-2.0 */
/* run_log: event lines, the step line and JSON metrics, the end summary. */
#include "config.h"

#include "trainer/train/run_log.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/io.h"
#include "common/status.h"
#include "common/tunables.h"
#include "trainer/train/tb_writer.h"

int dlt_run_log_open(dlt_run_log *l, int rank, int ranks, int batch, dlt_log_level level, const char *metrics_path,
                     dlt_err *err)
{
    uint64_t id = 0;
    int rc;
    memset(l, 0, sizeof(*l));
    l->metrics_lock.fd = -1;
    l->rank = rank;
    l->ranks = ranks;
    l->batch = batch;
    l->level = level;
    if (getrandom(&id, sizeof(id), 0) != (ssize_t)sizeof(id))
        id = (uint64_t)getpid() << 32 ^ (uint64_t)time(NULL);
    snprintf(l->run_id, sizeof(l->run_id), "%016llx", (unsigned long long)id);
    if (rank == 0 && metrics_path && !(l->metrics = dlt_fopen_regular("--metrics", metrics_path, "a", err)))
        return -errno;
    /* One writer at a time: a second run appending would interleave its lines with this one's. */
    if (l->metrics &&
        (rc = dlt_run_lock_file(&l->metrics_lock, "--metrics", metrics_path, fileno(l->metrics), err)) != 0) {
        fclose(l->metrics);
        l->metrics = NULL;
        return rc;
    }
    return 0;
}

int dlt_run_log_open_tensorboard(dlt_run_log *l, const char *dir, dlt_err *err)
{
    int rc;
    if (l->rank != 0 || !dir)
        return 0;
    /* (claimed with the run's other paths, dlt_run_claims: TensorBoard would merge two runs' event
     * files into one curve) */
    if ((rc = dlt_tb_open(&l->tb, dir, err)) != 0)
        return rc;
    dlt_log(l, DLT_LOG_VERBOSE, "TensorBoard events: %s", dlt_tb_path(l->tb));
    return 0;
}

/* One metrics line, whole or not at all: written with one write() to the O_APPEND descriptor
 * (stdio would flush a full buffer in the middle of a line); a short or failed write (a full disk)
 * is cut back to where the line began, said once, and ends the file, not the training. */
static void _metrics_put(dlt_run_log *l, const char *line, size_t len)
{
    int fd;
    off_t start;
    size_t done = 0;
    if (!l->metrics)
        return;
    fd = fileno(l->metrics);
    start = lseek(fd, 0, SEEK_END);
    while (done < len) {
        ssize_t w = write(fd, line + done, len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int e = w < 0 ? errno : ENOSPC;
            if (start >= 0 && ftruncate(fd, start) != 0)
                dlt_log_warn(l, "--metrics: the cut line could not be removed either: %s", strerror(errno));
            dlt_log_warn(l, "--metrics: write failed: %s; metrics lines stop here (training goes on)", strerror(e));
            fclose(l->metrics);
            l->metrics = NULL;
            return;
        }
        done += (size_t)w;
    }
}

/* A metrics line formatted into one buffer, then put whole. */
static void _metrics_printf(dlt_run_log *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void _metrics_printf(dlt_run_log *l, const char *fmt, ...)
{
    char buf[4096];
    va_list ap;
    int n;
    va_start(ap, fmt);
    n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (n > 0 && (size_t)n < sizeof(buf))
        _metrics_put(l, buf, (size_t)n);
    else if (l->metrics)
        dlt_log_warn(l, "--metrics: a line of %d bytes does not fit its buffer: not written", n);
}

/* Appends what was queued; a failed write is said once and ends the file, not the training. */
static void _tb_flush(dlt_run_log *l)
{
    dlt_err err = DLT_ERR_INIT;
    if (dlt_tb_flush(l->tb, &err) != 0) {
        dlt_log_warn(l, "%s: TensorBoard events stop here (training goes on)", err.msg);
        dlt_tb_close(l->tb);
        l->tb = NULL;
    }
}

/* The interval's scalars as the metrics line has them (the same expressions, before the interval
 * is reset). */
static void _tb_line(dlt_run_log *l, const dlt_step_status *st, double ips)
{
    double seen = (double)l->images;
    int rc = 0;
    if (!l->tb)
        return;
    rc |= dlt_tb_scalar(l->tb, "train/loss", st->step, l->loss_sum / seen);
    rc |= dlt_tb_scalar(l->tb, "train/top1", st->step, (double)l->correct / seen);
    rc |= dlt_tb_scalar(l->tb, "train/lr", st->step, st->lr);
    rc |= dlt_tb_scalar(l->tb, "train/images_per_s", st->step, ips);
    rc |= dlt_tb_scalar(l->tb, "train/data_wait", st->step, l->data_s / l->total_s);
    /* the host's wait for the step's results: an all-reduce only with several ranks (dltrain(1)) */
    rc |= dlt_tb_scalar(l->tb, "train/wait", st->step, l->comm_s / l->total_s);
    if (st->loss_scaled)
        rc |= dlt_tb_scalar(l->tb, "train/loss_scale", st->step, st->loss_scale);
    if (rc)
        dlt_log_warn(l, "out of memory for TensorBoard scalars at step %" PRId64 ": some are missing", st->step);
    _tb_flush(l);
}

void dlt_run_log_validation(dlt_run_log *l, int64_t step, double top1, double top5, double nonfinite)
{
    if (!l->tb)
        return;
    if (dlt_tb_scalar(l->tb, "val/top1", step, top1) | dlt_tb_scalar(l->tb, "val/top5", step, top5) |
        dlt_tb_scalar(l->tb, "val/nonfinite", step, nonfinite))
        dlt_log_warn(l, "out of memory for TensorBoard scalars at step %" PRId64 ": some are missing", step);
    _tb_flush(l);
}

void dlt_run_log_close(dlt_run_log *l)
{
    dlt_tb_close(l->tb);
    l->tb = NULL;
    if (l->metrics && fclose(l->metrics) != 0)
        dlt_log_warn(l, "--metrics: closing it failed: %s (its last lines may be lost)", strerror(errno));
    l->metrics = NULL;
    dlt_run_lock_release(&l->metrics_lock);
}

void dlt_log(const dlt_run_log *l, dlt_log_level level, const char *fmt, ...)
{
    va_list ap;
    if (l->rank != 0 || l->level < level)
        return;
    fputs("dltrain: ", stdout);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fputc('\n', stdout);
    fflush(stdout);
}

void dlt_log_warn(const dlt_run_log *l, const char *fmt, ...)
{
    va_list ap;
    (void)l;
    fputs("dltrain: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

void dlt_run_log_start(dlt_run_log *l, int64_t first_step)
{
    l->t_start = l->window_t0 = dlt_now();
    l->first_step = first_step;
}

void dlt_run_log_step(dlt_run_log *l, int64_t step, double loss_sum, double correct, double data_s, double comm_s,
                      double step_s)
{
    int64_t global = (int64_t)l->batch * l->ranks;
    if (step == l->first_step + 1)
        l->steady_t0 = dlt_now(); /* the first step includes one-time setup */
    else
        l->steady_images += (double)global;
    l->data_s += data_s;
    l->comm_s += comm_s;
    l->total_s += step_s;
    l->images += global;
    l->loss_sum += loss_sum;
    l->correct += (int64_t)correct;
}

void dlt_run_log_pause(dlt_run_log *l, double seconds)
{
    l->window_t0 += seconds;
    if (l->steady_t0 > 0)
        l->steady_t0 += seconds;
}

void dlt_run_log_line(dlt_run_log *l, const dlt_step_status *st)
{
    double now = dlt_now(), ips = (double)l->images / (now - l->window_t0);
    double seen = (double)l->images;
    if (l->rank == 0 && l->level >= DLT_LOG_INFO) {
        printf("dltrain: epoch %" PRId64 " step %" PRId64 "/%" PRId64 " loss %.4f top1 %.3f lr %.4g img/s %.1f "
               "(%.1f per rank) data %.1f%% wait %.1f%%",
               (st->step - 1) / st->steps_per_epoch + 1, st->step, st->total, l->loss_sum / seen,
               (double)l->correct / seen, st->lr, ips, ips / l->ranks, 100 * l->data_s / l->total_s,
               100 * l->comm_s / l->total_s);
        if (st->loss_scaled)
            printf(" loss-scale %g skipped %" PRId64, st->loss_scale, st->skipped);
        printf("\n");
        fflush(stdout);
    }
    /* "wait" is the host's wait for the step's results (the gradient all-reduce and the agreement
     * between ranks, and whatever the device still had to do): with one rank there is no
     * all-reduce in it. Its key is "wait"; "allreduce" repeats it for the readers of earlier
     * files (contrib/report.py reads either); dltrain(1) says what it measures. */
    if (l->metrics) {
        _metrics_printf(l,
                        "{\"step\":%" PRId64 ",\"epoch\":%.4f,\"loss\":%.6f,\"top1\":%.5f,\"lr\":%.6g,"
                        "\"images_per_s\":%.3f,\"images_per_s_per_rank\":%.3f,\"data_wait\":%.5f,"
                        "\"wait\":%.5f,\"allreduce\":%.5f,\"ranks\":%d,\"batch\":%d,\"time\":%.3f,\"run_id\":\"%s\"}\n",
                        st->step, (double)st->step / st->steps_per_epoch, l->loss_sum / seen, (double)l->correct / seen,
                        st->lr, ips, ips / l->ranks, l->data_s / l->total_s, l->comm_s / l->total_s,
                        l->comm_s / l->total_s, l->ranks, l->batch, now - l->t_start, l->run_id);
    }
    _tb_line(l, st, ips);
    l->window_t0 = now;
    l->data_s = l->comm_s = l->total_s = l->loss_sum = 0;
    l->images = l->correct = 0;
}

void dlt_run_log_event(dlt_run_log *l, const char *key, const char *type, const char *value, const char *fields, ...)
{
    struct timespec ts;
    va_list ap;
    char buf[4096];
    int n, m = 0;
    if (!l->metrics)
        return;
    clock_gettime(CLOCK_REALTIME, &ts);
    n = snprintf(buf, sizeof(buf),
                 "{\"namespace\":\"\",\"time_ms\":%lld,\"event_type\":\"%s\",\"key\":\"%s\",\"value\":%s,"
                 "\"metadata\":{\"time\":%.3f%s",
                 (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000, type, key, value ? value : "null",
                 l->t_start > 0 ? dlt_now() - l->t_start : 0.0, fields && *fields ? "," : "");
    if (n > 0 && (size_t)n < sizeof(buf) && fields && *fields) {
        va_start(ap, fields);
        m = vsnprintf(buf + n, sizeof(buf) - (size_t)n, fields, ap);
        va_end(ap);
    }
    /* The run's id last: the event's own fields keep their places after "time". */
    if (n < 0 || m < 0 || (size_t)n + (size_t)m + 48 > sizeof(buf)) {
        dlt_log_warn(l, "--metrics: the %s event does not fit its buffer: not written", key);
        return;
    }
    n += m;
    n += snprintf(buf + n, sizeof(buf) - (size_t)n, ",\"run_id\":\"%s\"}}\n", l->run_id);
    _metrics_put(l, buf, (size_t)n);
}

int dlt_run_log_baseline(const char *path, double *per_rank, dlt_err *err)
{
    FILE *f = dlt_fopen_regular("--baseline", path, "r", err);
    char line[2048];
    double sum = 0;
    int n = 0, lines = 0;
    if (!f)
        return -errno;
    while (fgets(line, sizeof(line), f)) {
        const char *a = strstr(line, "\"images_per_s\":"), *r = strstr(line, "\"ranks\":");
        /* A damaged line (no positive finite rate, no rank count) is left out rather than printed as inf or NaN. */
        if (!a || !r || lines++ == 0 || !(atof(a + 15) > 0 && atof(a + 15) < 1e12 && atof(r + 8) >= 1))
            continue;
        sum += atof(a + 15) / atof(r + 8);
        n++;
    }
    fclose(f);
    if (!n)
        return dlt_fail(err, -EINVAL,
                        "--baseline %s: no interval line with images_per_s and ranks after the "
                        "first (the first is warm-up): give the --metrics file of a finished run with at least two "
                        "log lines",
                        path);
    *per_rank = sum / n;
    return 0;
}

void dlt_run_log_summary(const dlt_run_log *l, int64_t steps, const char *baseline)
{
    double now = dlt_now(), steady = now - l->steady_t0, ips = steady > 0 ? l->steady_images / steady : 0, base = 0;
    if (l->rank != 0)
        return;
    printf("dltrain: done: %" PRId64 " step%s in %.1f s\n", steps, steps == 1 ? "" : "s", now - l->t_start);
    if (l->steady_images > 0) {
        printf("dltrain: summary: %.1f images/s, %.1f per rank, %d rank(s)", ips, ips / l->ranks, l->ranks);
        dlt_err err = DLT_ERR_INIT;
        if (baseline && dlt_run_log_baseline(baseline, &base, &err) == 0)
            printf(", scaling efficiency %.1f%% against %.1f images/s per rank in %s", 100 * ips / l->ranks / base,
                   base, baseline);
        else if (baseline)
            printf(" (baseline not used: %s)", err.msg);
        printf("\n");
    }
    fflush(stdout);
}
