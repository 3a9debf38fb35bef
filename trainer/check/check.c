/* SPDX-License-Identifier: Apache-2.0 */
/* check: the health check: GEMM per rank, the all-reduce sweep, the isolation steps, the verdict. */
#include "config.h"

#include "trainer/check/check.h"

#include "trainer/comm/agree.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/env_contract.h"
#include "common/status.h"
#include "trainer/backend/cuda_module.h"
#include "trainer/check/allreduce_check.h"
#include "trainer/check/gemm_check.h"

#define DLT_CHECK_MAX_POINTS 40

void dlt_check_defaults(dlt_check_config *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->device = -1;
    cfg->gemm_seconds = 0.5;
    cfg->fraction = 0.85;
    cfg->min_bytes = 8;
    cfg->max_bytes = (size_t)256 << 20;
    cfg->isolate = 1;
    cfg->budget_s = 60;
}

/* Rank 0's progress line on stderr: "dltrain check: [  12.3 s] ...". */
static void _say(const dlt_check_config *cfg, const dlt_comm *comm, double elapsed, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void _say(const dlt_check_config *cfg, const dlt_comm *comm, double elapsed, const char *fmt, ...)
{
    va_list ap;
    char line[512];
    if (!cfg->progress || comm->rank != 0)
        return;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    fprintf(stderr, "dltrain check: [%6.1f s] %s\n", elapsed, line);
    fflush(stderr);
}

static void _size_name(size_t b, char *out, size_t len)
{
    if (b >= ((size_t)1 << 30) && b % ((size_t)1 << 30) == 0)
        snprintf(out, len, "%zu GiB", b >> 30);
    else if (b >= ((size_t)1 << 20) && b % ((size_t)1 << 20) == 0)
        snprintf(out, len, "%zu MiB", b >> 20);
    else if (b >= 1024 && b % 1024 == 0)
        snprintf(out, len, "%zu KiB", b >> 10);
    else
        snprintf(out, len, "%zu B", b);
}

typedef struct {
    const dlt_check_config *cfg;
    const dlt_comm *comm;
} _sweep_say;

/* A line per size from 1 MiB (the small ones take milliseconds). */
static void _on_point(const dlt_ar_point *p, double elapsed, void *arg)
{
    const _sweep_say *s = arg;
    char b[32];
    if (p->bytes < ((size_t)1 << 20) || s->comm->size < 2)
        return;
    _size_name(p->bytes, b, sizeof(b));
    _say(s->cfg, s->comm, elapsed, "all-reduce %s: %d x %.3g ms, busbw %.3g GB/s%s", b, p->iters, p->seconds * 1e3,
         p->busbw, p->wrong ? ", SUMS WRONG" : "");
}

/* What each rank found, gathered to every rank through PMIx. */
typedef struct {
    int rank, local_rank, node_rank, wrong, row, col, failed;
    double got, want, tflops, seconds;
    char host[64], model[64], device[64], dtype[8];
    char intra[24]; /* the link class expected between this node's ranks */
    char nic[48];   /* the NIC the plugin chose, with its sysfs speed */
    char why[160];  /* failed: the GEMM could not run */
} _rank_rec;

/* The link class the plugin's placement implies within a node: NVLink when the NCCL topology file
 * it wrote has NVLink elements, else PCIe between GPUs; shared memory between CPU ranks. */
static void _intra_class(const dlt_check_config *cfg, char *out, size_t len)
{
    const char *topo = getenv(DLT_ENV_NCCL_TOPO_FILE);
    char buf[4096];
    FILE *f;
    size_t n;
    snprintf(out, len, "%s", cfg->gpu ? "PCIe" : "shared memory");
    if (!cfg->gpu || !topo || !(f = fopen(topo, "r")))
        return;
    while ((n = fread(buf, 1, sizeof(buf) - 1, f)) > 0) {
        buf[n] = '\0';
        if (strstr(buf, "<nvlink")) {
            snprintf(out, len, "NVLink");
            break;
        }
    }
    fclose(f);
}

/* DLT_NIC (the plugin's choice for this task) and its speed from sysfs. */
static void _nic_class(char *out, size_t len)
{
    const char *nic = getenv(DLT_ENV_NIC);
    char path[256], speed[32] = "";
    FILE *f;
    if (!nic || !*nic || strchr(nic, '/')) {
        snprintf(out, len, "network");
        return;
    }
    snprintf(path, sizeof(path), "/sys/class/net/%s/speed", nic);
    if ((f = fopen(path, "r"))) {
        if (!fgets(speed, sizeof(speed), f))
            speed[0] = '\0';
        fclose(f);
    }
    speed[strcspn(speed, "\n")] = '\0';
    if (atoi(speed) > 0)
        snprintf(out, len, "NIC %.20s %d Gb/s", nic, atoi(speed) / 1000 ? atoi(speed) / 1000 : 0);
    else
        snprintf(out, len, "NIC %.20s", nic);
}

static int _cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double _median(double *v, int n)
{
    if (n <= 0)
        return 0;
    qsort(v, (size_t)n, sizeof(double), _cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The median TFLOP/s of the ranks whose GEMM ran with the same device model as rank i. */
static double _model_median(const _rank_rec *all, int n, int i)
{
    double *v = malloc((size_t)n * sizeof(double)), m;
    int k = 0;
    if (!v)
        return 0;
    for (int j = 0; j < n; j++)
        if (!all[j].failed && !strcmp(all[j].model, all[i].model))
            v[k++] = all[j].tflops;
    m = _median(v, k);
    free(v);
    return m;
}

/* TEST ONLY: DLT_TEST_FAULT_GEMM_RANK=R makes rank R's GEMM result wrong in one entry, so the tests
 * see the check (and --preflight) name a rank that computes wrong numbers. Off when unset. */
static void _test_fault_gemm(int rank, float *c, int n)
{
#ifdef DLT_TEST_HOOKS
    const char *v = getenv("DLT_TEST_FAULT_GEMM_RANK");
    if (v && *v && atoi(v) == rank && n > 1)
        c[(size_t)(n / 2) * n + n / 3] += 1.0f;
#else
    (void)rank, (void)c, (void)n;
#endif
}

/* This rank's GEMM, timed and verified, into me. */
static void _gemm(const dlt_check_config *cfg, int rank, _rank_rec *me)
{
    int n = cfg->gemm_n > 0 ? cfg->gemm_n : cfg->gpu ? 8192 : 1024, rc;
    float *c = malloc((size_t)n * n * sizeof(float));
    dlt_gemm_timing t;
    dlt_err err = DLT_ERR_INIT;
    memset(&t, 0, sizeof(t));
    if (!c) {
        me->failed = 1;
        snprintf(me->why, sizeof(me->why), "no memory for a %d x %d result", n, n);
        return;
    }
    if (cfg->gpu) {
        const dlt_cuda_module *m = dlt_cuda_module_get(&err);
        rc = m ? m->gemm_run(cfg->device, cfg->precision, n, cfg->gemm_seconds, c, &t, &err) : -ENOTSUP;
    } else
        rc = dlt_gemm_run_cpu(n, cfg->gemm_seconds, c, &t, &err);
    if (rc != 0) {
        me->failed = 1;
        snprintf(me->why, sizeof(me->why), "%.159s", err.msg);
    } else {
        _test_fault_gemm(rank, c, n);
        me->wrong = dlt_gemm_verify(c, n, &me->row, &me->col, &me->got, &me->want);
        me->tflops = t.tflops;
        me->seconds = t.seconds;
        snprintf(me->model, sizeof(me->model), "%s", t.model);
        snprintf(me->device, sizeof(me->device), "%s", t.device);
        snprintf(me->dtype, sizeof(me->dtype), "%s", t.dtype);
    }
    free(c);
}

typedef struct {
    int nodes;
    double *intra; /* per node: busbw among its ranks (0: one rank there) */
    double cross;  /* one rank per node */
    double *pair;  /* nodes x nodes: busbw of the two nodes' first ranks (0: not measured) */
    size_t bytes;
    int pairs_run;
} _isolation;

/* The circle method: in round r of k (even) nodes, node i meets the returned node. */
static int _partner(int i, int r, int k)
{
    int m = k - 1;
    if (i == m)
        return r;
    if (i == r)
        return m;
    return ((2 * r - i) % m + m) % m;
}

static int _isolate(const dlt_check_config *cfg, const _rank_rec *all, dlt_comm *comm, _isolation *iso, double t0)
{
    const _rank_rec *me = &all[comm->rank];
    int k = iso->nodes, rc, even = k + (k % 2);
    char b[32];
    double *vec = calloc((size_t)k * k + 1, sizeof(double));
    if (!vec)
        return dlt_fail(comm->err, -ENOMEM, "out of memory");
    _size_name(iso->bytes, b, sizeof(b));
    _say(cfg, comm, dlt_now() - t0, "isolation at %s: within each of the %d node(s)", b, k);
    /* Within each node. */
    if ((rc = dlt_ar_group_point(comm, me->node_rank, me->local_rank, iso->bytes, cfg->iters, vec, me->node_rank, k)) !=
        0)
        goto out;
    memcpy(iso->intra, vec, (size_t)k * sizeof(double));
    /* One rank per node. */
    if (k > 1) {
        _say(cfg, comm, dlt_now() - t0, "isolation: one rank per node across the %d nodes", k);
        if ((rc = dlt_ar_group_point(comm, me->local_rank == 0 ? 0 : -1, me->node_rank, iso->bytes, cfg->iters, vec, 0,
                                     1)) != 0)
            goto out;
        iso->cross = vec[0];
    }
    /* Node pairs, when more than two nodes and the cross-node figure is low (or asked for). */
    if (k > 2 && (cfg->pairs || iso->cross < 0 || (cfg->min_busbw > 0 && iso->cross < cfg->min_busbw))) {
        iso->pairs_run = 1;
        for (int r = 0; r < even - 1; r++) {
            _say(cfg, comm, dlt_now() - t0, "isolation: node pairs, round %d of %d", r + 1, even - 1);
            int p = _partner(me->node_rank, r, even), lo = me->node_rank < p ? me->node_rank : p;
            int in = me->local_rank == 0 && p < k && p != me->node_rank;
            if ((rc = dlt_ar_group_point(comm, in ? lo : -1, me->node_rank, iso->bytes, cfg->iters, vec,
                                         in ? lo * k + (lo == me->node_rank ? p : me->node_rank) : -1, k * k)) != 0)
                goto out;
            for (int j = 0; j < k * k; j++)
                if (vec[j] != 0)
                    iso->pair[j] = iso->pair[(j % k) * k + j / k] = vec[j];
        }
    }
out:
    free(vec);
    return rc;
}

/* The isolation size: the largest size measured whose phases (within nodes, across nodes, node
 * pairs: each its timed loop, warm-up and checked all-reduce, at the full communicator's time per
 * all-reduce) fit what is left of the budget; the smallest when none does. Agreed figures only. */
static size_t _isolation_bytes(const dlt_check_config *cfg, const dlt_ar_point *pts, int np, int nodes, double elapsed)
{
    int phases = 1 + (nodes > 1) + (nodes > 2 ? nodes + (nodes % 2) - 1 : 0);
    if (np <= 0)
        return 8;
    if (cfg->budget_s <= 0)
        return pts[np - 1].bytes;
    for (int i = np - 1; i > 0; i--)
        if (elapsed + phases * pts[i].seconds * (pts[i].iters + 2) <= cfg->budget_s)
            return pts[i].bytes;
    return pts[0].bytes;
}

/* The first rank of node `node` (its host name and links). */
static const _rank_rec *_node_rec(const _rank_rec *all, int n, int node)
{
    for (int i = 0; i < n; i++)
        if (all[i].node_rank == node)
            return &all[i];
    return &all[0];
}

typedef struct {
    int status;
    char lines[16][320]; /* named problems */
    int nlines;
    char hosts[16][64]; /* the hosts they are on, each once (what a job script excludes) */
    int nhosts;
} _verdict;

static void _name_host(_verdict *v, const char *host)
{
    for (int i = 0; i < v->nhosts; i++)
        if (!strcmp(v->hosts[i], host))
            return;
    if (v->nhosts < 16)
        snprintf(v->hosts[v->nhosts++], sizeof(v->hosts[0]), "%s", host);
}

static void _name(_verdict *v, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void _name(_verdict *v, int status, const char *fmt, ...)
{
    va_list ap;
    if (status > v->status)
        v->status = status;
    if (v->nlines < 16) {
        va_start(ap, fmt);
        vsnprintf(v->lines[v->nlines++], sizeof(v->lines[0]), fmt, ap);
        va_end(ap);
    }
}

static const char *_status_name(int s)
{
    return s == DLT_CHECK_BROKEN ? "broken" : s == DLT_CHECK_DEGRADED ? "degraded" : "healthy";
}

/* Figures to the verdict: the same on every rank (same inputs, same arithmetic). */
static void _judge(const dlt_check_config *cfg, const _rank_rec *all, int n, const dlt_ar_point *pts, int np,
                   const _isolation *iso, _verdict *v)
{
    for (int i = 0; i < n; i++) {
        const _rank_rec *r = &all[i];
        double med = _model_median(all, n, i);
        if (r->failed || r->wrong || (n > 1 && med > 0 && r->tflops < cfg->fraction * med) ||
            (cfg->min_tflops > 0 && r->tflops < cfg->min_tflops))
            _name_host(v, r->host);
        if (r->failed)
            _name(v, DLT_CHECK_BROKEN, "rank %d (host %s, local rank %d): GEMM could not run: %s", i, r->host,
                  r->local_rank, r->why);
        else if (r->wrong)
            _name(v, DLT_CHECK_BROKEN,
                  "rank %d (host %s, local rank %d, %s%s): GEMM result wrong: C[%d][%d] = %.17g, "
                  "exact %.17g",
                  i, r->host, r->local_rank, cfg->gpu ? "GPU " : "", r->device, r->row, r->col, r->got, r->want);
        else if (n > 1 && med > 0 && r->tflops < cfg->fraction * med)
            _name(v, DLT_CHECK_DEGRADED,
                  "rank %d (host %s, local rank %d, %s%s): GEMM %.4g TFLOP/s, %.2f of the median "
                  "%.4g of %s (limit %.2f)",
                  i, r->host, r->local_rank, cfg->gpu ? "GPU " : "", r->device, r->tflops, r->tflops / med, med,
                  r->model, cfg->fraction);
        else if (cfg->min_tflops > 0 && r->tflops < cfg->min_tflops)
            _name(v, DLT_CHECK_DEGRADED,
                  "rank %d (host %s, local rank %d, %s%s): GEMM %.4g TFLOP/s, below --min-tflops "
                  "%g",
                  i, r->host, r->local_rank, cfg->gpu ? "GPU " : "", r->device, r->tflops, cfg->min_tflops);
    }
    for (int i = 0; i < np; i++)
        if (pts[i].wrong > 0)
            _name(v, DLT_CHECK_BROKEN,
                  "all-reduce of %zu bytes over %d ranks: %lld element(s) differ from the exact sum", pts[i].bytes, n,
                  pts[i].wrong);
    if (np > 0 && cfg->min_busbw > 0 && n > 1 && pts[np - 1].busbw < cfg->min_busbw)
        _name(v, DLT_CHECK_DEGRADED, "all-reduce of %zu bytes over %d ranks: busbw %.3g GB/s, below --min-busbw %g",
              pts[np - 1].bytes, n, pts[np - 1].busbw, cfg->min_busbw);
    if (!iso)
        return;
    {
        double *v2 = malloc((size_t)iso->nodes * sizeof(double)), med;
        int k = 0;
        for (int i = 0; v2 && i < iso->nodes; i++)
            if (iso->intra[i] > 0)
                v2[k++] = iso->intra[i];
        med = v2 ? _median(v2, k) : 0;
        free(v2);
        for (int i = 0; i < iso->nodes; i++) {
            const _rank_rec *r = _node_rec(all, n, i);
            if (iso->intra[i] < 0 || (iso->intra[i] > 0 && k > 1 && iso->intra[i] < cfg->fraction * med))
                _name_host(v, r->host);
            if (iso->intra[i] < 0)
                _name(v, DLT_CHECK_BROKEN, "node %s: all-reduce among its ranks gave wrong sums", r->host);
            else if (iso->intra[i] > 0 && k > 1 && iso->intra[i] < cfg->fraction * med)
                _name(v, DLT_CHECK_DEGRADED,
                      "node %s: busbw among its ranks %.3g GB/s (%s), %.2f of the nodes' median "
                      "%.3g",
                      r->host, iso->intra[i], r->intra, iso->intra[i] / med, med);
        }
    }
    if (iso->cross < 0)
        _name(v, DLT_CHECK_BROKEN, "all-reduce across nodes (one rank per node) gave wrong sums");
    else if (iso->nodes > 1 && cfg->min_busbw > 0 && iso->cross < cfg->min_busbw)
        _name(v, DLT_CHECK_DEGRADED, "across nodes (one rank per node): busbw %.3g GB/s, below --min-busbw %g",
              iso->cross, cfg->min_busbw);
    if (iso->pairs_run) {
        int k = iso->nodes;
        double *all_p = malloc((size_t)k * k * sizeof(double)), med;
        int m = 0;
        for (int i = 0; all_p && i < k; i++)
            for (int j = i + 1; j < k; j++)
                if (iso->pair[i * k + j] > 0)
                    all_p[m++] = iso->pair[i * k + j];
        med = all_p ? _median(all_p, m) : 0;
        free(all_p);
        for (int i = 0; i < k; i++) {
            int low = 0, seen = 0;
            for (int j = 0; j < k; j++)
                if (j != i && iso->pair[i * k + j] != 0) {
                    seen++;
                    low += iso->pair[i * k + j] < cfg->fraction * med;
                }
            if (seen > 1 && low == seen) /* every pair with this node is low: the node (or its NIC) */
                _name_host(v, _node_rec(all, n, i)->host);
            if (seen > 1 && low == seen)
                _name(v, DLT_CHECK_DEGRADED,
                      "node %s: every node pair with it is below %.2f of the pairs' median "
                      "%.3g GB/s (%s)",
                      _node_rec(all, n, i)->host, cfg->fraction, med, _node_rec(all, n, i)->nic);
        }
        for (int i = 0; i < k; i++)
            for (int j = i + 1; j < k; j++)
                if (iso->pair[i * k + j] < 0 ||
                    (iso->pair[i * k + j] > 0 && iso->pair[i * k + j] < cfg->fraction * med))
                    _name(v, iso->pair[i * k + j] < 0 ? DLT_CHECK_BROKEN : DLT_CHECK_DEGRADED,
                          "link %s - %s: busbw %.3g GB/s (pairs' median %.3g)", _node_rec(all, n, i)->host,
                          _node_rec(all, n, j)->host, iso->pair[i * k + j], med);
    }
}

static void _print_table(const dlt_check_config *cfg, const _rank_rec *all, int n, const char *comm_name,
                         const dlt_ar_point *pts, int np, const _isolation *iso, const _verdict *v, FILE *out)
{
    fprintf(out, "dltrain check: %d rank(s) on %d node(s), communicator %s, GEMM %dx%d %s\n", n, iso ? iso->nodes : 1,
            comm_name,
            cfg->gemm_n > 0 ? cfg->gemm_n
            : cfg->gpu      ? 8192
                            : 1024,
            cfg->gemm_n > 0 ? cfg->gemm_n
            : cfg->gpu      ? 8192
                            : 1024,
            all[0].dtype[0] ? all[0].dtype : "-");
    fprintf(out, "compute:\n  %4s  %-12s %5s  %-16s %-24s %10s %7s  %s\n", "rank", "host", "local", "device", "model",
            "TFLOP/s", "/median", "result");
    for (int i = 0; i < n; i++) {
        double med = _model_median(all, n, i);
        fprintf(out, "  %4d  %-12.12s %5d  %-16.16s %-24.24s %10.4f %7.2f  %s\n", i, all[i].host, all[i].local_rank,
                all[i].device, all[i].model, all[i].tflops, med > 0 ? all[i].tflops / med : 0,
                all[i].failed  ? "failed"
                : all[i].wrong ? "WRONG"
                               : "exact");
    }
    if (n == 1) {
        /* One rank exchanges nothing: a time would measure a local copy, not a link. */
        long long wrong = 0;
        for (int i = 0; i < np; i++)
            wrong += pts[i].wrong;
        fprintf(out, "all-reduce: one rank, no all-reduce to measure (bandwidth needs two ranks or more)");
        if (np > 0)
            fprintf(out, "; sums at %d size(s), %zu to %zu bytes: %s", np, pts[0].bytes, pts[np - 1].bytes,
                    wrong ? "WRONG" : "exact");
        fprintf(out, "\n");
    } else
        fprintf(out, "all-reduce (%d ranks, %s, float32 sum):\n  %12s %6s %12s %11s %11s %6s\n", n, comm_name, "bytes",
                "iters", "time_us", "algbw_GB/s", "busbw_GB/s", "wrong");
    for (int i = 0; n > 1 && i < np; i++)
        fprintf(out, "  %12zu %6d %12.1f %11.4g %11.4g %6lld\n", pts[i].bytes, pts[i].iters, pts[i].seconds * 1e6,
                pts[i].algbw, pts[i].busbw, pts[i].wrong);
    if (iso) {
        fprintf(out, "isolation (%zu bytes):\n", iso->bytes);
        for (int i = 0; i < iso->nodes; i++) {
            const _rank_rec *r = _node_rec(all, n, i);
            if (iso->intra[i] != 0)
                fprintf(out, "  within %-12.12s busbw %9.4g GB/s   expected link: %s\n", r->host, iso->intra[i],
                        r->intra);
        }
        if (iso->nodes > 1)
            fprintf(out, "  across nodes         busbw %9.4g GB/s   expected link: %s\n", iso->cross, all[0].nic);
        for (int i = 0; iso->pairs_run && i < iso->nodes; i++)
            for (int j = i + 1; j < iso->nodes; j++)
                fprintf(out, "  pair %s - %s busbw %9.4g GB/s\n", _node_rec(all, n, i)->host,
                        _node_rec(all, n, j)->host, iso->pair[i * iso->nodes + j]);
    }
    fprintf(out, "verdict: %s (exit status %d)\n", _status_name(v->status), v->status);
    for (int i = 0; i < v->nlines; i++)
        fprintf(out, "  %s\n", v->lines[i]);
}

/* JSON strings here come from host names, CPU/GPU model names and our own messages: escape what
 * JSON requires. */
static void _json_str(FILE *out, const char *s)
{
    fputc('"', out);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(out, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(out, "\\u%04x", (unsigned char)*s);
        else
            fputc(*s, out);
    }
    fputc('"', out);
}

static void _print_json(const _rank_rec *all, int n, const char *comm_name, const dlt_ar_point *pts, int np,
                        const _isolation *iso, const _verdict *v, FILE *out)
{
    fprintf(out, "{\"verdict\":\"%s\",\"exit_status\":%d,\"ranks\":%d,\"communicator\":", _status_name(v->status),
            v->status, n);
    _json_str(out, comm_name);
    fprintf(out, ",\"compute\":[");
    for (int i = 0; i < n; i++) {
        fprintf(out, "%s{\"rank\":%d,\"host\":", i ? "," : "", i);
        _json_str(out, all[i].host);
        fprintf(out, ",\"local_rank\":%d,\"device\":", all[i].local_rank);
        _json_str(out, all[i].device);
        fprintf(out, ",\"model\":");
        _json_str(out, all[i].model);
        fprintf(out, ",\"dtype\":\"%s\",\"tflops\":%.6g,\"seconds\":%.6g,\"exact\":%s}", all[i].dtype, all[i].tflops,
                all[i].seconds, !all[i].failed && !all[i].wrong ? "true" : "false");
    }
    fprintf(out, "],\"allreduce\":[");
    /* One rank: the sums only, the times left out as null (a local copy, not a link). */
    for (int i = 0; n == 1 && i < np; i++)
        fprintf(out,
                "%s{\"bytes\":%zu,\"iters\":%d,\"time_us\":null,\"algbw_gbs\":null,\"busbw_gbs\":null,\"wrong\":%lld}",
                i ? "," : "", pts[i].bytes, pts[i].iters, pts[i].wrong);
    for (int i = 0; n > 1 && i < np; i++)
        fprintf(
            out, "%s{\"bytes\":%zu,\"iters\":%d,\"time_us\":%.3f,\"algbw_gbs\":%.6g,\"busbw_gbs\":%.6g,\"wrong\":%lld}",
            i ? "," : "", pts[i].bytes, pts[i].iters, pts[i].seconds * 1e6, pts[i].algbw, pts[i].busbw, pts[i].wrong);
    fprintf(out, "]");
    if (n == 1)
        fprintf(out, ",\"allreduce_note\":\"one rank: no all-reduce to measure, sums checked\"");
    if (iso) {
        fprintf(out, ",\"isolation\":{\"bytes\":%zu,\"within_node\":[", iso->bytes);
        for (int i = 0, first = 1; i < iso->nodes; i++)
            if (iso->intra[i] != 0) {
                fprintf(out, "%s{\"host\":", first ? "" : ",");
                _json_str(out, _node_rec(all, n, i)->host);
                fprintf(out, ",\"busbw_gbs\":%.6g,\"expected_link\":", iso->intra[i]);
                _json_str(out, _node_rec(all, n, i)->intra);
                fprintf(out, "}");
                first = 0;
            }
        fprintf(out, "],\"across_nodes_busbw_gbs\":%.6g,\"pairs\":[", iso->cross);
        for (int i = 0, first = 1; iso->pairs_run && i < iso->nodes; i++)
            for (int j = i + 1; j < iso->nodes; j++) {
                fprintf(out, "%s{\"hosts\":[", first ? "" : ",");
                _json_str(out, _node_rec(all, n, i)->host);
                fputc(',', out);
                _json_str(out, _node_rec(all, n, j)->host);
                fprintf(out, "],\"busbw_gbs\":%.6g}", iso->pair[i * iso->nodes + j]);
                first = 0;
            }
        fprintf(out, "]}");
    }
    fprintf(out, ",\"named_hosts\":[");
    for (int i = 0; i < v->nhosts; i++) {
        fprintf(out, "%s", i ? "," : "");
        _json_str(out, v->hosts[i]);
    }
    fprintf(out, "],\"named\":[");
    for (int i = 0; i < v->nlines; i++) {
        fprintf(out, "%s", i ? "," : "");
        _json_str(out, v->lines[i]);
    }
    fprintf(out, "]}\n");
}

int dlt_check_run(const dlt_check_config *cfg, dltpmix_ctx *px, dlt_comm *comm, FILE *out, dlt_err *err)
{
    const dltpmix_info *info = dltpmix_get_info(px);
    int n = comm->size, np = 0, rc = 0;
    _rank_rec me, *all = calloc((size_t)n, sizeof(_rank_rec));
    dlt_ar_point pts[DLT_CHECK_MAX_POINTS];
    _isolation iso;
    _verdict v;
    double t0 = dlt_now();
    int gemm_n = cfg->gemm_n > 0 ? cfg->gemm_n
                 : cfg->gpu      ? 8192
                                 : 1024,
        nodes = info->node_count > 0 ? info->node_count : 1;
    int isolating = cfg->isolate && n > 1 && comm->ops->split;
    size_t max_bytes = cfg->max_bytes;
    _sweep_say said = {cfg, comm};
    dlt_ar_budget budget = {t0, 0, _on_point, &said, 0, 0};
    char lo[32], hi[32];
    memset(&me, 0, sizeof(me));
    memset(&iso, 0, sizeof(iso));
    memset(&v, 0, sizeof(v));
    if (!all)
        return dlt_fail(err, -ENOMEM, "out of memory"), 1;
    me.rank = comm->rank;
    me.local_rank = info->local_rank;
    me.node_rank = info->node_rank;
    snprintf(me.host, sizeof(me.host), "%.63s", info->hostname);
    _intra_class(cfg, me.intra, sizeof(me.intra));
    _nic_class(me.nic, sizeof(me.nic));
    _size_name(cfg->min_bytes, lo, sizeof(lo));
    _size_name(max_bytes, hi, sizeof(hi));
    if (n == 1)
        _say(cfg, comm, 0,
             "1 rank on 1 node: GEMM %d x %d; one rank: no all-reduce to measure (its sums are still checked, %s "
             "to %s)",
             gemm_n, gemm_n, lo, hi);
    else if (cfg->budget_s > 0)
        _say(cfg, comm, 0,
             "%d rank(s) on %d node(s), %s: GEMM %d x %d per rank, all-reduce %s to %s%s; expect at most "
             "about %.0f s (--seconds)",
             n, nodes, comm->ops->name, gemm_n, gemm_n, lo, hi, isolating ? ", then isolation" : "", cfg->budget_s);
    else
        _say(cfg, comm, 0, "%d rank(s) on %d node(s), %s: GEMM %d x %d per rank, all-reduce %s to %s%s; no time budget",
             n, nodes, comm->ops->name, gemm_n, gemm_n, lo, hi, isolating ? ", then isolation" : "");
    /* Every rank computes at once, as in training: a rank that shares its device or CPUs shows. */
    if ((rc = comm->ops->barrier(comm)) != 0)
        goto fail;
    _gemm(cfg, comm->rank, &me);
    {
        dlt_agreement a = dlt_agreement_of_pmix(px);
        void *got;
        if ((rc = dlt_agree_gather(&a, &me, sizeof(me), &got, err)) != 0) {
            dlt_fail_prefix(err, rc, "gathering the GEMM results");
            goto out;
        }
        memcpy(all, got, (size_t)n * sizeof(_rank_rec));
        free(got);
    }
    _say(cfg, comm, dlt_now() - t0, "GEMM done on every rank (rank 0: %.4g TFLOP/s, %s)", all[0].tflops,
         all[0].failed  ? "could not run"
         : all[0].wrong ? "WRONG"
                        : "exact");
    /* Many ranks on one node share its memory: the largest size shrinks so that the busiest node's
     * buffers stay within 2 GiB (the same on every rank: from the gathered local ranks). */
    if (!cfg->max_bytes_given) {
        int per_node = 1;
        for (int r = 0; r < n; r++)
            if (all[r].local_rank + 1 > per_node)
                per_node = all[r].local_rank + 1;
        if (((size_t)2 << 30) / (size_t)per_node < max_bytes)
            max_bytes = ((size_t)2 << 30) / (size_t)per_node;
        if (max_bytes < cfg->min_bytes)
            max_bytes = cfg->min_bytes;
    }
    /* The sweep gets the budget, less a share kept for isolation. */
    budget.seconds = cfg->budget_s > 0 ? cfg->budget_s * (isolating ? 0.6 : 1.0) : 0;
    if ((rc = dlt_ar_sweep(comm, cfg->min_bytes, max_bytes, cfg->iters, pts, DLT_CHECK_MAX_POINTS, &np, &budget)) != 0)
        goto fail;
    if (budget.cut && np > 0) {
        _size_name(pts[np - 1].bytes, hi, sizeof(hi));
        _say(cfg, comm, budget.elapsed,
             "all-reduce sweep stops at %s: the next size would not end within --seconds "
             "%.0f",
             hi, cfg->budget_s);
    }
    if (isolating) {
        iso.nodes = nodes;
        iso.bytes = _isolation_bytes(cfg, pts, np, nodes, budget.elapsed);
        iso.intra = calloc((size_t)iso.nodes, sizeof(double));
        iso.pair = calloc((size_t)iso.nodes * iso.nodes, sizeof(double));
        if (!iso.intra || !iso.pair) {
            rc = dlt_fail(err, -ENOMEM, "out of memory");
            goto out;
        }
        if ((rc = _isolate(cfg, all, comm, &iso, t0)) != 0)
            goto fail;
    }
    _judge(cfg, all, n, pts, np, iso.intra ? &iso : NULL, &v);
    if (comm->rank == 0) {
        if (cfg->json)
            _print_json(all, n, comm->ops->name, pts, np, iso.intra ? &iso : NULL, &v, out);
        else if (cfg->quiet && v.status != DLT_CHECK_HEALTHY)
            for (int i = 0; i < v.nlines; i++)
                fprintf(out, "dltrain: preflight %s: %s\n", _status_name(v.status), v.lines[i]);
        else if (cfg->quiet && n == 1)
            fprintf(out,
                    "dltrain: preflight healthy: GEMM %.4g TFLOP/s (%s, 1 rank, every result exact); one rank: no "
                    "all-reduce to measure\n",
                    all[0].tflops, all[0].dtype);
        else if (cfg->quiet)
            fprintf(out,
                    "dltrain: preflight healthy: GEMM %.4g TFLOP/s (%s, %d rank(s), every result exact), "
                    "all-reduce %zu bytes busbw %.3g GB/s (sums exact)\n",
                    all[0].tflops, all[0].dtype, n, np > 0 ? pts[np - 1].bytes : 0, np > 0 ? pts[np - 1].busbw : 0);
        else
            _print_table(cfg, all, n, comm->ops->name, pts, np, iso.intra ? &iso : NULL, &v, out);
        fflush(out);
    }
    /* The named rank says it too, in its own output (its job log may be the one read). */
    if (me.failed || me.wrong)
        fprintf(stderr, "dltrain: rank %d (host %s, local rank %d, %s%s): GEMM %s%s\n", comm->rank, me.host,
                me.local_rank, cfg->gpu ? "GPU " : "", me.device[0] ? me.device : "?",
                me.failed ? "could not run: " : "result wrong", me.failed ? me.why : "");
    rc = v.status;
    goto out;
fail:
    if (err != comm->err)
        dlt_fail_take(err, comm->err);
out:
    free(iso.intra);
    free(iso.pair);
    free(all);
    return rc < 0 ? 1 : rc;
}

int dlt_check_preflight(int full, const dlt_backend_config *be, dltpmix_ctx *px, dlt_comm *comm)
{
    dlt_check_config cfg;
    dlt_err err = DLT_ERR_INIT;
    int rc;
    dlt_check_defaults(&cfg);
    cfg.gpu = dlt_backend_is_gpu(be);
    cfg.device = be->device;
    cfg.precision = be->precision;
    cfg.quiet = 1; /* one line when healthy, the named problems otherwise */
    if (!full) {
        cfg.gemm_n = cfg.gpu ? 4096 : 512;
        cfg.gemm_seconds = 0.2;
        cfg.min_bytes = (size_t)64 << 10;
        cfg.max_bytes = (size_t)1 << 20;
        cfg.iters = 5;
        cfg.isolate = 0;
    }
    rc = dlt_check_run(&cfg, px, comm, stderr, &err);
    if (rc == 1)
        dlt_rank_say(comm->rank, "preflight could not run: %s", err.msg);
    else if (rc != 0 && comm->rank == 0)
        fprintf(stderr,
                "dltrain: preflight (%s) found the job %s: every rank stops before the first step, exit "
                "status %d (dltrain check on these nodes gives the full report)\n",
                full ? "full" : "quick", _status_name(rc), rc);
    return rc;
}
