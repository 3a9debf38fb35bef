/* SPDX-License-Identifier: Apache-2.0 */
/* run_lock: exclusive claims on a run's output paths, with the holder named to a second run. */
#include "config.h"

#include "trainer/common/run_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "trainer/common/clock.h"
#include "trainer/common/node_name.h"

#define LOCK_NAME ".dltrain.lock"

void dlt_run_holder_self(dlt_run_holder *h)
{
    const char *job = getenv("SLURM_JOB_ID"), *step = getenv("SLURM_STEP_ID");
    time_t now = time(NULL);
    struct tm tm;
    memset(h, 0, sizeof(*h));
    dlt_node_name(h->host, sizeof(h->host));
    h->pid = (long)getpid();
    snprintf(h->job, sizeof(h->job), "%.31s", job && *job ? job : "-");
    snprintf(h->step, sizeof(h->step), "%.31s", step && *step ? step : "-");
    if (gmtime_r(&now, &tm))
        strftime(h->since, sizeof(h->since), "%Y-%m-%dT%H:%M:%SZ", &tm);
}

int dlt_run_holder_format(const dlt_run_holder *h, char *buf, size_t len)
{
    int n = snprintf(buf, len, "host=%s pid=%ld job=%s step=%s since=%s\n", h->host, h->pid, h->job, h->step,
                     h->since[0] ? h->since : "-");
    return n < 0 || (size_t)n >= len ? -ENOSPC : n;
}

int dlt_run_holder_parse(const char *text, dlt_run_holder *h)
{
    memset(h, 0, sizeof(*h));
    if (sscanf(text, "host=%63s pid=%ld job=%31s step=%31s since=%31s", h->host, &h->pid, h->job, h->step,
               h->since) != 5 || h->pid <= 0)
        return -EINVAL;
    return 0;
}

/* The holder's words for a refusal: from its lock file, or "another process" when unreadable. */
static void _holder_words(int fd, char *out, size_t len, dlt_run_holder *h)
{
    char buf[256];
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    if (n > 0) {
        buf[n] = '\0';
        if (dlt_run_holder_parse(buf, h) == 0) {
            snprintf(out, len, "host %s, pid %ld%s%s%s%s, since %s", h->host, h->pid, strcmp(h->job, "-") ? ", Slurm job " : "",
                     strcmp(h->job, "-") ? h->job : "", strcmp(h->step, "-") ? " step " : "",
                     strcmp(h->step, "-") ? h->step : "", h->since);
            return;
        }
    }
    memset(h, 0, sizeof(*h));
    snprintf(out, len, "another process (its lock file names no holder)");
}

int dlt_run_lock_dir(dlt_run_lock *l, const char *opt, const char *dir, double same_job_wait_s, dlt_err *err)
{
    char path[4096], who[256], line[256];
    dlt_run_holder h, me;
    double until = 0;
    int fd, e, said = 0;
    l->fd = -1;
    if (snprintf(path, sizeof(path), "%s/%s", dir, LOCK_NAME) >= (int)sizeof(path)) {
        return dlt_fail(err, -ENAMETOOLONG, "%s %s: path too long", opt, dir);
    }
    fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) {
        e = errno;
        return dlt_fail(err, -e, "%s %s: cannot create its lock file %s: %s", opt, dir, LOCK_NAME, strerror(e));
    }
    dlt_run_holder_self(&me);
    while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        e = errno;
        if (e == EINTR)
            continue;
        if (e != EWOULDBLOCK) {
            close(fd);
            return dlt_fail(err, -e, "%s %s: cannot lock %s: %s (on NFS the lock needs the lock service: lockd for "
                     "NFSv3, NFSv4 has it built in)", opt, dir, LOCK_NAME, strerror(e));
        }
        _holder_words(fd, who, sizeof(who), &h);
        if (strcmp(me.job, "-") && !strcmp(h.job, me.job) && same_job_wait_s > 0) {
            /* This job's previous incarnation (a requeue) still ending: it lets go when it exits. */
            if (!said) {
                fprintf(stderr, "dltrain: %s %s is held by this job's previous run (%s): waiting up to %.0f s for "
                        "it to end\n", opt, dir, who, same_job_wait_s);
                until = dlt_now() + same_job_wait_s;
                said = 1;
            }
            if (dlt_now() < until) {
                struct timespec ts = {0, 200000000L};
                nanosleep(&ts, NULL);
                continue;
            }
        }
        close(fd);
        return dlt_fail(err, -EBUSY, "%s %s is in use by another run (%s): two runs in one folder would overwrite each "
                 "other's files; give this run another %s, or end the other one first", opt, dir, who, opt);
    }
    /* Ours: say who holds it, for the next one to be refused. */
    if (dlt_run_holder_format(&me, line, sizeof(line)) > 0 &&
        (ftruncate(fd, 0) != 0 || pwrite(fd, line, strlen(line), 0) != (ssize_t)strlen(line))) {
        e = errno;
        close(fd);
        return dlt_fail(err, -e, "%s %s: cannot write its lock file %s: %s", opt, dir, LOCK_NAME, strerror(e));
    }
    l->fd = fd;
    return 0;
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
            return dlt_fail(err, -EBUSY, "%s %s is being written by another running process (it holds a lock on it): two "
                     "runs appending to one file would interleave their lines; give this run another %s", opt, path,
                     opt);
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
