/* SPDX-License-Identifier: Apache-2.0 */
/* network: a built model bound to a backend: memory, plans, forward, backward. */
#include "config.h"

#include "trainer/model/network.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/crash_report.h"
#include "common/rng.h"
#include "common/status.h"

static float *_falloc(size_t n)
{
    void *p = NULL;
    if (posix_memalign(&p, 64, (n ? n : 1) * sizeof(float)) != 0)
        return NULL;
    memset(p, 0, (n ? n : 1) * sizeof(float));
    return p;
}

static float *_balloc(dlt_backend *be, size_t bytes)
{
    return be->ops->alloc(be, bytes);
}

/* The optimizer over the whole parameter buffer: one segment per run of state-dict entries alike
 * in weight decay. */
static int _plan_optimizer(dlt_net *net)
{
    const dlt_model *m = &net->model;
    dlt_param_segment *segs = calloc((size_t)m->nentries + 1, sizeof(*segs));
    int n = 0, rc;
    if (!segs) {
        return dlt_fail(net->be->err, -ENOMEM, "out of memory");
    }
    for (int i = 0; i < m->nentries; i++) {
        const dlt_state_entry *e = &m->entries[i];
        if (!e->is_param)
            continue;
        if (n > 0 && segs[n - 1].no_decay == e->no_decay && segs[n - 1].off + segs[n - 1].len == e->off)
            segs[n - 1].len += e->len;
        else
            segs[n++] = (dlt_param_segment){e->off, e->len, e->no_decay};
    }
    rc = net->be->ops->sgd_plan(net->be, net->d_params, m->nparams, segs, n);
    free(segs);
    return rc;
}

void dlt_model_grad_ready_offsets(const dlt_model *m, size_t *lo)
{
    /* After layers nlayers-1..i are done, the unfinished gradients are those of layers < i; every
     * offset at or above the highest end among them is final. */
    size_t hi = 0;
    for (int i = 0; i < m->nlayers; i++) {
        const dlt_layer *l = &m->layers[i];
        lo[i] = hi;
        if (l->w_len)
            hi = l->w_off + l->w_len > hi ? l->w_off + l->w_len : hi;
        if (l->b_len)
            hi = l->b_off + l->b_len > hi ? l->b_off + l->b_len : hi;
    }
}

/* How many times the layers read tensor t, as an input or as a residual; *as_input: the last layer
 * that reads it as its input (-1: none). */
static int _reads(const dlt_model *m, int t, int *as_input)
{
    int n = 0;
    *as_input = -1;
    for (int i = 0; i < m->nlayers; i++) {
        if (m->layers[i].in == t)
            n++, *as_input = i;
        n += m->layers[i].add == t;
    }
    return n;
}

/* The layer that reads tensor t alone (as its input, never as a residual), or -1. */
static int _sole_reader(const dlt_model *m, int t)
{
    int who, n = _reads(m, t, &who);
    return n == 1 ? who : -1;
}

/* The convolution + batch-norm chain (network.h's fuse): every convolution whose output one batch
 * norm alone reads writes that batch norm's statistics; one whose input is the output of such a
 * batch norm with a ReLU and no residual, read by it alone, applies that batch norm itself, which
 * then stores nothing. The backend may refuse either form for a geometry (-ENOTSUP, said in its
 * words): a refused prologue leaves the convolution the statistics alone and its input stored; a
 * refused convolution runs on its own, and so does its batch norm. */
