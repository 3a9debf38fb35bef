/* SPDX-License-Identifier: Apache-2.0 */
/* straggler: per-interval exchange of the ranks' step timings and the slow-rank verdict. */
#include "config.h"

#include "trainer/train/straggler.h"

#include "trainer/comm/agree.h"

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/affinity.h"
#include "common/clock.h"
#include "common/env_contract.h"
#include "common/status.h"

static int _cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double _median(const double *v, int n, double *tmp)
{
    if (tmp != v)
        memcpy(tmp, v, (size_t)n * sizeof(double));
    qsort(tmp, (size_t)n, sizeof(double), _cmp);
    return n % 2 ? tmp[n / 2] : 0.5 * (tmp[n / 2 - 1] + tmp[n / 2]);
}

int dlt_straggler_judge(const double *compute, const double *data, int n, double factor, int *slow_c, int *slow_d)
{
    double *tmp = malloc((size_t)n * sizeof(double)), mc, md;
    int worst = 0;
    if (!tmp)
        return -1;
    mc = _median(compute, n, tmp);
    md = _median(data, n, tmp);
    free(tmp);
    for (int i = 0; i < n; i++) {
        slow_c[i] = n > 1 && mc > 0 && compute[i] > factor * mc;
        slow_d[i] = n > 1 && data[i] > factor * md && data[i] - md > 0.1 * mc;
        if (compute[i] + data[i] > compute[worst] + data[worst])
            worst = i;
    }
    return worst;
}

void dlt_straggler_init(dlt_straggler *s, const char *host, const dlt_backend_config *be)
{
    const char *local = getenv("SLURM_LOCALID") ? getenv("SLURM_LOCALID") : getenv(DLT_ENV_LOCAL_RANK);
    char dev[64], id[64];
    memset(s, 0, sizeof(*s));
    s->factor = DLT_STRAGGLER_FACTOR;
    s->windows = DLT_STRAGGLER_WINDOWS;
    if (dlt_backend_is_gpu(be)) {
        dlt_backend_gpu_id(be->device < 0 ? 0 : be->device, id, sizeof(id));
        snprintf(dev, sizeof(dev), "GPU %.59s", id);
    } else {
        char list[sizeof(dev)];
        dlt_affinity_list(list, sizeof(list)); /* "" when unreadable: "cpu " as before */
        snprintf(dev, sizeof(dev), "cpu %.59s", list);
    }
    snprintf(s->me, sizeof(s->me), "host %.32s, local rank %.6s, %.36s", host, local ? local : "?", dev);
}

/* The first interval: room for every rank, and their identities. */
static int _open(dlt_straggler *s, dlt_comm *comm)
{
    s->size = comm->size;
    s->rank = comm->rank;
    s->ids = calloc((size_t)comm->size, DLT_STRAGGLER_ID);
    s->streak_c = calloc((size_t)comm->size, sizeof(int));
    s->streak_d = calloc((size_t)comm->size, sizeof(int));
    s->slowest = calloc((size_t)comm->size, sizeof(int64_t));
    s->ratio_sum = calloc((size_t)comm->size, sizeof(double));
    s->buf = calloc(2 * (size_t)comm->size, sizeof(double));
    if (!s->ids || !s->streak_c || !s->streak_d || !s->slowest || !s->ratio_sum || !s->buf)
        return dlt_fail(comm->err, -ENOMEM, "out of memory");
    memcpy(s->ids[comm->rank], s->me, DLT_STRAGGLER_ID);
    return 0;
}

/* The identities, gathered the first time a rank is named (every rank decides alike when), so a
 * run without stragglers pays one exchange per interval and nothing more. */
static int _gather_ids(dlt_straggler *s, dlt_comm *comm)
{
    dlt_agreement a = dlt_agreement_of_comm(comm);
    void *all;
    int rc;
    if (s->have_ids)
        return 0;
    if ((rc = dlt_agree_gather(&a, s->me, DLT_STRAGGLER_ID, &all, comm->err)) != 0)
        return rc;
    memcpy(s->ids, all, (size_t)comm->size * DLT_STRAGGLER_ID);
    free(all);
    s->have_ids = 1;
    return 0;
}

/* Each rank's n doubles of mine into n columns of buf: rank k's i-th at buf[i * size + k]. */
static int _gather_doubles(dlt_comm *comm, const double *mine, int n, double *buf)
{
    dlt_agreement a = dlt_agreement_of_comm(comm);
    double *all;
    int rc;
    if ((rc = dlt_agree_gather(&a, mine, (size_t)n * sizeof(double), (void **)&all, comm->err)) != 0)
        return rc;
    for (int k = 0; k < comm->size; k++)
        for (int i = 0; i < n; i++)
            buf[(size_t)i * (size_t)comm->size + (size_t)k] = all[(size_t)k * (size_t)n + (size_t)i];
    free(all);
    return 0;
}

