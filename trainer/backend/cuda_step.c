/* SPDX-License-Identifier: Apache-2.0 */
/* cuda_step: what the CUDA backend runs around the layers of a training step: the input ring
 * (pinned batches copied on their own stream), the loss with its labels, the step's results as
 * device doubles read once per step, the flat optimizer over the parameter buffer (and its
 * low-precision twin), and the recording and replay of a step as a CUDA graph. */
#include "config.h"

#include <cuda_runtime.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/backend/cuda_internal.h"
#include "trainer/backend/cuda_kernels.h"

static void *_host_alloc(dlt_backend *be, size_t bytes)
{
    void *p = NULL;
    (void)be;
    /* Pinned: the copy engine reads it directly, so input_stage's copy is truly asynchronous. */
    return cudaMallocHost(&p, bytes ? bytes : 1) == cudaSuccess ? p : NULL;
}

static void _host_free(dlt_backend *be, void *p)
{
    (void)be;
    if (p)
        cudaFreeHost(p);
}

static int _input_stage(dlt_backend *be, const uint8_t *src, size_t pixels)
{
    cuda_backend *c = _cu(be);
    size_t bytes = pixels * 3;
    int slot, rc;
    if (c->in_count == DLT_INPUT_STAGED) {
        return dlt_fail(be->err, -EBUSY, "%d batches staged already (normalize_input consumes them)", DLT_INPUT_STAGED);
    }
    slot = (c->in_head + c->in_count) % DLT_INPUT_STAGED;
    if (c->in[slot].cap < bytes) {
        /* The first batch (or a larger one): nothing may still read or fill the old buffer (the
         * waits poll the peer check: a lost NCCL peer ends them). */
        if ((rc = dlt_cu_wait(be, c->s)) != 0 ||
            (rc = _grow(be, (void **)&c->in[slot].dev, NULL, &c->in[slot].cap, bytes, c->copy)) != 0)
            return rc;
    }
    /* The slot's previous batch must have been normalized before the copy overwrites it. */
    DLT_TRY(be->err, DLT_CUDA_CHECK(be->err, cudaStreamWaitEvent(c->copy, c->in[slot].consumed, 0)));
    DLT_TRY(be->err,
            DLT_CUDA_CHECK(be->err, cudaMemcpyAsync(c->in[slot].dev, src, bytes, cudaMemcpyHostToDevice, c->copy)));
    DLT_TRY(be->err, DLT_CUDA_CHECK(be->err, cudaEventRecord(c->in[slot].staged, c->copy)));
    c->in[slot].pixels = pixels;
    c->in_count++;
    return 0;
}

static int _normalize_input(dlt_backend *be, float *dst, size_t pixels, const float mean[3], const float inv_std[3])
{
    cuda_backend *c = _cu(be);
    int slot = c->in_head;
    if (c->in_count == 0 || c->in[slot].pixels != pixels) {
        return dlt_fail(be->err, -EINVAL, "normalize_input of %zu pixels: %s", pixels,
                        c->in_count ? "the staged batch differs in size" : "no batch staged");
    }
    DLT_TRY(be->err, DLT_CUDA_CHECK(be->err, cudaStreamWaitEvent(c->s, c->in[slot].staged, 0)));
    DLT_TRY(be->err, DLT_CUDA_CHECK(be->err, dlt_k_normalize(c->in[slot].dev, dst, c->dt, pixels, mean, inv_std,
                                                             (dlt_stream)c->s)));
    DLT_TRY(be->err, DLT_CUDA_CHECK(be->err, cudaEventRecord(c->in[slot].consumed, c->s)));
    c->in_head = (slot + 1) % DLT_INPUT_STAGED;
    c->in_count--;
    return 0;
}

/* ---- the step's results: device doubles, read once per step */

static int _results_reset(dlt_backend *be)
{
    DLT_TRY(be->err,
            DLT_CUDA_CHECK(be->err, cudaMemsetAsync(be->results, 0, DLT_RES_COUNT * sizeof(double), _cu(be)->s)));
    return 0;
}

