/* SPDX-License-Identifier: Apache-2.0 */
/* bench: images/s of training steps (or forward passes) after warm-up, on one batch loaded once or
 * (feed) a new batch every step through the training's input path. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/status.h"
#include "trainer/backend/op_profile.h"
#include "trainer/comm/agree.h"
#include "trainer/train/run.h"
#include "trainer/train/step.h"
#include "trainer/train/step_verbs.h"
#include "trainer/train/trainer.h"

/* One step of the benchmark (i counts from 0 over warm-up and timed steps alike). */
static int _bench_step(dlt_run *r, const dlt_bench_config *b, dlt_step_state *st, int i, int n, int64_t spe)
{
    double res[DLT_RES_COUNT], agree_s;
    int64_t next = i + 1;
    int rc;
    if (b->feed && i > 0 && (rc = dlt_run_load_batch(r, i / spe, i % spe)) != 0)
        return dlt_fail_prefix(r->err, rc, "input");
    if (b->inference) {
        if ((rc = dlt_net_forward(&r->net, 0)) != 0)
            return dlt_fail_prefix(r->err, rc, "forward");
        if (b->feed && next < n)
            dlt_run_prefetch(r, next / spe, next % spe);
        if (b->feed && (rc = r->be->ops->sync(r->be)) != 0)
            return dlt_fail_prefix(r->err, rc, "device");
        if (b->feed)
            dlt_run_release_batches(r);
        return 0;
    }
    /* The training step as the loop queues it, with its one wait. */
    if ((rc = dlt_step_queue(r, st, 0.01, 0, &agree_s)) != 0)
        return rc;
    if (b->feed && next < n)
        dlt_run_prefetch(r, next / spe, next % spe);
    if ((rc = dlt_run_read_results(r, res)) != 0)
        return rc;
    if (b->feed)
        dlt_run_release_batches(r);
    return 0;
}

/* Images/s of training steps (or forward passes). Without feed, one batch is loaded once; with
 * feed, every step takes a new batch through the training's input path: read (decoded from --data,
 * or generated) into the backend's host memory, its copy queued while the step before runs. With
 * profile, as many steps again follow the timed ones with every backend call timed (prof): the
 * images/s come from steps that ran unwrapped. */
static int _measure(dlt_run *r, const dlt_bench_config *b, double *seconds, dlt_op_profile *prof)
{
    int64_t spe;
    double t0 = 0;
    dlt_step_state st = {0};
    const int n = b->warmup + b->iters, total = n + (b->profile ? b->iters : 0);
    int rc;
    dlt_net_init_params(&r->net, r->cfg.seed, 1);
    /* Generated images: made once per ring slot, so that --feed measures the path into the device,
     * not the generator (a batch of 256 at 224x224 takes about 14 ms of the training thread). */
    if (b->feed && !r->cfg.data)
        dlt_source_reuse_generated(&r->src);
    if ((rc = dlt_net_upload(&r->net)) != 0 || (rc = dlt_source_start(&r->src, 0, 0, r->err)) != 0 ||
        (rc = dlt_run_load_batch(r, 0, 0)) != 0)
        return dlt_fail_prefix(r->err, rc, "setup");
    spe = dlt_source_steps_per_epoch(&r->src);
    spe = spe > 0 ? spe : 1;
    for (int i = 0; i < n; i++) {
        if (i == b->warmup)
            t0 = dlt_now();
        if ((rc = _bench_step(r, b, &st, i, total, spe)) != 0)
            return rc;
    }
    if ((rc = r->be->ops->sync(r->be)) != 0)
        return dlt_fail_prefix(r->err, rc, "device");
    *seconds = dlt_now() - t0;
    if (!b->profile)
        return 0;
    dlt_op_profile_attach(prof, r->be);
    for (int i = n; i < total && rc == 0; i++)
        if ((rc = dlt_op_profile_step_begin(prof)) == 0 && (rc = _bench_step(r, b, &st, i, total, spe)) == 0)
            rc = dlt_op_profile_step_end(prof);
    dlt_op_profile_detach(prof);
    return rc ? dlt_fail_prefix(r->err, rc, "profiled steps") : 0;
}