static int _interval(dlt_straggler *s, dlt_comm *comm, dlt_run_log *log, int64_t step)
{
    double *c = s->buf, *d = s->buf + s->size, *tmp;
    int *slow_c = NULL, *slow_d = NULL, worst, rc = 0;
    double own[2] = {s->compute_s / s->steps, s->data_s / s->steps};
    s->compute_s = s->data_s = 0;
    s->steps = 0;
    if ((rc = _gather_doubles(comm, own, 2, s->buf)) != 0) /* compute into c, data into d */
        return rc;
    slow_c = calloc((size_t)s->size, sizeof(int));
    slow_d = calloc((size_t)s->size, sizeof(int));
    tmp = calloc((size_t)s->size, sizeof(double));
    if (!slow_c || !slow_d || !tmp || (worst = dlt_straggler_judge(c, d, s->size, s->factor, slow_c, slow_d)) < 0) {
        rc = dlt_fail(comm->err, -ENOMEM, "out of memory");
        goto out;
    }
    s->intervals++;
    s->slowest[worst]++;
    for (int i = 0; i < s->size; i++)
        tmp[i] = c[i] + d[i];
    {
        double med = _median(tmp, s->size, tmp);
        s->ratio_sum[worst] += med > 0 ? (c[worst] + d[worst]) / med : 1;
    }
    for (int i = 0; i < s->size; i++) {
        s->streak_c[i] = slow_c[i] ? s->streak_c[i] + 1 : 0;
        s->streak_d[i] = slow_d[i] ? s->streak_d[i] + 1 : 0;
        if (((s->streak_c[i] && s->streak_c[i] % s->windows == 0) ||
             (s->streak_d[i] && s->streak_d[i] % s->windows == 0)) &&
            (rc = _gather_ids(s, comm)) != 0)
            goto out;
    }
    for (int i = 0; i < s->size; i++) {
        for (int k = 0; k < 2; k++) {
            int streak = k ? s->streak_d[i] : s->streak_c[i];
            const char *kind = k ? "data" : "compute";
            double mine = k ? d[i] : c[i], med;
            if (streak == 0 || streak % s->windows != 0 || s->rank != 0)
                continue; /* said by rank 0, once per `windows` slow intervals */
            for (int j = 0; j < s->size; j++)
                tmp[j] = k ? d[j] : c[j];
            med = _median(tmp, s->size, tmp);
            dlt_log_warn(log,
                         "straggler: rank %d (%s) %s %.3f s/step, %.2fx the median %.3f s, %d intervals in a row "
                         "(to step %" PRId64 ")",
                         i, s->ids[i], kind, mine, med > 0 ? mine / med : 0, med, streak, step);
            dlt_run_log_event(log, "straggler", "POINT_IN_TIME", NULL,
                              "\"step_num\":%" PRId64
                              ",\"rank\":%d,\"id\":\"%s\",\"kind\":\"%s\",\"seconds_per_step\":%.6f,"
                              "\"median\":%.6f,\"ratio\":%.4f,\"intervals\":%d",
                              step, i, s->ids[i], kind, mine, med, med > 0 ? mine / med : 0, streak);
        }
    }
out:
    free(slow_c);
    free(slow_d);
    free(tmp);
    return rc;
}

int dlt_straggler_step(dlt_straggler *s, dlt_comm *comm, dlt_run_log *log, int64_t step, double compute_s,
                       double data_s, int interval_end)
{
    double t0 = dlt_now();
    int rc = 0;
    s->compute_s += compute_s > 0 ? compute_s : 0;
    s->data_s += data_s > 0 ? data_s : 0;
    s->steps++;
    if (!interval_end || comm->size < 2 || s->steps < DLT_STRAGGLER_MIN_STEPS)
        return 0;
    if (!s->buf)
        rc = _open(s, comm);
    if (rc == 0)
        rc = _interval(s, comm, log, step);
    s->cost_s += dlt_now() - t0;
    return rc;
}

int dlt_straggler_summary(dlt_straggler *s, dlt_comm *comm, const dlt_run_log *log, double run_s)
{
    int worst = 0, rc;
    double lo, hi;
    if (s->size < 2 || s->intervals == 0 || !s->slowest)
        return 0;
    /* Each rank's own cost: the rank that waited least at the exchanges shows what the exchange
     * itself costs; the others' figures add the wait for a slower peer, which the next step's
     * all-reduce would have paid anyway. */
    if ((rc = _gather_ids(s, comm)) != 0 || (rc = _gather_doubles(comm, &s->cost_s, 1, s->buf)) != 0 || s->rank != 0)
        return rc;
    lo = hi = s->buf[0];
    for (int i = 1; i < s->size; i++) {
        if (s->slowest[i] > s->slowest[worst])
            worst = i;
        lo = s->buf[i] < lo ? s->buf[i] : lo;
        hi = s->buf[i] > hi ? s->buf[i] : hi;
    }
    dlt_log(log, DLT_LOG_QUIET,
            "slowest rank: %d (%s), slowest in %" PRId64 " of %" PRId64 " intervals (%.0f%%), "
            "%.2fx the median step then; straggler check: %" PRId64 " exchanges, %.3f s of %.1f s (%.2f%%) on the "
            "rank that waited least, %.3f s (%.2f%%) with the waits for slower peers",
            worst, s->ids[worst], s->slowest[worst], s->intervals,
            100.0 * (double)s->slowest[worst] / (double)s->intervals, s->ratio_sum[worst] / (double)s->slowest[worst],
            s->intervals, lo, run_s, run_s > 0 ? 100 * lo / run_s : 0, hi, run_s > 0 ? 100 * hi / run_s : 0);
    return 0;
}

void dlt_straggler_close(dlt_straggler *s)
{
    free(s->ids);
    free(s->streak_c);
    free(s->streak_d);
    free(s->slowest);
    free(s->ratio_sum);
    free(s->buf);
    memset(s, 0, sizeof(*s));
}