static int _results_put(dlt_backend *be, int slot, double value)
{
    cuda_backend *c = _cu(be);
    int rc;
    if ((rc = dlt_results_slot_check(slot, be->err)) != 0)
        return rc;
    /* The slot's pinned source may still be read by its previous copy: only a second put of one
     * slot between two reads waits (the training step puts each slot at most once). */
    if (!c->capturing && (c->put_pending & (1u << slot)) && (rc = dlt_cu_wait(be, c->s)) != 0)
        return rc;
    c->pin_res->put[slot] = value; /* recorded: each replay sets it (dlt_step_inputs) */
    DLT_TRY(be->err, DLT_CUDA_CHECK(be->err, cudaMemcpyAsync(be->results + slot, &c->pin_res->put[slot], sizeof(double),
                                                             cudaMemcpyHostToDevice, c->s)));
    if (!c->capturing)
        c->put_pending |= 1u << slot;
    return 0;
}

static int _results_read(dlt_backend *be, double *host)
{
    cuda_backend *c = _cu(be);
    int rc;
    if (c->capturing) {
        return dlt_fail(be->err, -EINVAL,
                        "the step's results cannot be read while the step is recorded as a CUDA graph");
    }
    DLT_TRY(be->err,
            DLT_CUDA_CHECK(be->err, cudaMemcpyAsync(c->pin_res->read, be->results, DLT_RES_COUNT * sizeof(double),
                                                    cudaMemcpyDeviceToHost, c->s)));
    if ((rc = dlt_cu_wait(be, c->s)) != 0)
        return rc;
    memcpy(host, c->pin_res->read, DLT_RES_COUNT * sizeof(double));
    return 0;
}

/* The step's labels from host memory into the pinned buffer the (recorded) copy reads. */
static int _stage_labels(dlt_backend *be, const int32_t *labels, int n)
{
    cuda_backend *c = _cu(be);
    /* The previous copy out of the buffer must have run before it is refilled (it has, in a
     * training step: the results read of the last step waited for everything). Not while
     * recording: capture_begin waited, and a recorded step makes no copy now. */
    int rc;
    /* Polled, with the peer check between polls, like every other host wait: a copy queued
     * behind a reduction with a lost peer would otherwise block here for good. */
    if (!c->capturing && (rc = dlt_cuda_event_wait(c->labels_free, be->peers, be->err)) != 0)
        return rc;
    memcpy(c->pin_labels, labels, (size_t)n * sizeof(int32_t));
    return 0;
}

static int _softmax_xent(dlt_backend *be, const float *logits, const int32_t *labels, int n, int k, float smoothing,
                         float loss_scale, float *dlogits)
{
    cuda_backend *c = _cu(be);
    double *res = be->results;
    int rc;
    if ((rc = _grow(be, (void **)&c->d_labels, (void **)&c->pin_labels, &c->labels_size, (size_t)n * sizeof(int32_t),
                    c->s)) != 0 ||
        (rc = _stage_labels(be, labels, n)) != 0)
        return rc;
    DLT_TRY(be->err, DLT_CUDA_CHECK(be->err, cudaMemcpyAsync(c->d_labels, c->pin_labels, (size_t)n * sizeof(int32_t),
                                                             cudaMemcpyHostToDevice, c->s)));
    if (!c->capturing)
        DLT_TRY(be->err, DLT_CUDA_CHECK(be->err, cudaEventRecord(c->labels_free, c->s)));
    DLT_TRY(be->err, DLT_CUDA_CHECK(be->err, dlt_k_softmax_xent(logits, c->dt, c->d_labels, n, k, smoothing, loss_scale,
                                                                dlogits, res + DLT_RES_LOSS, res + DLT_RES_TOP1,
                                                                res + DLT_RES_TOP5, res + DLT_RES_BAD_LABELS,
                                                                res + DLT_RES_NONFINITE_ROWS, (dlt_stream)c->s)));
    return 0;
}