static int _plan_fusion(dlt_net *net)
{
    dlt_model *m = &net->model;
    dlt_backend *be = net->be;
    size_t nbn_c = 0;
    int *producer = calloc((size_t)m->ntensors, sizeof(int)), rc = 0;
    net->fuse = calloc((size_t)m->nlayers, sizeof(int));
    net->fuse_src = calloc((size_t)m->nlayers, sizeof(int));
    net->fuse_dst = calloc((size_t)m->nlayers, sizeof(int));
    net->bn_coff = calloc((size_t)m->nlayers, sizeof(size_t));
    if (!producer || !net->fuse || !net->fuse_src || !net->fuse_dst || !net->bn_coff) {
        free(producer);
        return dlt_fail(be->err, -ENOMEM, "out of memory");
    }
    for (int t = 0; t < m->ntensors; t++)
        producer[t] = -1;
    for (int i = 0; i < m->nlayers; i++) {
        const dlt_layer *l = &m->layers[i];
        producer[l->out] = i;
        net->fuse_src[i] = net->fuse_dst[i] = -1;
        if (l->kind == DLT_LAYER_BN) { /* 8 channels apart at least: 16-byte aligned vectors */
            net->bn_coff[i] = nbn_c;
            nbn_c += ((size_t)l->cs.c + 7) / 8 * 8;
        }
    }
    for (int i = 0; i < m->nlayers && rc == 0; i++) {
        dlt_layer *l = &m->layers[i];
        int j, b, had = be->err->code != 0;
        if (l->kind != DLT_LAYER_CONV || (j = _sole_reader(m, l->out)) < 0 || m->layers[j].kind != DLT_LAYER_BN)
            continue;
        b = producer[l->in];
        if (b >= 0 && !(m->layers[b].kind == DLT_LAYER_BN && net->fuse[b] && m->layers[b].relu &&
                        m->layers[b].add < 0 && _sole_reader(m, l->in) == i))
            b = -1;
        rc = b >= 0 ? be->ops->conv_fuse_plan(be, l->op, 1) : -ENOTSUP;
        if (rc == -ENOTSUP) { /* said by the backend: the batch norm before is stored instead */
            if (!had)
                dlt_err_clear(be->err);
            b = -1;
            rc = be->ops->conv_fuse_plan(be, l->op, 0);
        }
        if (rc == -ENOTSUP) { /* said by the backend: this convolution and its batch norm on their own */
            if (!had)
                dlt_err_clear(be->err);
            rc = 0;
            continue;
        }
        if (rc != 0) {
            dlt_fail_prefix(be->err, rc, "planning the convolution + batch-norm chain at layer %s", l->name);
            break;
        }
        net->fuse[i] = b >= 0 ? 2 : 1;
        net->fuse_dst[i] = j;
        net->fuse[j] = 1;
        net->fused_convs++;
        if (b >= 0) {
            net->fuse_src[i] = b;
            net->fuse[b] = 2;
            net->virtual_bns++;
        }
    }
    /* The dual apply: a residual that is the output of a batch norm without a ReLU, finalized from its
     * convolution and read by the residual join alone, is applied by that join from its input. */
    for (int j = 0; j < m->nlayers && rc == 0; j++) {
        const dlt_layer *l = &m->layers[j];
        int d = l->add >= 0 ? producer[l->add] : -1, as_input;
        if (l->kind != DLT_LAYER_BN || net->fuse[j] != 1 || d < 0 || m->layers[d].kind != DLT_LAYER_BN ||
            net->fuse[d] != 1 || m->layers[d].relu || m->layers[d].add >= 0 || _reads(m, l->add, &as_input) != 1)
            continue;
        net->fuse[d] = 3;
        net->fuse_src[j] = d;
        net->folded_bns++;
    }
    free(producer);
    if (rc == 0 && net->fused_convs &&
        (!(net->bn_stats = _balloc(be, 2 * nbn_c * sizeof(float))) ||
         !(net->bn_sb = _balloc(be, 2 * nbn_c * be->act_size))))
        rc = dlt_fail(be->err, -ENOMEM, "out of memory for the batch norms' statistics");
    return rc;
}

