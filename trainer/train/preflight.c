/* SPDX-License-Identifier: Apache-2.0 */
/* preflight: checks before a run, the same outcome on every rank. */
#include "config.h"

#include "trainer/train/preflight.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/io.h"
#include "common/node_name.h"
#include "common/run_lock.h"
#include "common/status.h"
#include "common/stop_signal.h"
#include "common/tunables.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/comm/agree.h"
#include "trainer/train/checkpointing.h"
#include "trainer/train/run_log.h"

/* The number of ranks for which failed is set, or -1 when the ranks cannot even agree. */
static int _failures(dlt_comm *comm, int failed)
{
    dlt_agreement a = dlt_agreement_of_comm(comm);
    dlt_err err = DLT_ERR_INIT;
    int count;
    if (dlt_agree_count(&a, failed, &count, &err) != 0) {
        dlt_rank_say(comm->rank, "%s", err.msg);
        return -1;
    }
    return count;
}

static void _say(dlt_comm *comm, const char *msg)
{
    if (comm->size > 1)
        dlt_rank_say(comm->rank, "%s", msg);
    else
        fprintf(stderr, "dltrain: %s\n", msg);
}

int dlt_preflight_eval_checkpoint(const char *path, dlt_comm *comm)
{
    dlt_checkpoint_info info;
    dlt_err err = DLT_ERR_INIT;
    int rc = dlt_checkpoint_verify(path, &info, &err), bad;
    if (rc != 0) {
        _say(comm, err.msg);
        if (comm->rank == 0 && rc == -ENOENT)
            fprintf(stderr, "dltrain: nothing evaluated: %s does not exist\n", path);
        else if (comm->rank == 0)
            fprintf(stderr, "dltrain: nothing evaluated: a damaged checkpoint would give wrong results; evaluate "
                            "another one (dltrain info --checkpoint FILE --verify checks a file)\n");
    }
    bad = _failures(comm, rc != 0);
    if (bad != 0) {
        if (bad > 0 && rc == 0 && comm->rank == 0)
            fprintf(stderr, "dltrain: %d rank(s) refused the checkpoint (their messages say why): nothing evaluated\n",
                    bad);
        return DLT_RUN_REFUSED;
    }
    if (comm->rank == 0) {
        if (info.verified)
            printf("dltrain: %s verified against %s (%zu bytes, CRC-32 %08x, step %" PRId64 ")\n", path,
                   info.state_path, info.size, info.crc, info.step);
        else
            printf("dltrain: %s is unverified: no state file %s beside it to check its size and CRC against\n", path,
                   info.state_path);
        fflush(stdout);
    }
    return DLT_RUN_DONE;
}

int dlt_verify_checkpoint_cmd(const char *path)
{
    dlt_checkpoint_info info;
    dlt_err err = DLT_ERR_INIT;
    if (dlt_checkpoint_verify(path, &info, &err) != 0) {
        fprintf(stderr, "dltrain: verify: %s\n", err.msg);
        return DLT_RUN_REFUSED;
    }
    if (!info.verified) {
        fprintf(stderr,
                "dltrain: verify: %s parses (%d tensors) but cannot be verified: no state file %s beside it "
                "records its size and CRC\n",
                path, info.tensors, info.state_path);
        return DLT_RUN_REFUSED;
    }
    printf("dltrain: verify: %s OK: %zu bytes and CRC-32 %08x match %s%s; %d tensors, after step %" PRId64
           " (the next step is in epoch %" PRId64 ")\n",
           path, info.size, info.crc, info.state_path,
           info.state_data_verified ? " (which matches the CRC it records for itself)"
                                    : " (written before state files had a CRC of their own)",
           info.tensors, info.step, info.epoch + 1);
    if (info.config[0])
        printf("dltrain: verify: settings: %s\n", info.config);
    if (info.history[0])
        printf("dltrain: verify: changed on resume: %s\n", info.history);
    return DLT_RUN_DONE;
}

/* "PATH: why", without saying the path twice when the reason starts with it. */
static const char *_refusal(const dlt_checkpoint_scan *s, int i, char *buf, size_t len)
{
    const char *path = s->refusal[i].path, *why = s->refusal[i].why;
    if (!strncmp(why, path, strlen(path)))
        snprintf(buf, len, "%.511s", why);
    else
        snprintf(buf, len, "%.1023s: %.511s", path, why);
    return buf;
}