static int _count_nonfinite(dlt_backend *be, const float *x, size_t n)
{
    DLT_TRY(be->err, DLT_CUDA_CHECK(be->err, dlt_k_count_nonfinite(x, n, be->results + DLT_RES_NONFINITE,
                                                                   (dlt_stream)_cu(be)->s)));
    return 0;
}

static int _checksum(dlt_backend *be, const float *x, size_t n, double *sum)
{
    cuda_backend *c = _cu(be);
    int rc;
    if (!c->sum_scratch)
        DLT_TRY(be->err, DLT_CUDA_CHECK(be->err, cudaMalloc((void **)&c->sum_scratch, dlt_k_checksum_scratch())));
    DLT_TRY(be->err, DLT_CUDA_CHECK(be->err, dlt_k_checksum(x, n, c->sum_scratch, c->d_checksum, (dlt_stream)c->s)));
    DLT_TRY(be->err, DLT_CUDA_CHECK(be->err, cudaMemcpyAsync(&c->pin_res->checksum, c->d_checksum, sizeof(double),
                                                             cudaMemcpyDeviceToHost, c->s)));
    if ((rc = dlt_cu_wait(be, c->s)) != 0)
        return rc;
    *sum = c->pin_res->checksum;
    return 0;
}

/* ---- the flat optimizer */

static int _sgd_plan(dlt_backend *be, float *params, size_t n, const dlt_param_segment *segs, int nsegs)
{
    cuda_backend *c = _cu(be);
    dlt_sgd_chunk *chunks = NULL;
    size_t count = 0, k = 0;
    int rc = 0;
    if ((rc = dlt_param_segments_check(segs, nsegs, n, be->err)) != 0)
        return rc;
    /* The convolutions are planned by now: their filter-gradient paths (--wgrad-fp32) said once. */
    if (c->wg_planned > c->wg_reported) {
        fprintf(stderr,
                "dltrain: filter gradients: %d of %d convolution geometries written in fp32 by cuDNN's graph API, "
                "the rest in %s and cast (--wgrad-fp32 %s)\n",
                c->wg_graph, c->wg_planned, c->dt == DLT_DT_BF16 ? "bf16" : "fp16",
                c->cfg.wgrad_fp32 == 1   ? "on"
                : c->cfg.wgrad_fp32 == 2 ? "the checks' mode: auto's candidates, untimed"
                                         : "auto: the faster of the two, timed at planning");
        c->wg_reported = c->wg_planned;
    }
    for (int i = 0; i < nsegs; i++)
        count += (segs[i].len + DLT_SGD_CHUNK - 1) / DLT_SGD_CHUNK;
    if (count > (size_t)INT32_MAX) {
        return dlt_fail(be->err, -EINVAL, "%zu parameters are more than one optimizer launch covers", n);
    }
    /* A new plan: the old twin and table go (nothing queued may still read them), and every
     * convolution binds again (plan_gen). */
    DLT_TRY(be->err, DLT_CUDA_CHECK(be->err, cudaStreamSynchronize(c->s)));
    cudaFree(c->d_chunks);
    cudaFree(c->twin);
    c->d_chunks = NULL;
    c->twin = NULL;
    c->nchunks = 0;
    c->params = NULL;
    c->nparams = 0;
    c->stem_op = NULL;
    c->stem_lo = c->stem_hi = 0;
    c->plan_gen++;
    /* Chunks never cross a segment, so each carries its segment's weight decay. */
    if (count && !(chunks = malloc(count * sizeof(*chunks)))) {
        return dlt_fail(be->err, -ENOMEM, "out of memory");
    }
    for (int i = 0; i < nsegs; i++)
        for (size_t o = 0; o < segs[i].len; o += DLT_SGD_CHUNK) {
            size_t len = segs[i].len - o < DLT_SGD_CHUNK ? segs[i].len - o : DLT_SGD_CHUNK;
            chunks[k++] =
                (dlt_sgd_chunk){(uint64_t)(segs[i].off + o), (uint32_t)len, (uint32_t)(segs[i].no_decay != 0)};
        }
    if (count) {
        cudaError_t e = cudaMalloc((void **)&c->d_chunks, count * sizeof(*chunks));
        if (e == cudaSuccess)
            e = cudaMemcpyAsync(c->d_chunks, chunks, count * sizeof(*chunks), cudaMemcpyHostToDevice, c->s);
        if (e != cudaSuccess)
            rc = dlt_cuda_fail(be->err, __FILE__, __LINE__, "uploading the optimizer's chunk table",
                               cudaGetErrorString(e));
        else
            rc = dlt_cu_wait(be, c->s); /* the pageable source is freed below */
    }
    free(chunks);
    if (rc)
        return rc;
    if (c->dt != DLT_DT_F32 && n) {
        DLT_TRY(be->err, DLT_CUDA_CHECK(be->err, cudaMalloc(&c->twin, n * _dt_size(c->dt))));
        DLT_TRY(be->err, DLT_CUDA_CHECK(be->err, cudaMemsetAsync(c->twin, 0, n * _dt_size(c->dt), c->s)));
    }
    c->params = params;
    c->nparams = n;
    c->nchunks = (int)count;
    return 0;
}

