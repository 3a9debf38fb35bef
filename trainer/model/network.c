/* network: a built model bound to a backend: memory, plans, forward, backward. */
#include "config.h"

#include "trainer/model/network.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/train/rng.h"

static float *_falloc(size_t n)
{
    void *p = NULL;
    if (posix_memalign(&p, 64, (n ? n : 1) * sizeof(float)) != 0)
        return NULL;
    memset(p, 0, (n ? n : 1) * sizeof(float));
    return p;
}

int dlt_net_create(dlt_net *net, const dlt_model_config *cfg, dlt_backend *be, char *err, size_t errlen)
{
    dlt_model *m = &net->model;
    size_t maxt = 0, nbn_c = 0;
    int rc;
    memset(net, 0, sizeof(*net));
    net->be = be;
    net->bn_momentum = 0.1f;
    net->bn_eps = 1e-5f;
    if ((rc = dlt_model_build(m, cfg, err, errlen)) != 0)
        return rc;
    for (int i = 0; i < m->nlayers; i++)
        if (m->layers[i].kind == DLT_LAYER_BN)
            nbn_c += (size_t)m->layers[i].cs.c;
    net->params = _falloc(m->nparams);
    net->grads = _falloc(m->nparams);
    net->momentum = _falloc(m->nparams);
    net->stats = _falloc(m->nstats);
    net->batch_mean = _falloc(nbn_c);
    net->batch_var = _falloc(nbn_c);
    net->bn_batches = calloc((size_t)m->nbn + 1, sizeof(int64_t));
    net->act = calloc((size_t)m->ntensors, sizeof(float *));
    net->dact = calloc((size_t)m->ntensors, sizeof(float *));
    net->dact_live = calloc((size_t)m->ntensors, sizeof(int));
    if (!net->params || !net->grads || !net->momentum || !net->stats || !net->batch_mean || !net->batch_var ||
        !net->bn_batches || !net->act || !net->dact || !net->dact_live)
        goto oom;
    for (int t = 0; t < m->ntensors; t++) {
        size_t sz = m->tensors[t].size;
        net->act[t] = _falloc(sz);
        net->dact[t] = _falloc(sz);
        if (!net->act[t] || !net->dact[t])
            goto oom;
        net->act_bytes += 2 * sz * sizeof(float);
        maxt = sz > maxt ? sz : maxt;
    }
    net->scratch = _falloc(maxt);
    if (!net->scratch)
        goto oom;
    for (int i = 0; i < m->nlayers; i++) {
        dlt_layer *l = &m->layers[i];
        dlt_act_shape as = {l->cs.n, l->cs.c, l->cs.h, l->cs.w};
        rc = 0;
        if (l->kind == DLT_LAYER_CONV)
            rc = be->ops->conv_plan(be, &l->cs, &l->op);
        else if (l->kind == DLT_LAYER_BN)
            rc = be->ops->bn_plan(be, &as, net->bn_eps, &l->op);
        else if (l->kind == DLT_LAYER_MAXPOOL)
            rc = be->ops->maxpool_plan(be, &as, l->cs.r, l->cs.stride, l->cs.pad, &l->op);
        if (rc != 0) {
            snprintf(err, errlen, "planning layer %s: %s", l->name, be->err);
            dlt_net_destroy(net);
            return rc;
        }
    }
    return 0;
oom:
    snprintf(err, errlen, "out of memory for the model's buffers (batch %d, image %d): lower --batch", cfg->batch,
             cfg->image);
    dlt_net_destroy(net);
    return -ENOMEM;
}