/* One number for what a rank found: the step, -1 no checkpoint at all, -2 none valid. */
static double _outcome(const dlt_checkpoint_scan *s)
{
    return s->found ? (double)s->step : s->candidates > 0 ? -2.0 : -1.0;
}

int dlt_preflight_resume(const char **resume, const char *dir, dlt_comm *comm, char *pathbuf, size_t pathlen)
{
    static dlt_checkpoint_scan s; /* large */
    const char *mode = *resume;
    dlt_err err = DLT_ERR_INIT;
    char line[2048];
    double mine, rank0;
    int fresh_ok, rc, bad;
    if (!mode || (strcmp(mode, "auto") && strcmp(mode, "auto-or-fresh")))
        return DLT_RUN_DONE; /* an explicit path: the trainer loads and checks it */
    fresh_ok = !strcmp(mode, "auto-or-fresh");
    if (!dir) {
        if (comm->rank == 0)
            fprintf(stderr, "dltrain: --resume %s needs --checkpoint-dir DIR (where the run writes its checkpoints)\n",
                    mode);
        return DLT_RUN_REFUSED_USAGE;
    }
    {
        char stage[256];
        snprintf(stage, sizeof(stage), "reading the checkpoints of --checkpoint-dir %s", dir);
        dlt_stop_signal_stage(stage);
    }
#ifdef DLT_TEST_HOOKS
    {
        /* A read that never returns, as on a hard-mounted NFS folder whose server has gone (the
         * scan itself opens nothing that can block): DLT_TEST_BLOCK_IN_SCAN=FIFO opens FIFO for
         * reading, which waits for a writer, and goes on waiting through signals (as a hard mount's
         * read does). */
        const char *fifo = getenv("DLT_TEST_BLOCK_IN_SCAN");
        int fd = -1;
        while (fifo && *fifo && (fd = open(fifo, O_RDONLY | O_CLOEXEC)) < 0 && errno == EINTR)
            ;
        if (fd >= 0)
            close(fd);
    }
#endif
    rc = dlt_checkpoint_scan_dir(dir, &s, &err);
    if (rc != 0)
        _say(comm, err.msg); /* e.g. permission denied: say so rather than start from scratch */
    if ((bad = _failures(comm, rc != 0)) != 0)
        return DLT_RUN_REFUSED;
    /* Every rank must continue from the same checkpoint: rank 0's finding against each rank's. */
    mine = _outcome(&s);
    {
        dlt_agreement a = dlt_agreement_of_comm(comm);
        dlt_agree_values v;
        if (dlt_agree_same(&a, &mine, sizeof(mine), &v, dlt_err_fresh(&err)) != 0) {
            dlt_rank_say(comm->rank, "%s", err.msg);
            return DLT_RUN_REFUSED;
        }
        memcpy(&rank0, dlt_agree_record(&v, 0), sizeof(rank0));
        bad = comm->size - dlt_agree_group_size(&v, 0);
        dlt_agree_values_free(&v);
    }
    if (bad != 0) {
        if (mine != rank0)
            dlt_rank_say(comm->rank, "the newest valid checkpoint in %s is %s here, but rank 0 finds %s", dir,
                         s.found ? s.path : "none", rank0 >= 0 ? "another" : "none");
        if (comm->rank == 0 && bad > 0)
            fprintf(stderr,
                    "dltrain: %d rank(s) see other checkpoints in %s than rank 0: --checkpoint-dir must be one "
                    "directory that every node shares\n",
                    bad, dir);
        return DLT_RUN_REFUSED;
    }
    if (comm->rank == 0 && s.refused > 0) {
        int shown = s.refused < DLT_CKPT_SCAN_MAX ? s.refused : DLT_CKPT_SCAN_MAX;
        if (s.found) {
            for (int i = 0; i < shown; i++)
                fprintf(stderr, "dltrain: skipping checkpoint %s\n", _refusal(&s, i, line, sizeof(line)));
            fprintf(stderr, "dltrain: resuming from the newest complete and valid checkpoint, %s\n", s.path);
        } else {
            fprintf(stderr, "dltrain: %s has %d checkpoint(s) and none is valid:\n", dir, s.candidates);
            for (int i = 0; i < shown; i++)
                fprintf(stderr, "dltrain:   %s\n", _refusal(&s, i, line, sizeof(line)));
            if (s.refused > shown)
                fprintf(stderr, "dltrain:   (and %d more)\n", s.refused - shown);
            if (fresh_ok)
                fprintf(stderr, "dltrain: starting from scratch as --resume auto-or-fresh asks (the files above stay "
                                "where they are)\n");
            else
                fprintf(stderr,
                        "dltrain: not starting from scratch, which would throw the run's progress away: "
                        "restore a valid checkpoint, move these files out of %s, or use --resume auto-or-fresh\n",
                        dir);
        }
    }
    if (comm->rank == 0 && s.found && s.passed > 0) {
        int shown = s.passed < DLT_CKPT_SCAN_MAX ? s.passed : DLT_CKPT_SCAN_MAX;
        for (int i = 0; i < shown; i++)
            fprintf(stderr, "dltrain: passing over checkpoint %s, %s\n", s.passed_over[i].path, s.passed_over[i].why);
        if (s.passed > shown)
            fprintf(stderr, "dltrain:   (and %d more of abandoned lines)\n", s.passed - shown);
    }
    if (!s.found) {
        if (s.candidates > 0 && !fresh_ok)
            return DLT_RUN_REFUSED;
        if (comm->rank == 0 && s.candidates == 0)
            printf("dltrain: no checkpoint in %s: starting from scratch\n", dir);
        *resume = NULL;
        return DLT_RUN_DONE;
    }
    snprintf(pathbuf, pathlen, "%s", s.path);
    *resume = pathbuf;
    return DLT_RUN_DONE;
}