int dlt_net_create(dlt_net *net, const dlt_model_config *cfg, dlt_backend *be, dlt_err *err)
{
    dlt_model *m = &net->model;
    size_t maxt = 0, nbn_c = 0, as = be->act_size;
    int rc;
    memset(net, 0, sizeof(*net));
    net->be = be;
    net->bn_momentum = 0.1f;
    net->bn_eps = 1e-5f;
    if ((rc = dlt_model_build(m, cfg, err)) != 0)
        return rc;
    for (int i = 0; i < m->nlayers; i++)
        if (m->layers[i].kind == DLT_LAYER_BN)
            nbn_c += (size_t)m->layers[i].cs.c;
    net->params = _falloc(m->nparams);
    net->momentum = _falloc(m->nparams);
    net->stats = _falloc(m->nstats);
    if (!net->params || !net->momentum || !net->stats)
        goto oom;
    /* Parameters and momentum always have a backend copy: conv weights are KRSC there and OIHW
     * in the host copy (dlt_net_upload/download convert). Statistics have one layout. */
    net->d_params = _balloc(be, m->nparams * sizeof(float));
    net->d_momentum = _balloc(be, m->nparams * sizeof(float));
    net->d_stats = be->host_memory ? net->stats : _balloc(be, (m->nstats ? m->nstats : 1) * sizeof(float));
    if (!net->d_params || !net->d_momentum || !net->d_stats)
        goto oom;
    net->grads = _balloc(be, m->nparams * sizeof(float));
    net->batch_mean = _balloc(be, (nbn_c ? nbn_c : 1) * sizeof(float));
    net->batch_var = _balloc(be, (nbn_c ? nbn_c : 1) * sizeof(float));
    net->bn_batches = calloc((size_t)m->nbn + 1, sizeof(int64_t));
    net->act = calloc((size_t)m->ntensors, sizeof(float *));
    net->dact = calloc((size_t)m->ntensors, sizeof(float *));
    net->dact_live = calloc((size_t)m->ntensors, sizeof(int));
    net->grad_ready_lo = calloc((size_t)m->nlayers + 1, sizeof(size_t));
    if (!net->grads || !net->batch_mean || !net->batch_var || !net->bn_batches || !net->act || !net->dact ||
        !net->dact_live || !net->grad_ready_lo)
        goto oom;
    dlt_model_grad_ready_offsets(m, net->grad_ready_lo);
    for (int t = 0; t < m->ntensors; t++) {
        size_t sz = m->tensors[t].size;
        net->act[t] = _balloc(be, sz * as);
        net->dact[t] = _balloc(be, sz * as);
        if (!net->act[t] || !net->dact[t])
            goto oom;
        net->act_bytes += 2 * sz * as;
        maxt = sz > maxt ? sz : maxt;
    }
    net->scratch = _balloc(be, maxt * as);
    if (!net->scratch)
        goto oom;
    if ((be->ops->bn_bwd_relu || be->ops->bn_bwd_fused) && !(net->scratch2 = _balloc(be, maxt * as)))
        goto oom;
    DLT_TRY_GOTO(be->err, rc, _plan_optimizer(net), fail, "planning the optimizer");
    net->bn_running_bound = be->ops->bn_bind_running != NULL; /* every BN layer's, or none */
    for (int i = 0; i < m->nlayers; i++) {
        dlt_layer *l = &m->layers[i];
        dlt_act_shape ash = {l->cs.n, l->cs.c, l->cs.h, l->cs.w};
        rc = 0;
        dlt_crash_context("planning layer %s", l->name); /* crash_report.h: oneDNN may fault, short of memory */
        if (l->kind == DLT_LAYER_CONV && (rc = be->ops->conv_plan(be, &l->cs, &l->op)) == 0)
            rc = be->ops->conv_bind_weights(be, l->op, net->d_params + l->w_off);
        else if (l->kind == DLT_LAYER_BN && (rc = be->ops->bn_plan(be, &ash, net->bn_eps, &l->op)) == 0 &&
                 net->bn_running_bound)
            rc = be->ops->bn_bind_running(be, l->op, net->d_stats + l->stat_off, net->d_stats + l->stat_off + l->cs.c,
                                          net->bn_momentum);
        else if (l->kind == DLT_LAYER_MAXPOOL)
            rc = be->ops->maxpool_plan(be, &ash, l->cs.r, l->cs.stride, l->cs.pad, &l->op);
        if (rc != 0) {
            dlt_crash_context(NULL);
            dlt_fail_prefix(be->err, rc, "planning layer %s", l->name);
            goto fail;
        }
    }
    dlt_crash_context(NULL);
    if (be->ops->conv_fuse_plan && (rc = _plan_fusion(net)) != 0)
        goto fail;
    return 0;
oom:
    rc = dlt_fail(err, -ENOMEM, "out of %s memory for the model's buffers (batch %d, image %d): lower --batch",
                  be->host_memory ? "host" : "device", cfg->batch, cfg->image);
fail:
    dlt_net_destroy(net);
    if (be->err != err) /* the backend's words, where it reports elsewhere */
        dlt_fail_take(err, be->err);
    return rc;
}