static void _report(const dlt_run *r, const dlt_bench_config *b, double el, const dlt_op_profile *prof)
{
    const dlt_train_config *c = &r->cfg;
    double ips = (double)b->iters * c->model.batch * r->comm->size / el;
    double flops = (double)r->net.model.macs * 2 * (b->inference ? 1 : 3);
    if (r->comm->rank != 0)
        return;
    if (b->json) {
        printf("{\"arch\":\"%s\",\"image\":%d,\"batch\":%d,\"ranks\":%d,\"precision\":\"%s\",\"mode\":\"%s\","
               "\"feed\":%s,\"iters\":%d,\"images_per_s\":%.3f,\"tflops\":%.4f",
               c->model.arch, c->model.image, c->model.batch, r->comm->size, dlt_precision_name(c->backend.precision),
               b->inference ? "inference" : "train", b->feed ? "true" : "false", b->iters, ips, ips * flops * 1e-12);
        if (b->profile) {
            printf(",");
            dlt_op_profile_json(prof, stdout);
        }
        printf("}\n");
    } else {
        printf("dltrain: bench %s %dx%d batch %d x %d rank(s) %s %s%s: %.2f images/s (%.3f TFLOP/s at %.3g GFLOP "
               "per image)\n",
               c->model.arch, c->model.image, c->model.image, c->model.batch, r->comm->size,
               dlt_precision_name(c->backend.precision), b->inference ? "inference" : "training",
               !b->feed      ? ""
               : r->cfg.data ? ", a new batch every step"
                             : ", a batch of the ring every step (generated once)",
               ips, ips * flops * 1e-12, flops * 1e-9);
        if (b->profile)
            dlt_op_profile_print(prof, stdout,
                                 r->be->timer ? "on the GPU's stream with CUDA events"
                                              : "on the host clock, the CPU's ops being finished when they return");
    }
    fflush(stdout);
}

/* The training input path alone: batches taken from the loader's ring as fast as its workers fill
 * it (read, decode, crop, flip, into the backend's host memory), nothing computed. Images/s of all
 * ranks, per rank and per worker, and the GPUs that feeds at b->per_gpu images/s each. */
static int _measure_input(dlt_run *r, const dlt_bench_config *b, double *seconds, int64_t *bad)
{
    double t0 = 0;
    int64_t spe;
    int rc;
    if ((rc = dlt_source_start(&r->src, 0, 0, r->err)) != 0)
        return dlt_fail_prefix(r->err, rc, "setup");
    spe = dlt_source_steps_per_epoch(&r->src);
    spe = spe > 0 ? spe : 1;
    for (int i = 0; i < b->warmup + b->iters; i++) {
        const uint8_t *images;
        const int32_t *labels;
        if (i == b->warmup)
            t0 = dlt_now();
        if ((rc = dlt_source_acquire(&r->src, i / spe, i % spe, &images, &labels, r->err)) != 0)
            return dlt_fail_prefix(r->err, rc, "input");
        dlt_source_release(&r->src);
    }
    *seconds = dlt_now() - t0;
    *bad = dlt_source_bad_images(&r->src);
    /* The slowest rank sets the pace of a synchronous job. */
    if (r->comm->size > 1) {
        dlt_agreement a = dlt_agreement_of_comm(r->comm);
        double v[2] = {*seconds, (double)*bad}, *all;
        if ((rc = dlt_agree_gather(&a, v, sizeof(v), (void **)&all, r->err)) != 0)
            return rc;
        *bad = 0;
        for (int k = 0; k < r->comm->size; k++) {
            if (all[2 * k] > *seconds)
                *seconds = all[2 * k];
            *bad += (int64_t)all[2 * k + 1];
        }
        free(all);
    }
    return 0;
}

/* The one measured per-GPU rate: ResNet-50 (v1.5, width 1) at 224x224, 1000 classes, on an H200
 * with this trainer (tests/device/go.sh --only ops,bench; doc/gpu.md), by precision. fp32 and tf32
 * were not measured. */