int dlt_preflight_resume_settings(const char *path, const char *now, const char *overrides, dlt_comm *comm)
{
    static dlt_checkpoint_info info; /* large */
    dlt_err err = DLT_ERR_INIT;
    char refused[2048], changed[1024];
    int n = 0, bad;
    if (dlt_checkpoint_verify(path, &info, &err) == 0 && info.verified)
        n = dlt_resume_compare(info.config, now, overrides, refused, sizeof(refused), changed, sizeof(changed));
    bad = _failures(comm, n > 0);
    if (bad < 0)
        return DLT_RUN_REFUSED;
    if (bad == 0)
        return DLT_RUN_DONE;
    if (comm->rank == 0) {
        if (n > 0) {
            char *line = refused;
            fprintf(stderr, "dltrain: --resume %s: this run's settings differ from the checkpoint's:\n", path);
            while (line && *line) {
                char *nl = strchr(line, '\n');
                fprintf(stderr, "dltrain:   %.*s\n", nl ? (int)(nl - line) : (int)strlen(line), line);
                line = nl ? nl + 1 : NULL;
            }
            fprintf(stderr, "dltrain: give the checkpoint's values, or name the settings that may change with "
                            "--resume-override NAME,... (recorded in the new checkpoints)\n");
        } else {
            fprintf(stderr,
                    "dltrain: %d rank(s) find other settings in %s than rank 0: --checkpoint-dir must be "
                    "one directory that every node shares\n",
                    bad, path);
        }
    }
    return n > 0 ? DLT_RUN_REFUSED_USAGE : DLT_RUN_REFUSED;
}

/* Rank 0 can create dir (one level, or with its parents) and a file in it; else msg says why,
 * naming it as `what`. */
static void _probe_dir(const char *dir, int parents, const char *what, char *msg, size_t msglen)
{
    char probe[1200];
    int fd;
    if (parents ? dlt_mkdirs(dir) != 0 : mkdir(dir, 0755) != 0 && errno != EEXIST)
        snprintf(msg, msglen, "cannot create the %s %.1000s: %s", what, dir, strerror(errno));
    else if (snprintf(probe, sizeof(probe), "%.1000s/.dltrain-write-test.%ld", dir, (long)getpid()),
             (fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) < 0)
        snprintf(msg, msglen, "cannot write into the %s %.1000s: %s", what, dir, strerror(errno));
    else {
        close(fd);
        unlink(probe);
    }
}

/* Every rank sees the checkpoint directory rank 0 writes: a file rank 0 makes there, named to all,
 * is looked up by each. Only rank 0 writes checkpoints, but a requeued job may start on other nodes:
 * a directory of rank 0's node only (/tmp, a local disk) would make that job start over from
 * scratch, having found nothing ("no checkpoint"), its progress lost without an error. */