void dlt_net_destroy(dlt_net *net)
{
    dlt_model *m = &net->model;
    dlt_backend *be = net->be;
    if (!be)
        return;
    for (int i = 0; i < m->nlayers && m->layers; i++)
        if (m->layers[i].op)
            be->ops->op_destroy(be, m->layers[i].op);
    for (int t = 0; t < m->ntensors; t++) {
        if (net->act && net->act[t])
            be->ops->release(be, net->act[t]);
        if (net->dact && net->dact[t])
            be->ops->release(be, net->dact[t]);
    }
    {
        float *dev[] = {net->d_params, net->d_momentum, be->host_memory ? NULL : net->d_stats};
        for (size_t i = 0; i < 3; i++)
            if (dev[i])
                be->ops->release(be, dev[i]);
    }
    {
        float *bm[] = {net->grads,    net->batch_mean, net->batch_var, net->scratch,
                       net->scratch2, net->bn_stats,   net->bn_sb};
        for (size_t i = 0; i < 7; i++)
            if (bm[i])
                be->ops->release(be, bm[i]);
    }
    free(net->act);
    free(net->dact);
    free(net->dact_live);
    free(net->grad_ready_lo);
    free(net->fuse), free(net->fuse_src), free(net->fuse_dst), free(net->bn_coff);
    free(net->params);
    free(net->momentum);
    free(net->xfer);
    free(net->stats);
    free(net->bn_batches);
    if (net->d_stats_saved)
        be->ops->release(be, net->d_stats_saved);
    free(net->bn_batches_saved);
    dlt_model_free(m);
    memset(net, 0, sizeof(*net));
}

void dlt_net_init_params(dlt_net *net, uint64_t seed, int zero_init_residual)
{
    dlt_model *m = &net->model;
    dlt_rng rng;
    dlt_rng_seed(&rng, seed, 0x1417);
    for (int i = 0; i < m->nlayers; i++) {
        dlt_layer *l = &m->layers[i];
        float *w = net->params + l->w_off;
        if (l->kind == DLT_LAYER_CONV) {
            /* Kaiming normal, mode fan_out, ReLU gain (torchvision's ResNet init). */
            float std = sqrtf(2.0f / (float)(l->cs.k * l->cs.r * l->cs.s));
            for (size_t j = 0; j < l->w_len; j++)
                w[j] = std * dlt_rng_normal(&rng);
        } else if (l->kind == DLT_LAYER_BN) {
            float g = (zero_init_residual && l->zero_gamma) ? 0.f : 1.f;
            for (int c = 0; c < l->cs.c; c++) {
                w[c] = g;
                net->params[l->b_off + c] = 0.f;
                net->stats[l->stat_off + c] = 0.f;
                net->stats[l->stat_off + l->cs.c + c] = 1.f;
            }
        } else if (l->kind == DLT_LAYER_FC) {
            float bound = 1.0f / sqrtf((float)l->cs.c);
            for (size_t j = 0; j < l->w_len + l->b_len; j++)
                w[j] = bound * (2.f * dlt_rng_uniform(&rng) - 1.f);
        }
    }
    memset(net->momentum, 0, m->nparams * sizeof(float));
    memset(net->bn_batches, 0, (size_t)m->nbn * sizeof(int64_t));
}

void dlt_model_layout(const dlt_model *m, const float *src, float *dst, int to_backend)
{
    /* Everything but conv weights has one layout; conv weights' ranges are then rewritten
     * (layers are not in parameter order: torchvision lists a block's downsample last). */
    memcpy(dst, src, m->nparams * sizeof(float));
    for (int i = 0; i < m->nlayers; i++) {
        const dlt_layer *l = &m->layers[i];
        size_t K = (size_t)l->cs.k, C = (size_t)l->cs.c, R = (size_t)l->cs.r, S = (size_t)l->cs.s;
        const float *a = src + l->w_off;
        float *b = dst + l->w_off;
        if (l->kind != DLT_LAYER_CONV || !l->w_len)
            continue;
        for (size_t k = 0; k < K; k++)
            for (size_t c = 0; c < C; c++)
                for (size_t r = 0; r < R; r++)
                    for (size_t q = 0; q < S; q++) {
                        size_t oihw = ((k * C + c) * R + r) * S + q, krsc = ((k * R + r) * S + q) * C + c;
                        if (to_backend)
                            b[krsc] = a[oihw];
                        else
                            b[oihw] = a[krsc];
                    }
    }
}

