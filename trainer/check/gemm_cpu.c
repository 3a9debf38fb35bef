/* SPDX-License-Identifier: Apache-2.0 */
/* gemm_cpu: the check's GEMM through oneDNN (dnnl_sgemm, the library the CPU backend computes
 * with), fp32: oneDNN's C API has no bf16 GEMM, so a bf16 run's check measures fp32. */
#include "config.h"

#include "trainer/check/gemm_check.h"

#include <dnnl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/affinity.h"
#include "common/clock.h"
#include "common/status.h"

static void _cpu_model(char *out, size_t len)
{
    char line[256];
    FILE *f = fopen("/proc/cpuinfo", "r");
    snprintf(out, len, "cpu");
    while (f && fgets(line, sizeof(line), f)) {
        char *v = strchr(line, ':');
        if (!strncmp(line, "model name", 10) && v) {
            v += 1 + (v[1] == ' ');
            v[strcspn(v, "\n")] = '\0';
            snprintf(out, len, "%s", v);
            break;
        }
    }
    if (f)
        fclose(f);
}

/* "cpu 0-3": the CPUs this rank may run on (what a busy neighbour would share). */
static void _cpu_list(char *out, size_t len)
{
    char list[sizeof(((dlt_gemm_timing *)0)->device)];
    if (dlt_affinity_list(list, sizeof(list)) < 0)
        snprintf(out, len, "cpu ?");
    else
        snprintf(out, len, "cpu %.59s", list);
}

int dlt_gemm_run_cpu(int n, double budget_s, float *c, dlt_gemm_timing *t, dlt_err *err)
{
    size_t nn = (size_t)n * n;
    float *a = malloc(nn * sizeof(float)), *b = malloc(nn * sizeof(float));
    double t0, elapsed = 0;
    int iters = 0;
    dnnl_status_t st = dnnl_success;
    memset(t, 0, sizeof(*t));
    if (!a || !b) {
        free(a);
        free(b);
        return dlt_fail(err, -ENOMEM, "GEMM check: no memory for two %d x %d matrices", n, n);
    }
    for (int i = 0; i < n; i++)
        for (int k = 0; k < n; k++) {
            a[(size_t)i * n + k] = dlt_gemm_value_a(i, k);
            b[(size_t)i * n + k] = dlt_gemm_value_b(i, k);
        }
    st = dnnl_sgemm('N', 'N', n, n, n, 1.f, a, n, b, n, 0.f, c, n); /* warm-up: oneDNN's kernels ready */
    t0 = dlt_now();
    while (st == dnnl_success && (iters < 3 || elapsed < budget_s) && iters < 1000) {
        st = dnnl_sgemm('N', 'N', n, n, n, 1.f, a, n, b, n, 0.f, c, n);
        iters++;
        elapsed = dlt_now() - t0;
    }
    free(a);
    free(b);
    if (st != dnnl_success)
        return dlt_fail(err, -EIO, "GEMM check: dnnl_sgemm(%d x %d) failed with oneDNN status %d", n, n, (int)st);
    t->n = n;
    t->iters = iters;
    t->seconds = elapsed / iters;
    t->tflops = 2.0 * n * (double)n * n / t->seconds / 1e12;
    t->dtype = "fp32";
    _cpu_model(t->model, sizeof(t->model));
    _cpu_list(t->device, sizeof(t->device));
    return 0;
}