void dlt_net_destroy(dlt_net *net)
{
    dlt_model *m = &net->model;
    for (int i = 0; i < m->nlayers && m->layers; i++)
        if (m->layers[i].op)
            net->be->ops->op_destroy(net->be, m->layers[i].op);
    for (int t = 0; t < m->ntensors; t++) {
        if (net->act)
            free(net->act[t]);
        if (net->dact)
            free(net->dact[t]);
    }
    free(net->act);
    free(net->dact);
    free(net->dact_live);
    free(net->params);
    free(net->grads);
    free(net->momentum);
    free(net->stats);
    free(net->batch_mean);
    free(net->batch_var);
    free(net->bn_batches);
    free(net->scratch);
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

int dlt_net_sync_weights(dlt_net *net)
{
    dlt_model *m = &net->model;
    for (int i = 0; i < m->nlayers; i++) {
        dlt_layer *l = &m->layers[i];
        if (l->kind == DLT_LAYER_CONV) {
            int rc = net->be->ops->conv_set_weights(net->be, l->op, net->params + l->w_off);
            if (rc)
                return rc;
        }
    }
    return 0;
}

int dlt_net_forward(dlt_net *net, int training)
{
    dlt_model *m = &net->model;
    const dlt_backend_ops *o = net->be->ops;
    dlt_backend *be = net->be;
    size_t bn_c = 0;
    int bn_i = 0, rc = 0;
    for (int i = 0; i < m->nlayers && rc == 0; i++) {
        dlt_layer *l = &m->layers[i];
        float *x = net->act[l->in], *y = net->act[l->out];
        switch (l->kind) {
        case DLT_LAYER_CONV:
            rc = o->conv_fwd(be, l->op, x, y);
            break;
        case DLT_LAYER_BN: {
            const float *g = net->params + l->w_off, *bta = net->params + l->b_off;
            float *rm = net->stats + l->stat_off, *rv = rm + l->cs.c;
            float *bm = net->batch_mean + bn_c, *bv = net->batch_var + bn_c;
            if (training) {
                /* Running statistics as PyTorch keeps them: unbiased variance, momentum 0.1. */
                double count = (double)l->cs.n * l->cs.h * l->cs.w;
                float unbias = count > 1 ? (float)(count / (count - 1)) : 1.f;
                rc = o->bn_fwd_train(be, l->op, x, g, bta, y, bm, bv);
                for (int c = 0; rc == 0 && c < l->cs.c; c++) {
                    rm[c] = (1.f - net->bn_momentum) * rm[c] + net->bn_momentum * bm[c];
                    rv[c] = (1.f - net->bn_momentum) * rv[c] + net->bn_momentum * bv[c] * unbias;
                }
                net->bn_batches[bn_i]++;
            } else {
                rc = o->bn_fwd_infer(be, l->op, x, g, bta, rm, rv, y);
            }
            if (rc == 0 && (l->relu || l->add >= 0))
                rc = o->add_relu(be, y, l->add >= 0 ? net->act[l->add] : NULL, m->tensors[l->out].size);
            bn_c += (size_t)l->cs.c;
            bn_i++;
            break;
        }
        case DLT_LAYER_MAXPOOL:
            rc = o->maxpool_fwd(be, l->op, x, y);
            break;
        case DLT_LAYER_AVGPOOL: {
            dlt_act_shape s = {l->cs.n, l->cs.c, l->cs.h, l->cs.w};
            rc = o->avgpool_fwd(be, &s, x, y);
            break;
        }
        case DLT_LAYER_FC: {
            /* y[n,k] = x[n,c] W[k,c]^T + b */
            const float *w = net->params + l->w_off, *b = net->params + l->b_off;
            for (int n = 0; n < l->cs.n; n++)
                memcpy(y + (size_t)n * l->cs.k, b, (size_t)l->cs.k * sizeof(float));
            rc = o->gemm(be, 0, 1, l->cs.n, l->cs.k, l->cs.c, 1.f, x, l->cs.c, w, l->cs.c, 1.f, y, l->cs.k);
            break;
        }
        }
        if (rc)
            snprintf(be->err + strlen(be->err), sizeof(be->err) - strlen(be->err), " (layer %s)", l->name);
    }
    return rc;
}

/* Gives the gradient g (len n) to tensor t: written when it is the first, added otherwise. */
static int _route(dlt_net *net, int t, float **dst)
{
    if (!net->dact_live[t]) {
        net->dact_live[t] = 1;
        *dst = net->dact[t];
        return 0;
    }
    *dst = net->scratch;
    return 1;
}

int dlt_net_backward(dlt_net *net)
{
    dlt_model *m = &net->model;
    const dlt_backend_ops *o = net->be->ops;
    dlt_backend *be = net->be;
    size_t bn_c = 0;
    int rc = 0;
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
        switch (l->kind) {
        case DLT_LAYER_FC: {
            float *w = net->params + l->w_off, *dw = net->grads + l->w_off, *db = net->grads + l->b_off;
            /* dW[k,c] = dy^T x; db = sum_n dy; dx[n,c] = dy W */
            rc = o->gemm(be, 1, 0, l->cs.k, l->cs.c, l->cs.n, 1.f, dy, l->cs.k, x, l->cs.c, 0.f, dw, l->cs.c);
            for (int k = 0; k < l->cs.k; k++) {
                float s = 0.f;
                for (int n = 0; n < l->cs.n; n++)
                    s += dy[(size_t)n * l->cs.k + k];
                db[k] = s;
            }
            acc = _route(net, l->in, &dx);
            if (rc == 0)
                rc = o->gemm(be, 0, 0, l->cs.n, l->cs.c, l->cs.k, 1.f, dy, l->cs.k, w, l->cs.c, 0.f, dx, l->cs.c);
            break;
        }
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
            /* dz = dy through the ReLU; it is also the gradient of the residual input. */
            if (l->relu)
                rc = o->relu_bwd(be, y, dy, dy, yn);
            if (rc == 0 && l->add >= 0) {
                float *da;
                if (_route(net, l->add, &da))
                    rc = o->accumulate(be, net->dact[l->add], dy, yn);
                else
                    memcpy(da, dy, yn * sizeof(float));
            }
            acc = _route(net, l->in, &dx);
            if (rc == 0)
                rc = o->bn_bwd(be, l->op, x, dy, net->params + l->w_off, net->params + l->b_off, net->batch_mean + bn_c,
                               net->batch_var + bn_c, dx, net->grads + l->w_off, net->grads + l->b_off);
            break;
        }
        case DLT_LAYER_CONV:
            rc = o->conv_bwd_weights(be, l->op, x, dy, net->grads + l->w_off);
            if (l->in == m->input_tensor) /* no gradient wanted for the images */
                continue;
            acc = _route(net, l->in, &dx);
            if (rc == 0)
                rc = o->conv_bwd_data(be, l->op, dy, dx);
            break;
        default:
            acc = 0;
            dx = NULL;
        }
        if (rc == 0 && acc)
            rc = o->accumulate(be, net->dact[l->in], net->scratch, xn);
        if (rc)
            snprintf(be->err + strlen(be->err), sizeof(be->err) - strlen(be->err), " (layer %s, backward)", l->name);
    }
    return rc;
}