static void _sgd_copies(cuda_backend *c, void **twin, void **stem)
{
    *twin = c->twin;
    *stem = c->stem_op ? c->stem_op->w_pad : NULL;
}

static int _sgd_step(dlt_backend *be, float *w, float *v, const float *g, float lr, float mu, float wd,
                     float wd_no_decay, float grad_scale)
{
    cuda_backend *c = _cu(be);
    dlt_sgd_args a;
    if (!c->params || w != c->params) {
        return dlt_fail(be->err, -EINVAL, "sgd_step on a buffer sgd_plan did not name");
    }
    if (!c->nchunks)
        return 0;
    memset(&a, 0, sizeof(a));
    a.w = w;
    a.v = v;
    a.g = g;
    a.chunks = c->d_chunks;
    a.nchunks = c->nchunks;
    a.lr = lr;
    a.mu = mu;
    a.wd = wd;
    a.wd_no_decay = wd_no_decay;
    a.grad_scale = grad_scale;
    a.results = be->results;
    a.slot_loss = DLT_RES_LOSS;
    a.slot_bad_labels = DLT_RES_BAD_LABELS;
    a.slot_nonfinite = DLT_RES_NONFINITE;
    a.slot_input_failed = DLT_RES_INPUT_FAILED;
    _sgd_copies(c, &a.twin, &a.stem);
    a.stem_lo = c->stem_lo;
    a.stem_hi = c->stem_hi;
    a.dt = c->dt;
    if (c->capturing) {
        /* Recorded: the learning rate changes every step, so the recording copies it from pinned
         * memory, which each replay sets (a kernel argument would stay the recorded value). */
        c->pin_res->lr = lr;
        DLT_TRY(be->err, DLT_CUDA_CHECK(be->err, cudaMemcpyAsync(c->d_lr, &c->pin_res->lr, sizeof(float),
                                                                 cudaMemcpyHostToDevice, c->s)));
        a.lr_dev = c->d_lr;
    }
    DLT_TRY(be->err, DLT_CUDA_CHECK(be->err, dlt_k_sgd_flat(&a, (dlt_stream)c->s)));
    return 0;
}

static int _params_loaded(dlt_backend *be)
{
    cuda_backend *c = _cu(be);
    void *twin, *stem;
    if (!c->params)
        return 0;
    _sgd_copies(c, &twin, &stem);
    DLT_TRY(be->err, DLT_CUDA_CHECK(be->err, dlt_k_params_to_lp(c->params, c->nparams, twin, stem, c->stem_lo,
                                                                c->stem_hi, c->dt, (dlt_stream)c->s)));
    return 0;
}

/* ------------------------------------------------------------------ CUDA graphs */

static void _graph_reset(dlt_backend *be)
{
    cuda_backend *c = _cu(be);
    pthread_mutex_lock(&c->graph_mu);
    if (c->graph_exec)
        cudaGraphExecDestroy(c->graph_exec);
    if (c->graph)
        cudaGraphDestroy(c->graph);
    c->graph_exec = NULL;
    c->graph = NULL;
    pthread_mutex_unlock(&c->graph_mu);
}