/* The host transfer buffer (backend layout on the host side of a copy), made on first use. */
static float *_xfer(dlt_net *net)
{
    if (!net->xfer)
        net->xfer = _falloc(net->model.nparams);
    return net->xfer;
}

/* Host copy (OIHW) -> backend buffer (KRSC): transposed straight into host-memory backends, else
 * through the transfer buffer and one upload. */
static int _to_backend(dlt_net *net, const float *host, float *dev)
{
    dlt_backend *be = net->be;
    const dlt_model *m = &net->model;
    float *x = be->host_memory ? dev : _xfer(net);
    if (!x)
        return -ENOMEM;
    dlt_model_layout(m, host, x, 1);
    return be->host_memory ? 0 : be->ops->upload(be, dev, x, m->nparams * sizeof(float));
}

static int _to_host(dlt_net *net, const float *dev, float *host)
{
    dlt_backend *be = net->be;
    const dlt_model *m = &net->model;
    const float *x = dev;
    int rc;
    if (!be->host_memory) {
        float *t = _xfer(net);
        if (!t)
            return -ENOMEM;
        if ((rc = be->ops->download(be, t, dev, m->nparams * sizeof(float))) != 0)
            return rc;
        x = t;
    }
    dlt_model_layout(m, x, host, 0);
    return 0;
}

int dlt_net_upload(dlt_net *net)
{
    dlt_backend *be = net->be;
    const dlt_model *m = &net->model;
    int rc;
    if ((rc = _to_backend(net, net->params, net->d_params)) != 0 ||
        (rc = _to_backend(net, net->momentum, net->d_momentum)) != 0 ||
        (!be->host_memory && (rc = be->ops->upload(be, net->d_stats, net->stats, m->nstats * sizeof(float))) != 0))
        return rc;
    return be->ops->params_loaded(be);
}

int dlt_net_download(dlt_net *net)
{
    dlt_backend *be = net->be;
    const dlt_model *m = &net->model;
    int rc;
    if ((rc = _to_host(net, net->d_params, net->params)) != 0 ||
        (rc = _to_host(net, net->d_momentum, net->momentum)) != 0 ||
        (!be->host_memory && (rc = be->ops->download(be, net->stats, net->d_stats, m->nstats * sizeof(float))) != 0))
        return rc;
    return 0;
}

int dlt_net_grads_to_host(dlt_net *net, float *host)
{
    return _to_host(net, net->grads, host);
}

int dlt_net_bn_save(dlt_net *net)
{
    dlt_backend *be = net->be;
    const dlt_model *m = &net->model;
    if (!net->d_stats_saved && !(net->d_stats_saved = be->ops->alloc(be, (m->nstats + 1) * sizeof(float))))
        return dlt_fail(be->err, -ENOMEM, "out of %s memory for a copy of the batch-norm statistics",
                        be->host_memory ? "host" : "device");
    if (!net->bn_batches_saved && !(net->bn_batches_saved = calloc((size_t)m->nbn + 1, sizeof(int64_t))))
        return dlt_fail(be->err, -ENOMEM, "out of memory");
    memcpy(net->bn_batches_saved, net->bn_batches, (size_t)m->nbn * sizeof(int64_t));
    return be->ops->copy(be, net->d_stats_saved, net->d_stats, m->nstats * sizeof(float));
}

int dlt_net_bn_restore(dlt_net *net)
{
    dlt_backend *be = net->be;
    const dlt_model *m = &net->model;
    if (!net->d_stats_saved)
        return dlt_fail(be->err, -EPROTO, "no saved batch-norm statistics to restore");
    memcpy(net->bn_batches, net->bn_batches_saved, (size_t)m->nbn * sizeof(int64_t));
    return be->ops->copy(be, net->d_stats, net->d_stats_saved, m->nstats * sizeof(float));
}

