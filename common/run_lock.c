/* SPDX-License-Identifier: Apache-2.0 */
/* run_lock: exclusive claims on a run's output paths, with the holder named to a second run. */
#include "config.h"

#include "common/run_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/io.h"
#include "common/node_name.h"

#define LOCK_NAME ".dltrain.lock"

void dlt_run_holder_self(dlt_run_holder *h)
{
    const char *job = getenv("SLURM_JOB_ID"), *step = getenv("SLURM_STEP_ID");
    const char *restart = getenv("SLURM_RESTART_COUNT");
    time_t now = time(NULL);
    struct tm tm;
    memset(h, 0, sizeof(*h));
    dlt_node_name(h->host, sizeof(h->host));
    h->pid = (long)getpid();
    snprintf(h->job, sizeof(h->job), "%.31s", job && *job ? job : "-");
    snprintf(h->step, sizeof(h->step), "%.31s", step && *step ? step : "-");
    /* Slurm sets it only once a job was requeued: absent is the first incarnation. */
    h->restart = restart && *restart ? atoi(restart) : 0;
    if (h->restart < 0)
        h->restart = 0;
    if (gmtime_r(&now, &tm))
        strftime(h->since, sizeof(h->since), "%Y-%m-%dT%H:%M:%SZ", &tm);
}

int dlt_run_holder_format(const dlt_run_holder *h, char *buf, size_t len)
{
    /* restart last: a holder line of this form still parses for a version that reads five fields */
    int n = snprintf(buf, len, "host=%s pid=%ld job=%s step=%s since=%s restart=%d\n", h->host, h->pid, h->job, h->step,
                     h->since[0] ? h->since : "-", h->restart);
    return n < 0 || (size_t)n >= len ? -ENOSPC : n;
}

int dlt_run_holder_parse(const char *text, dlt_run_holder *h)
{
    memset(h, 0, sizeof(*h));
    if (sscanf(text, "host=%63s pid=%ld job=%31s step=%31s since=%31s", h->host, &h->pid, h->job, h->step, h->since) !=
            5 ||
        h->pid <= 0)
        return -EINVAL;
    /* A line written before the restart count was recorded: unknown. */
    if (sscanf(text, "host=%*s pid=%*d job=%*s step=%*s since=%*s restart=%d", &h->restart) != 1 || h->restart < 0)
        h->restart = -1;
    return 0;
}

dlt_run_holder_relation dlt_run_holder_relate(const dlt_run_holder *me, const dlt_run_holder *h)
{
    if (!strcmp(me->job, "-") || strcmp(h->job, me->job))
        return DLT_HOLDER_OTHER;
    /* Without its restart count (an older dltrain) the holder is taken for an earlier incarnation,
     * as before the count was recorded. */
    if (h->restart < 0 || h->restart < me->restart)
        return DLT_HOLDER_EARLIER;
    return DLT_HOLDER_SAME_JOB;
}

/* The holder's words for a refusal: from its lock file, or "another process" when unreadable. */
static void _holder_words(int fd, char *out, size_t len, dlt_run_holder *h)
{
    char buf[256];
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    if (n > 0) {
        buf[n] = '\0';
        if (dlt_run_holder_parse(buf, h) == 0) {
            snprintf(out, len, "host %s, pid %ld%s%s%s%s, since %s", h->host, h->pid,
                     strcmp(h->job, "-") ? ", Slurm job " : "", strcmp(h->job, "-") ? h->job : "",
                     strcmp(h->step, "-") ? " step " : "", strcmp(h->step, "-") ? h->step : "", h->since);
            return;
        }
    }
    memset(h, 0, sizeof(*h));
    snprintf(h->job, sizeof(h->job), "-");
    snprintf(out, len, "another process (its lock file names no holder)");
}

/* Claims lock file path for `opt shown`, waiting until `until` (dlt_now()) while the holder is an
 * earlier incarnation of this job; the descriptor in *fdp. */
static int _claim(const char *opt, const char *shown, const char *path, double until, int *fdp, dlt_err *err)
{
    char who[256], line[256];
    dlt_run_holder h, me;
    int fd, e, said = 0;
    *fdp = -1;
    fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) {
        e = errno;
        return dlt_fail(err, -e, "%s %s: cannot create its lock file %s: %s", opt, shown, path, strerror(e));
    }
    dlt_run_holder_self(&me);
    while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        dlt_run_holder_relation rel;
        e = errno;
        if (e == EINTR)
            continue;
        if (e != EWOULDBLOCK) {
            close(fd);
            return dlt_fail(err, -e,
                            "%s %s: cannot lock %s: %s (on NFS the lock needs the lock service: lockd for "
                            "NFSv3, NFSv4 has it built in)",
                            opt, shown, path, strerror(e));
        }
        _holder_words(fd, who, sizeof(who), &h);
        rel = dlt_run_holder_relate(&me, &h);
        if (rel == DLT_HOLDER_EARLIER && dlt_now() < until) {
            /* This job's previous incarnation (a requeue) still ending: it lets go when it exits. */
            if (!said)
                fprintf(stderr,
                        "dltrain: %s %s is held by this job's previous run (%s): waiting up to %.0f s for "
                        "it to end\n",
                        opt, shown, who, until - dlt_now());
            said = 1;
            struct timespec ts = {0, 200000000L};
            nanosleep(&ts, NULL);
            continue;
        }
        close(fd);
        if (rel == DLT_HOLDER_SAME_JOB)
            return dlt_fail(err, -EBUSY,
                            "%s %s is in use by step %s of this same Slurm job (%s; restart count %d "
                            "there, %d here: no requeue): two steps of one job writing one path would overwrite each "
                            "other's files; give this step another %s",
                            opt, shown, h.step, who, h.restart, me.restart, opt);
        if (rel == DLT_HOLDER_EARLIER)
            return dlt_fail(err, -EBUSY,
                            "%s %s is still held by this job's previous run (%s) after waiting for it "
                            "to end: end that process (it may hang on a lost node), then requeue",
                            opt, shown, who);
        return dlt_fail(err, -EBUSY,
                        "%s %s is in use by another run (%s): two runs writing one path would overwrite or "
                        "interleave each other's files; give this run another %s, or end the other one first",
                        opt, shown, who, opt);
    }
    /* Ours: say who holds it, for the next one to be refused. */
    if (dlt_run_holder_format(&me, line, sizeof(line)) > 0 &&
        (ftruncate(fd, 0) != 0 || pwrite(fd, line, strlen(line), 0) != (ssize_t)strlen(line))) {
        e = errno;
        close(fd);
        return dlt_fail(err, -e, "%s %s: cannot write its lock file %s: %s", opt, shown, path, strerror(e));
    }
    *fdp = fd;
    return 0;
}