/* dlt_graph_ops.release_async: from the watchdog's thread. cudaGraphExecDestroy of a launch in
 * flight frees it when it completes (CUDA runtime API, cudaGraphExecDestroy), and only then does
 * NCCL's reference on the communicator go (a user object of the graph: src/enqueue.cc
 * persistentDestructor), so the abort that follows returns once its flag has ended the kernels. */
static void _graph_release_async(dlt_backend *be)
{
    cuda_backend *c = _cu(be);
    pthread_mutex_lock(&c->graph_mu);
    c->graph_closed = 1;
    pthread_mutex_unlock(&c->graph_mu);
    _graph_reset(be);
}

/* dlt_graph_ops.release: a capture in progress is ended and its partial graph destroyed without
 * being instantiated; then the recording goes. Writes no error: it runs on failure paths whose
 * error is already said. */
static void _graph_release(dlt_backend *be)
{
    cuda_backend *c = _cu(be);
    if (c->capturing) {
        cudaGraph_t partial = NULL;
        if (cudaStreamEndCapture(c->s, &partial) == cudaSuccess && partial)
            cudaGraphDestroy(partial);
        cudaGetLastError(); /* an invalidated capture's error is the failure already reported */
        c->capturing = 0;
    }
    _graph_reset(be);
}

static int _capture_begin(dlt_backend *be)
{
    cuda_backend *c = _cu(be);
    int rc;
    _graph_reset(be);
    /* The recorded labels copy reads the pinned buffer the host fills during capture and before
     * each replay: no plain copy may still be reading it. */
    if ((rc = dlt_cuda_event_wait(c->labels_free, be->peers, be->err)) != 0)
        return rc;
    /* Everything queued so far (the input upload) runs before; the recording starts empty. */
    DLT_TRY(be->err, DLT_CUDA_CHECK(be->err, cudaStreamBeginCapture(c->s, cudaStreamCaptureModeThreadLocal)));
    c->capturing = 1;
    return 0;
}

static int _capture_end(dlt_backend *be)
{
    cuda_backend *c = _cu(be);
    cudaError_t e = cudaStreamEndCapture(c->s, &c->graph);
    c->capturing = 0;
    if (e != cudaSuccess) {
        c->graph = NULL;
        return dlt_cuda_fail(be->err, __FILE__, __LINE__,
                             "recording the step as a CUDA graph (run without --cuda-graphs)", cudaGetErrorString(e));
    }
    pthread_mutex_lock(&c->graph_mu);
    e = c->graph_closed ? cudaErrorNotPermitted : cudaGraphInstantiate(&c->graph_exec, c->graph, 0);
    pthread_mutex_unlock(&c->graph_mu);
    if (e != cudaSuccess)
        return dlt_cuda_fail(be->err, __FILE__, __LINE__, "cudaGraphInstantiate",
                             c->graph_closed ? "the stall watchdog released the recording" : cudaGetErrorString(e));
    return 0;
}

static int _replay(dlt_backend *be, const dlt_step_inputs *in)
{
    cuda_backend *c = _cu(be);
    int rc;
    if (!c->graph_exec || (size_t)in->n * sizeof(int32_t) > c->labels_size) {
        return dlt_fail(be->err, -EINVAL, "no recorded step to replay");
    }
    /* The recording copies the labels, the learning rate and the two puts from these pinned
     * places: refilled once the previous replay has read them (it has: the last results read
     * waited for it). */
    if ((rc = _stage_labels(be, in->labels, in->n)) != 0)
        return rc;
    c->pin_res->lr = in->lr;
    c->pin_res->put[DLT_RES_STOP] = in->stop;
    c->pin_res->put[DLT_RES_INPUT_FAILED] = in->input_failed;
    pthread_mutex_lock(&c->graph_mu);
    if (c->graph_closed || !c->graph_exec) {
        pthread_mutex_unlock(&c->graph_mu);
        return dlt_fail(be->err, -ECANCELED, "the recorded step was released by the stall watchdog");
    }
    {
        cudaError_t e = cudaGraphLaunch(c->graph_exec, c->s);
        pthread_mutex_unlock(&c->graph_mu);
        if (e != cudaSuccess)
            return dlt_cuda_fail(be->err, __FILE__, __LINE__, "cudaGraphLaunch", cudaGetErrorString(e));
    }
    DLT_TRY(be->err, DLT_CUDA_CHECK(be->err, cudaEventRecord(c->labels_free, c->s)));
    return 0;
}