int dlt_net_bn_adopt(dlt_net *net, int (*share)(void *arg, void *buf, size_t bytes), void *arg)
{
    dlt_backend *be = net->be;
    size_t bytes = net->model.nstats * sizeof(float);
    int rc;
    if ((rc = dlt_net_bn_save(net)) != 0 || (rc = be->ops->download(be, net->stats, net->d_stats, bytes)) != 0 ||
        (rc = share(arg, net->stats, bytes)) != 0)
        return rc;
    return be->ops->upload(be, net->d_stats, net->stats, bytes);
}

void dlt_net_bn_replayed(dlt_net *net)
{
    for (int i = 0; i < net->model.nbn; i++)
        net->bn_batches[i]++;
}

void *dlt_net_state_host(const dlt_net *net, const dlt_state_entry *e)
{
    if (e->is_counter)
        return &net->bn_batches[e->off];
    return (e->is_param ? net->params : net->stats) + e->off;
}

/* Batch norm layer i's scale and bias (network.h's bn_sb). */
static float *_sb(const dlt_net *net, int i)
{
    return (float *)((char *)net->bn_sb + 2 * net->bn_coff[i] * net->be->act_size);
}

int dlt_net_forward(dlt_net *net, int training)
{
    dlt_model *m = &net->model;
    const dlt_backend_ops *o = net->be->ops;
    dlt_backend *be = net->be;
    size_t bn_c = 0;
    int bn_i = 0, rc = 0, first = !net->passed[0];
    for (int i = 0; i < m->nlayers && rc == 0; i++) {
        dlt_layer *l = &m->layers[i];
        float *x = net->act[l->in], *y = net->act[l->out];
        if (first) /* oneDNN generates some kernels at their first call (its GEMM): crash_report.h */
            dlt_crash_context("the first forward of layer %s", l->name);
        switch (l->kind) {
        case DLT_LAYER_CONV:
            if (training && net->fuse && net->fuse[i]) {
                /* The statistics of the batch norm that reads y; with a prologue, x is never stored:
                 * the batch norm before is applied on the fly to its own input. */
                const int b = net->fuse_src[i], j = net->fuse_dst[i];
                const float *xin = b >= 0 ? net->act[m->layers[b].in] : x;
                const float *sb = b >= 0 ? _sb(net, b) : NULL;
                rc = o->conv_fwd_stats(be, l->op, xin, sb, y, net->bn_stats + 2 * net->bn_coff[j]);
            } else {
                rc = o->conv_fwd(be, l->op, x, y);
            }
            break;
        case DLT_LAYER_BN: {
            const float *g = net->d_params + l->w_off, *bta = net->d_params + l->b_off;
            int fused = 0;
            float *rm = net->d_stats + l->stat_off, *rv = rm + l->cs.c;
            float *bm = net->batch_mean + bn_c, *bv = net->batch_var + bn_c;
            if (training) {
                /* Running statistics as PyTorch keeps them: unbiased variance, momentum 0.1. */
                double count = (double)l->cs.n * l->cs.h * l->cs.w;
                float unbias = count > 1 ? (float)(count / (count - 1)) : 1.f;
                if (net->fuse && net->fuse[i]) {
                    /* Finalized from its convolution's statistics; stored unless the next
                     * convolution (fuse 2) or the residual join it feeds (3) applies it. */
                    rc = o->bn_finalize(be, l->op, net->bn_stats + 2 * net->bn_coff[i], g, bta, bm, bv, _sb(net, i));
                    if (rc == 0 && net->fuse[i] == 1) {
                        const int d = net->fuse_src[i]; /* its residual's batch norm, applied here, or -1 */
                        const float *z = d >= 0 ? net->act[m->layers[d].in] : l->add >= 0 ? net->act[l->add] : NULL;
                        rc = o->bn_apply(be, l->op, x, _sb(net, i), z, d >= 0 ? _sb(net, d) : NULL, l->relu, y);
                    }
                    fused = 1;
                } else if (o->bn_fwd_train_relu && l->relu) {
                    /* One pass: y = relu(bn(x) + residual). */
                    rc = o->bn_fwd_train_relu(be, l->op, x, l->add >= 0 ? net->act[l->add] : NULL, g, bta, y, bm, bv);
                    fused = 1;
                } else {
                    rc = o->bn_fwd_train(be, l->op, x, g, bta, y, bm, bv);
                }
                if (rc == 0 && !net->bn_running_bound) /* else the forward did it */
                    rc = o->bn_stats_update(be, rm, rv, bm, bv, l->cs.c, net->bn_momentum, unbias);
                net->bn_batches[bn_i]++;
            } else {
                rc = o->bn_fwd_infer(be, l->op, x, g, bta, rm, rv, y);
            }
            if (rc == 0 && !fused && (l->relu || l->add >= 0))
                rc = o->add_relu(be, y, l->add >= 0 ? net->act[l->add] : NULL, m->tensors[l->out].size);
            bn_c += (size_t)l->cs.c;
            bn_i++;
            break;
        }
        case DLT_LAYER_MAXPOOL: rc = o->maxpool_fwd(be, l->op, x, y); break;
        case DLT_LAYER_AVGPOOL: {
            dlt_act_shape s = {l->cs.n, l->cs.c, l->cs.h, l->cs.w};
            rc = o->avgpool_fwd(be, &s, x, y);
            break;
        }
        case DLT_LAYER_FC:
            rc = o->fc_fwd(be, x, net->d_params + l->w_off, net->d_params + l->b_off, y, l->cs.n, l->cs.c, l->cs.k);
            break;
        }
        if (rc)
            dlt_fail_suffix(be->err, rc, " (layer %s)", l->name);
    }
    if (first) {
        dlt_crash_context(NULL);
        net->passed[0] = rc == 0;
    }
    return rc;
}