#define DLT_REF_FP16_IPS 7138.0
#define DLT_REF_BF16_IPS 6588.0

typedef enum { DLT_PER_GPU_NONE, DLT_PER_GPU_GIVEN, DLT_PER_GPU_MEASURED, DLT_PER_GPU_ESTIMATE } dlt_per_gpu_from;

typedef struct {
    dlt_per_gpu_from from;
    double ips;              /* images/s one GPU trains at (0: none) */
    double ref_ips;          /* the measured reference it comes from */
    double ref_gflop, gflop; /* forward GFLOP per image of the reference and of the run's model */
} dlt_per_gpu;

/* The images/s per GPU that "feeds N GPUs" compares with: --per-gpu as given; else the measured
 * reference for the run's precision, as measured for the reference model itself (any class count) and scaled by
 * forward FLOPs per image for any other model or size (an estimate: small images run below the
 * FLOPs ratio on a GPU); none for fp32 and tf32. */
static dlt_per_gpu _per_gpu(const dlt_train_config *c, const dlt_bench_config *b)
{
    dlt_per_gpu g = {DLT_PER_GPU_NONE, 0, 0, 0, 0};
    dlt_model_config ref, run = c->model;
    dlt_model mr, mm;
    dlt_err err = DLT_ERR_INIT;
    if (b->per_gpu > 0) {
        g.from = DLT_PER_GPU_GIVEN;
        g.ips = b->per_gpu;
        return g;
    }
    g.ref_ips = c->backend.precision == DLT_PREC_FP16   ? DLT_REF_FP16_IPS
                : c->backend.precision == DLT_PREC_BF16 ? DLT_REF_BF16_IPS
                                                        : 0;
    if (g.ref_ips == 0)
        return g;
    memset(&ref, 0, sizeof(ref));
    if (dlt_model_parse_arch("resnet50", &ref, &err) != 0)
        return g;
    ref.width = 1.0f;
    ref.image = 224;
    ref.classes = 1000;
    ref.batch = run.batch = 1;
    if (dlt_model_build(&mr, &ref, &err) != 0)
        return g;
    if (dlt_model_build(&mm, &run, &err) == 0) {
        g.ref_gflop = (double)mr.macs * 1e-9;
        g.gflop = (double)mm.macs * 1e-9;
        /* The class count changes only the classifier (0.05% of ResNet-50's FLOPs at 1000). */
        if (!run.v1 && run.depth == 50 && run.width == 1.0f && run.image == 224) {
            g.from = DLT_PER_GPU_MEASURED;
            g.ips = g.ref_ips;
        } else if (mm.macs > 0) {
            g.from = DLT_PER_GPU_ESTIMATE;
            g.ips = g.ref_ips * (double)mr.macs / (double)mm.macs;
        }
        dlt_model_free(&mm);
    }
    dlt_model_free(&mr);
    return g;
}

static const char *_per_gpu_from_name(dlt_per_gpu_from f)
{
    return f == DLT_PER_GPU_GIVEN      ? "given"
           : f == DLT_PER_GPU_MEASURED ? "measured"
           : f == DLT_PER_GPU_ESTIMATE ? "estimate"
                                       : "none";
}