void dlt_cu_step_ops(dlt_backend_ops *ops)
{
    ops->host_alloc = _host_alloc;
    ops->host_free = _host_free;
    ops->input_stage = _input_stage;
    ops->normalize_input = _normalize_input;
    ops->softmax_xent = _softmax_xent;
    ops->checksum = _checksum;
    ops->count_nonfinite = _count_nonfinite;
    ops->results_reset = _results_reset;
    ops->results_put = _results_put;
    ops->results_read = _results_read;
    ops->sgd_plan = _sgd_plan;
    ops->sgd_step = _sgd_step;
    ops->params_loaded = _params_loaded;
}

const dlt_graph_ops dlt_cu_graph_ops = {
    .capture_begin = _capture_begin,
    .capture_end = _capture_end,
    .replay = _replay,
    .release = _graph_release,
    .release_async = _graph_release_async,
};

/* ------------------------------------------------------------------ the timeline (op_profile)
 * Timing events on the compute stream, made as the marks first use them (the same slots serve
 * every step): a mark is one cudaEventRecord, so a timed op's two marks bracket exactly its own
 * kernels, and the gaps between them (the compute stream waiting for the all-reduce, the host
 * launching late) fall outside every op. Not inside a graph capture: a captured record is a graph
 * node, replayed with the graph, not a point of this step. */
static int _timer_mark(dlt_backend *be, int slot)
{
    cuda_backend *c = (cuda_backend *)be;
    if (slot < 0 || slot >= DLT_CU_TIMER_SLOTS)
        return dlt_fail(be->err, -EINVAL, "op timing: mark %d outside 0..%d", slot, DLT_CU_TIMER_SLOTS - 1);
    if (c->capturing)
        return dlt_fail(be->err, -EBUSY, "op timing: ops cannot be timed one by one inside a CUDA graph capture");
    if (!c->timer_events && !(c->timer_events = calloc(DLT_CU_TIMER_SLOTS, sizeof(cudaEvent_t))))
        return dlt_fail(be->err, -ENOMEM, "op timing: cannot allocate %d event handles", DLT_CU_TIMER_SLOTS);
    if (!c->timer_events[slot])
        DLT_TRY(be->err, DLT_CUDA_CHECK(be->err, cudaEventCreate(&c->timer_events[slot])));
    return DLT_CUDA_CHECK(be->err, cudaEventRecord(c->timer_events[slot], c->s));
}

static int _timer_elapsed(dlt_backend *be, int a, int b, float *ms)
{
    cuda_backend *c = (cuda_backend *)be;
    if (!c->timer_events || a < 0 || b <= a || b >= DLT_CU_TIMER_SLOTS || !c->timer_events[a] || !c->timer_events[b])
        return dlt_fail(be->err, -EINVAL, "op timing: marks %d and %d were not both recorded", a, b);
    DLT_TRY(be->err, DLT_CUDA_CHECK(be->err, cudaEventSynchronize(c->timer_events[b])));
    return DLT_CUDA_CHECK(be->err, cudaEventElapsedTime(ms, c->timer_events[a], c->timer_events[b]));
}

void dlt_cu_timer_release(cuda_backend *c)
{
    if (!c->timer_events)
        return;
    for (int i = 0; i < DLT_CU_TIMER_SLOTS; i++)
        if (c->timer_events[i])
            cudaEventDestroy(c->timer_events[i]);
    free(c->timer_events);
    c->timer_events = NULL;
}

const dlt_timer_ops dlt_cu_timer_ops = {DLT_CU_TIMER_SLOTS, _timer_mark, _timer_elapsed};