int dlt_run_lock_dir(dlt_run_lock *l, const char *opt, const char *dir, double until, dlt_err *err)
{
    char path[4096];
    l->fd = -1;
    if (snprintf(path, sizeof(path), "%s/%s", dir, LOCK_NAME) >= (int)sizeof(path))
        return dlt_fail(err, -ENAMETOOLONG, "%s %s: path too long", opt, dir);
    return _claim(opt, dir, path, until, &l->fd, err);
}

int dlt_run_lock_beside(dlt_run_lock *l, const char *opt, const char *file, double until, dlt_err *err)
{
    char path[4096];
    const char *slash = strrchr(file, '/');
    int dirlen = slash ? (int)(slash - file) + 1 : 0;
    l->fd = -1;
    if (snprintf(path, sizeof(path), "%.*s.%s%s", dirlen, file, file + dirlen, LOCK_NAME) >= (int)sizeof(path))
        return dlt_fail(err, -ENAMETOOLONG, "%s %s: path too long", opt, file);
    return _claim(opt, file, path, until, &l->fd, err);
}

int dlt_run_lock_file(dlt_run_lock *l, const char *opt, const char *path, int file_fd, dlt_err *err)
{
    int fd;
    l->fd = -1;
    fd = fcntl(file_fd, F_DUPFD_CLOEXEC, 3);
    if (fd < 0) {
        int e = errno;
        return dlt_fail(err, -e, "%s %s: %s", opt, path, strerror(e));
    }
    while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        if (e == EINTR)
            continue;
        close(fd);
        if (e == EWOULDBLOCK) {
            return dlt_fail(err, -EBUSY,
                            "%s %s is being written by another running process (it holds a lock on it): two "
                            "runs appending to one file would interleave their lines; give this run another %s",
                            opt, path, opt);
        }
        return dlt_fail(err, -e, "%s %s: cannot lock it: %s", opt, path, strerror(e));
    }
    l->fd = fd;
    return 0;
}

void dlt_run_lock_release(dlt_run_lock *l)
{
    if (l->fd >= 0)
        close(l->fd);
    l->fd = -1;
}

void dlt_run_claims_init(dlt_run_claims *c)
{
    c->ckpt.fd = c->tb.fd = c->metrics.fd = -1;
    c->taken = 0;
}

int dlt_run_claims_take(dlt_run_claims *c, const char *metrics_path, const char *checkpoint_dir,
                        const char *tensorboard_dir, double wait_s, dlt_err *err)
{
    /* One deadline for all: a requeue waits for its previous incarnation once, not once a path. */
    double until = dlt_now() + wait_s;
    int rc;
    dlt_run_claims_init(c);
    if (checkpoint_dir) {
        if (dlt_mkdirs(checkpoint_dir) != 0) {
            rc = -errno;
            return dlt_fail(err, rc, "--checkpoint-dir %s: cannot create it: %s", checkpoint_dir, strerror(-rc));
        }
        if ((rc = dlt_run_lock_dir(&c->ckpt, "--checkpoint-dir", checkpoint_dir, until, err)) != 0)
            return rc;
    }
    if (tensorboard_dir) {
        if (dlt_mkdirs(tensorboard_dir) != 0) {
            rc = -errno;
            dlt_run_claims_release(c);
            return dlt_fail(err, rc, "--tensorboard %s: cannot create it: %s", tensorboard_dir, strerror(-rc));
        }
        if ((rc = dlt_run_lock_dir(&c->tb, "--tensorboard", tensorboard_dir, until, err)) != 0) {
            dlt_run_claims_release(c);
            return rc;
        }
    }
    if (metrics_path && (rc = dlt_run_lock_beside(&c->metrics, "--metrics", metrics_path, until, err)) != 0) {
        dlt_run_claims_release(c);
        return rc;
    }
    c->taken = 1;
    return 0;
}

void dlt_run_claims_release(dlt_run_claims *c)
{
    dlt_run_lock_release(&c->ckpt);
    dlt_run_lock_release(&c->tb);
    dlt_run_lock_release(&c->metrics);
    c->taken = 0;
}