/* Where tensor t's gradient goes: its own buffer when this is the first (returns 0), else
 * `scratch`, for the caller to add in (returns 1). */
static int _route_via(dlt_net *net, int t, float *scratch, float **dst)
{
    if (!net->dact_live[t]) {
        net->dact_live[t] = 1;
        *dst = net->dact[t];
        return 0;
    }
    *dst = scratch;
    return 1;
}

static int _route(dlt_net *net, int t, float **dst)
{
    return _route_via(net, t, net->scratch, dst);
}

int dlt_net_backward(dlt_net *net, const dlt_grad_listener *listen)
{
    dlt_model *m = &net->model;
    const dlt_backend_ops *o = net->be->ops;
    dlt_backend *be = net->be;
    size_t bn_c = 0, ready_lo = m->nparams;
    int rc = 0, first = !net->passed[1];
    for (int i = 0; i < m->nlayers; i++)
        if (m->layers[i].kind == DLT_LAYER_BN)
            bn_c += (size_t)m->layers[i].cs.c;
    memset(net->dact_live, 0, (size_t)m->ntensors * sizeof(int));
    net->dact_live[m->logits_tensor] = 1;
    for (int i = m->nlayers - 1; i >= 0 && rc == 0; i--) {
        dlt_layer *l = &m->layers[i];
        float *x = net->act[l->in], *dy = net->dact[l->out], *dx;
        size_t xn = m->tensors[l->in].size;
        int acc;
        if (first) /* as in the forward */
            dlt_crash_context("the first backward of layer %s", l->name);
        switch (l->kind) {
        case DLT_LAYER_FC:
            acc = _route(net, l->in, &dx);
            rc = o->fc_bwd(be, x, net->d_params + l->w_off, dy, dx, net->grads + l->w_off, net->grads + l->b_off,
                           l->cs.n, l->cs.c, l->cs.k);
            break;
        case DLT_LAYER_AVGPOOL: {
            dlt_act_shape s = {l->cs.n, l->cs.c, l->cs.h, l->cs.w};
            acc = _route(net, l->in, &dx);
            rc = o->avgpool_bwd(be, &s, dy, dx);
            break;
        }
        case DLT_LAYER_MAXPOOL:
            acc = _route(net, l->in, &dx);
            rc = o->maxpool_bwd(be, l->op, dy, dx);
            break;
        case DLT_LAYER_BN: {
            float *y = net->act[l->out];
            size_t yn = m->tensors[l->out].size;
            bn_c -= (size_t)l->cs.c;
            if ((net->fuse && net->fuse[i]) || (o->bn_bwd_relu && l->relu)) {
                /* One call: the backend returns dz (the residual's gradient) next to dx. */
                float *dz = NULL;
                int acc_add = 0;
                if (l->add >= 0)
                    acc_add = _route_via(net, l->add, net->scratch2, &dz); /* beside dx's scratch */
                acc = _route(net, l->in, &dx);
                if (net->fuse && net->fuse[i]) /* the chain's: the ReLU's mask from the stored output, or, where
                                                * it was never stored, from x * scale + bias as the convolution
                                                * computed it; the batch's statistics are the finalize's */
                    rc = o->bn_bwd_fused(be, l->op, x, net->fuse[i] >= 2 ? NULL : y, _sb(net, i), l->relu, dy,
                                         net->d_params + l->w_off, net->batch_mean + bn_c, net->batch_var + bn_c, dx,
                                         dz, net->grads + l->w_off, net->grads + l->b_off);
                else
                    rc = o->bn_bwd_relu(be, l->op, x, y, dy, net->d_params + l->w_off, net->d_params + l->b_off, dx, dz,
                                        net->grads + l->w_off, net->grads + l->b_off);
                if (rc == 0 && acc_add)
                    rc = o->accumulate(be, net->dact[l->add], net->scratch2, yn);
                break;
            }
            /* dz = dy through the ReLU; it is also the gradient of the residual input. */
            if (l->relu)
                rc = o->relu_bwd(be, y, dy, dy, yn);
            if (rc == 0 && l->add >= 0) {
                float *da;
                if (_route(net, l->add, &da))
                    rc = o->accumulate(be, net->dact[l->add], dy, yn);
                else
                    rc = o->copy(be, da, dy, yn * be->act_size);
            }
            acc = _route(net, l->in, &dx);
            if (rc == 0)
                rc = o->bn_bwd(be, l->op, x, dy, net->d_params + l->w_off, net->d_params + l->b_off,
                               net->batch_mean + bn_c, net->batch_var + bn_c, dx, net->grads + l->w_off,
                               net->grads + l->b_off);
            break;
        }
        case DLT_LAYER_CONV:
            if (net->fuse && net->fuse[i] == 2) { /* its input never stored: the prologue's form */
                const int b = net->fuse_src[i];
                rc = o->conv_bwd_weights_pro(be, l->op, net->act[m->layers[b].in], _sb(net, b), dy,
                                             net->grads + l->w_off);
            } else {
                rc = o->conv_bwd_weights(be, l->op, x, dy, net->grads + l->w_off);
            }
            acc = 0;
            if (rc == 0 && l->in != m->input_tensor) {               /* no gradient wanted for the images */
                if (o->conv_bwd_data_add && net->dact_live[l->in]) { /* a residual join, added in place */
                    rc = o->conv_bwd_data_add(be, l->op, dy, net->dact[l->in]);
                } else {
                    acc = _route(net, l->in, &dx);
                    rc = o->conv_bwd_data(be, l->op, dy, dx);
                }
            }
            break;
        default: acc = 0; dx = NULL;
        }
        if (rc == 0 && acc)
            rc = o->accumulate(be, net->dact[l->in], net->scratch, xn);
        /* Hand finished gradient buckets to the communicator while backward goes on. */
        if (rc == 0 && listen && listen->ready && (l->w_len || l->b_len) && net->grad_ready_lo[i] < ready_lo) {
            ready_lo = net->grad_ready_lo[i];
            rc = listen->ready(listen->arg, ready_lo);
        }
        if (rc)
            dlt_fail_suffix(be->err, rc, " (layer %s, backward)", l->name);
    }
    if (first) {
        dlt_crash_context(NULL);
        net->passed[1] = rc == 0;
    }
    if (rc == 0 && listen && listen->done)
        rc = listen->done(listen->arg);
    return rc;
}