static void _report_input(const dlt_run *r, const dlt_bench_config *b, double el, int64_t bad)
{
    const dlt_train_config *c = &r->cfg;
    double ips = (double)b->iters * c->model.batch * r->comm->size / el;
    int workers = c->workers > 0 ? c->workers : 1;
    const char *prec = dlt_precision_name(c->backend.precision);
    dlt_per_gpu g;
    if (r->comm->rank != 0)
        return;
    g = _per_gpu(c, b);
    if (b->json) {
        printf("{\"mode\":\"input\",\"image\":%d,\"batch\":%d,\"ranks\":%d,\"workers\":%d,\"iters\":%d,"
               "\"images_per_s\":%.3f,\"per_rank\":%.3f,\"per_worker\":%.3f,",
               c->model.image, c->model.batch, r->comm->size, workers, b->iters, ips, ips / r->comm->size,
               ips / r->comm->size / workers);
        if (g.ips > 0)
            printf("\"per_gpu\":%.1f,\"gpus_fed\":%.3f,", g.ips, ips / g.ips);
        else
            printf("\"per_gpu\":null,\"gpus_fed\":null,");
        printf("\"per_gpu_from\":\"%s\",\"precision\":\"%s\",\"bad_images\":%lld,\"synthetic\":%s}\n",
               _per_gpu_from_name(g.from), prec, (long long)bad, c->data ? "false" : "true");
    } else {
        printf("dltrain: bench input path %dx%d%s, batch %d x %d rank(s), %d worker(s) per rank: %.1f images/s "
               "(%.1f per rank, %.1f per worker)\n",
               c->model.image, c->model.image, c->data ? "" : " (generated images, not decoded)", c->model.batch,
               r->comm->size, workers, ips, ips / r->comm->size, ips / r->comm->size / workers);
        if (g.from == DLT_PER_GPU_NONE)
            printf("dltrain: no per-GPU rate is known for %s (one was measured for fp16 and bf16 only): pass "
                   "--per-gpu N, the images/s one GPU trains %s %dx%d %s at (dltrain bench there), to see how many "
                   "GPUs this input path feeds\n",
                   prec, c->model.arch, c->model.image, c->model.image, prec);
        else {
            printf("dltrain: that feeds %.2f GPU(s) at %s%.0f images/s each (", ips / g.ips,
                   g.from == DLT_PER_GPU_ESTIMATE ? "about " : "", g.ips);
            if (g.from == DLT_PER_GPU_GIVEN)
                printf("--per-gpu");
            else if (g.from == DLT_PER_GPU_MEASURED)
                printf("ResNet-50 224x224 %s on an H200, measured with this trainer; --per-gpu N for another GPU",
                       prec);
            else
                printf("an estimate for %s %dx%d %s: ResNet-50 224x224 %s on an H200, %.0f images/s measured, scaled "
                       "by forward GFLOP per image %.3g / %.3g; --per-gpu N for a measured rate",
                       c->model.arch, c->model.image, c->model.image, prec, prec, g.ref_ips, g.ref_gflop, g.gflop);
            printf("); %d worker(s) per GPU would be needed\n", (int)(g.ips / (ips / r->comm->size / workers) + 0.999));
        }
        if (bad > 0)
            printf("dltrain: %lld unreadable image(s) were skipped: the figure counts the images read in their "
                   "place\n",
                   (long long)bad);
    }
    fflush(stdout);
}

int dlt_bench_run(const dlt_train_config *c, const dlt_bench_config *b, dlt_comm *comm, dlt_err *err)
{
    dlt_run r;
    double el = 0;
    int64_t bad = 0;
    dlt_op_profile *prof = NULL;
    int rc;
    if (b->profile && (b->input_only || c->cuda_graphs))
        return dlt_fail(err, -EINVAL, "bench --profile times each backend call of a step: %s",
                        b->input_only ? "--input-only runs none (leave out one of the two)"
                                      : "inside a CUDA graph there are none to time (leave out --cuda-graphs)");
    if (b->profile && !(prof = calloc(1, sizeof(*prof))))
        return dlt_fail(err, -ENOMEM, "bench --profile: cannot allocate the profile (%zu bytes)", sizeof(*prof));
    rc = dlt_run_open(&r, c, comm, b->input_only ? DLT_RUN_INPUT : DLT_RUN_BENCH, err);
    if (rc == 0 && b->input_only && (rc = _measure_input(&r, b, &el, &bad)) == 0)
        _report_input(&r, b, el, bad);
    else if (rc == 0 && !b->input_only && (rc = _measure(&r, b, &el, prof)) == 0)
        _report(&r, b, el, prof);
    dlt_run_close(&r, rc != 0);
    free(prof);
    return rc;
}