int dlt_preflight_shared_dir(const char *dir, dlt_comm *comm)
{
    char name[128] = "", path[1200], host[64];
    dlt_agreement a = dlt_agreement_of_comm(comm);
    dlt_err err = DLT_ERR_INIT;
    struct stat st;
    int fd = -1, seen, bad;
    if (!dir || comm->size < 2)
        return DLT_RUN_DONE;
    if (comm->rank == 0) {
        dlt_node_name(host, sizeof(host));
        snprintf(name, sizeof(name), ".dltrain-shared-test.%.64s.%ld", host, (long)getpid());
        snprintf(path, sizeof(path), "%.1000s/%s", dir, name);
        if ((fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) < 0)
            name[0] = '\0'; /* the probe above just wrote one: said below as not seen */
        else
            close(fd);
    }
    if (dlt_agree_share(&a, name, sizeof(name), 0, &err) != 0) {
        dlt_rank_say(comm->rank, "%s", err.msg);
        if (comm->rank == 0 && name[0])
            unlink(path);
        return DLT_RUN_REFUSED;
    }
    name[sizeof(name) - 1] = '\0';
    snprintf(path, sizeof(path), "%.1000s/%s", dir, name);
    seen = name[0] && stat(path, &st) == 0;
    if (!seen && comm->rank != 0) {
        dlt_node_name(host, sizeof(host));
        dlt_rank_say(comm->rank, "on node %s, --checkpoint-dir %s does not hold the file rank 0 just made there", host,
                     dir);
    }
    bad = _failures(comm, !seen);
    if (comm->rank == 0 && name[0])
        unlink(path);
    if (bad == 0)
        return DLT_RUN_DONE;
    if (comm->rank == 0 && bad > 0)
        fprintf(stderr,
                "dltrain: %d rank(s) do not see what rank 0 writes in --checkpoint-dir %s: it must be one directory "
                "that every node shares (a job requeued onto other nodes would find no checkpoint there and start "
                "over)\n",
                bad, dir);
    return DLT_RUN_REFUSED_USAGE;
}

int dlt_preflight_outputs(const char *metrics_path, const char *checkpoint_dir, const char *tensorboard_dir,
                          dlt_comm *comm)
{
    char msg[1536] = "";
    if (comm->rank == 0 && metrics_path) {
        dlt_err why = DLT_ERR_INIT;
        FILE *f = dlt_check_parent_dir("--metrics", metrics_path, &why) != 0
                      ? NULL
                      : dlt_fopen_regular("--metrics", metrics_path, "a", &why);
        if (!f)
            snprintf(msg, sizeof(msg), "cannot append to the metrics file: %.1400s", why.msg);
        else
            fclose(f);
    }
    if (comm->rank == 0 && checkpoint_dir && !msg[0])
        _probe_dir(checkpoint_dir, 1, "checkpoint directory", msg, sizeof(msg));
    if (comm->rank == 0 && tensorboard_dir && !msg[0])
        _probe_dir(tensorboard_dir, 1, "TensorBoard directory (--tensorboard)", msg, sizeof(msg));
    if (msg[0])
        fprintf(stderr, "dltrain: %s (rank 0 writes it; checked before training so that no rank waits on it)\n", msg);
    return _failures(comm, msg[0] != 0) != 0 ? DLT_RUN_REFUSED_USAGE : DLT_RUN_DONE;
}

int dlt_preflight_claims(dlt_run_claims *claims, const char *metrics_path, const char *checkpoint_dir,
                         const char *tensorboard_dir, dlt_comm *comm)
{
    dlt_err err = DLT_ERR_INIT;
    int failed = 0;
    dlt_run_claims_init(claims);
    if (comm->rank == 0 && dlt_run_claims_take(claims, metrics_path, checkpoint_dir, tensorboard_dir,
                                               DLT_REQUEUE_LOCK_WAIT_S, &err) != 0) {
        fprintf(stderr, "dltrain: %s\n", err.msg);
        failed = 1;
    }
    /* The other ranks wait here while rank 0 waits for a previous incarnation. */
    if (_failures(comm, failed) != 0) {
        dlt_run_claims_release(claims);
        return DLT_RUN_REFUSED;
    }
    return DLT_RUN_DONE;
}

int dlt_preflight_baseline(const char *path, dlt_comm *comm)
{
    dlt_err err = DLT_ERR_INIT;
    double per_rank;
    int failed = comm->rank == 0 && dlt_run_log_baseline(path, &per_rank, &err) != 0;
    if (failed)
        fprintf(stderr, "dltrain: %s\n", err.msg);
    return _failures(comm, failed) != 0 ? DLT_RUN_REFUSED_USAGE : DLT_RUN_DONE;
}
