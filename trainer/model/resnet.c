/* SPDX-License-Identifier: Apache-2.0 */
/* resnet: the ResNet family built once from a depth table. */
#include "config.h"

#include "trainer/model/resnet.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int depth;
    int bottleneck;
    int blocks[4];
} _depth_row;

/* He et al. 2016, Table 1. */
static const _depth_row g_depths[] = {
    {18, 0, {2, 2, 2, 2}},   {34, 0, {3, 4, 6, 3}},   {50, 1, {3, 4, 6, 3}},
    {101, 1, {3, 4, 23, 3}}, {152, 1, {3, 8, 36, 3}},
};

const char *dlt_model_torchvision_note(const dlt_model_config *cfg, char *buf, size_t len)
{
    if (cfg->width == 1.0f || !buf || len == 0)
        return NULL;
    snprintf(buf, len,
             "a --width %g model: torchvision cannot load its checkpoints (torchvision's resnet%d() has no width "
             "multiplier, so its channel counts differ); load them with dltrain (eval, --init, --resume)",
             (double)cfg->width, cfg->depth);
    return buf;
}

int dlt_model_parse_arch(const char *arch, dlt_model_config *cfg, dlt_err *err)
{
    int depth = 0, v1 = 0;
    char tail[8] = "";
    if (!arch || sscanf(arch, "resnet%d%7s", &depth, tail) < 1 || (tail[0] && strcmp(tail, "-v1"))) {
        return dlt_fail(err, -EINVAL,
                        "unknown --arch '%s' (resnet18, resnet34, resnet50, resnet101, resnet152; add -v1 for "
                        "the stride-on-1x1 bottleneck of the original MXNet/Caffe2 benchmarks)",
                        arch ? arch : "");
    }
    v1 = tail[0] != '\0';
    for (size_t i = 0; i < sizeof(g_depths) / sizeof(g_depths[0]); i++)
        if (g_depths[i].depth == depth) {
            if (v1 && !g_depths[i].bottleneck) {
                return dlt_fail(err, -EINVAL, "--arch %s: -v1 only changes bottleneck networks (resnet50 and deeper)",
                                arch);
            }
            snprintf(cfg->arch, sizeof(cfg->arch), "%s", arch);
            cfg->depth = depth;
            cfg->v1 = v1;
            return 0;
        }
    return dlt_fail(err, -EINVAL, "unknown ResNet depth %d in --arch %s (18, 34, 50, 101, 152)", depth, arch);
}

typedef struct {
    dlt_model *m;
    int cap_layers, cap_tensors, cap_entries;
    int oom;
    size_t poff, soff;
} _builder;

static int _grow(void **p, int *cap, int need, size_t elem)
{
    if (need <= *cap)
        return 0;
    int nc = *cap ? *cap * 2 : 64;
    while (nc < need)
        nc *= 2;
    void *np = realloc(*p, (size_t)nc * elem);
    if (!np)
        return -1;
    memset((char *)np + (size_t)*cap * elem, 0, (size_t)(nc - *cap) * elem);
    *p = np;
    *cap = nc;
    return 0;
}

static int _tensor(_builder *b, int n, int h, int w, int c)
{
    dlt_model *m = b->m;
    if (_grow((void **)&m->tensors, &b->cap_tensors, m->ntensors + 1, sizeof(*m->tensors))) {
        b->oom = 1;
        return 0;
    }
    m->tensors[m->ntensors] = (dlt_tensor_shape){n, h, w, c, (size_t)n * h * w * c};
    return m->ntensors++;
}

static dlt_layer *_layer(_builder *b, dlt_layer_kind kind, const char *name)
{
    dlt_model *m = b->m;
    dlt_layer *l;
    if (_grow((void **)&m->layers, &b->cap_layers, m->nlayers + 1, sizeof(*m->layers))) {
        b->oom = 1;
        return NULL;
    }
    l = &m->layers[m->nlayers++];
    memset(l, 0, sizeof(*l));
    l->kind = kind;
    l->add = -1;
    snprintf(l->name, sizeof(l->name), "%s", name);
    return l;
}

static void _entry(_builder *b, const char *prefix, const char *suffix, int ndim, const int64_t *shape, int is_param,
                   int is_counter, size_t off, size_t len, int no_decay)
{
    dlt_model *m = b->m;
    dlt_state_entry *e;
    if (_grow((void **)&m->entries, &b->cap_entries, m->nentries + 1, sizeof(*m->entries))) {
        b->oom = 1;
        return;
    }
    e = &m->entries[m->nentries++];
    snprintf(e->name, sizeof(e->name), "%s.%s", prefix, suffix);
    e->ndim = ndim;
    for (int i = 0; i < ndim; i++)
        e->shape[i] = shape[i];
    e->is_param = is_param;
    e->is_counter = is_counter;
    e->off = off;
    e->len = len;
    e->no_decay = no_decay;
}

static int _conv(_builder *b, const char *name, int in, int k, int r, int stride, int pad)
{
    dlt_tensor_shape *t = &b->m->tensors[in];
    dlt_layer *l = _layer(b, DLT_LAYER_CONV, name);
    int64_t shape[4];
    if (!l)
        return 0;
    l->in = in;
    l->cs = (dlt_conv_shape){t->n, t->c, t->h, t->w, k, r, r, stride, pad, 0, 0};
    l->cs.oh = dlt_out_size(t->h, r, stride, pad);
    l->cs.ow = dlt_out_size(t->w, r, stride, pad);
    l->w_off = b->poff;
    l->w_len = (size_t)k * l->cs.c * r * r;
    b->poff += l->w_len;
    b->m->macs += (int64_t)l->w_len * l->cs.oh * l->cs.ow;
    shape[0] = k;
    shape[1] = l->cs.c;
    shape[2] = shape[3] = r;
    _entry(b, name, "weight", 4, shape, 1, 0, l->w_off, l->w_len, 0);
    l->out = _tensor(b, t->n, l->cs.oh, l->cs.ow, k);
    return l->out;
}

static int _bn(_builder *b, const char *name, int in, int relu, int add, int zero_gamma)
{
    dlt_tensor_shape *t = &b->m->tensors[in];
    dlt_layer *l = _layer(b, DLT_LAYER_BN, name);
    int64_t shape[1];
    int c = t->c;
    if (!l)
        return 0;
    l->in = in;
    l->relu = relu;
    l->add = add;
    l->zero_gamma = zero_gamma;
    l->cs = (dlt_conv_shape){t->n, c, t->h, t->w, c, 1, 1, 1, 0, t->h, t->w};
    l->w_off = b->poff;
    l->w_len = (size_t)c;
    l->b_off = b->poff + (size_t)c;
    l->b_len = (size_t)c;
    b->poff += 2 * (size_t)c;
    l->stat_off = b->soff;
    b->soff += 2 * (size_t)c;
    b->m->nbn++;
    shape[0] = c;
    _entry(b, name, "weight", 1, shape, 1, 0, l->w_off, (size_t)c, 1);
    _entry(b, name, "bias", 1, shape, 1, 0, l->b_off, (size_t)c, 1);
    _entry(b, name, "running_mean", 1, shape, 0, 0, l->stat_off, (size_t)c, 0);
    _entry(b, name, "running_var", 1, shape, 0, 0, l->stat_off + (size_t)c, (size_t)c, 0);
    _entry(b, name, "num_batches_tracked", 0, shape, 0, 1, (size_t)(b->m->nbn - 1), 1, 0);
    l->out = _tensor(b, t->n, t->h, t->w, c);
    return l->out;
}

/* One residual block; returns its output tensor. */
static int _block(_builder *b, const char *prefix, int x, int planes, int stride, int bottleneck, int v1)
{
    char n[40];
    int out_c = bottleneck ? planes * 4 : planes, y, identity = x;
    dlt_tensor_shape *t = &b->m->tensors[x];
    if (bottleneck) {
        /* v1.5 (torchvision): the stride is on the 3x3; v1: on the first 1x1. */
        snprintf(n, sizeof(n), "%s.conv1", prefix);
        y = _conv(b, n, x, planes, 1, v1 ? stride : 1, 0);
        snprintf(n, sizeof(n), "%s.bn1", prefix);
        y = _bn(b, n, y, 1, -1, 0);
        snprintf(n, sizeof(n), "%s.conv2", prefix);
        y = _conv(b, n, y, planes, 3, v1 ? 1 : stride, 1);
        snprintf(n, sizeof(n), "%s.bn2", prefix);
        y = _bn(b, n, y, 1, -1, 0);
        snprintf(n, sizeof(n), "%s.conv3", prefix);
        y = _conv(b, n, y, out_c, 1, 1, 0);
    } else {
        snprintf(n, sizeof(n), "%s.conv1", prefix);
        y = _conv(b, n, x, planes, 3, stride, 1);
        snprintf(n, sizeof(n), "%s.bn1", prefix);
        y = _bn(b, n, y, 1, -1, 0);
        snprintf(n, sizeof(n), "%s.conv2", prefix);
        y = _conv(b, n, y, planes, 3, 1, 1);
    }
    if (b->oom)
        return 0;
    t = &b->m->tensors[x];
    if (stride != 1 || t->c != out_c) {
        snprintf(n, sizeof(n), "%s.downsample.0", prefix);
        identity = _conv(b, n, x, out_c, 1, stride, 0);
        snprintf(n, sizeof(n), "%s.downsample.1", prefix);
        identity = _bn(b, n, identity, 0, -1, 0);
    }
    /* The last BN adds the identity and applies ReLU; its gamma starts at zero (Goyal et al.). */
    snprintf(n, sizeof(n), "%s.%s", prefix, bottleneck ? "bn3" : "bn2");
    return _bn(b, n, y, 1, identity, 1);
}

int dlt_model_build(dlt_model *m, const dlt_model_config *cfg, dlt_err *err)
{
    const _depth_row *row = NULL;
    _builder b = {m, 0, 0, 0, 0, 0, 0};
    int x, base;
    memset(m, 0, sizeof(*m));
    m->cfg = *cfg;
    for (size_t i = 0; i < sizeof(g_depths) / sizeof(g_depths[0]); i++)
        if (g_depths[i].depth == cfg->depth)
            row = &g_depths[i];
    if (!row || cfg->image < 32 || cfg->image > 1024 || cfg->classes < 2 || cfg->batch < 1 ||
        !(cfg->width > 0.f && cfg->width <= 4.f)) { /* written so that a NaN width fails too */
        return dlt_fail(err, -EINVAL,
                        "invalid model: depth %d, image %d (32..1024), classes %d (>= 2), batch %d (>= 1), width %.3g "
                        "(0..4]",
                        cfg->depth, cfg->image, cfg->classes, cfg->batch, (double)cfg->width);
    }
    base = (int)(64 * cfg->width + 0.5f);
    if (base < 4)
        base = 4;
    m->input_tensor = x = _tensor(&b, cfg->batch, cfg->image, cfg->image, 3);
    x = _conv(&b, "conv1", x, base, 7, 2, 3);
    x = _bn(&b, "bn1", x, 1, -1, 0);
    if (!b.oom) {
        dlt_tensor_shape *t = &m->tensors[x];
        dlt_layer *l = _layer(&b, DLT_LAYER_MAXPOOL, "maxpool");
        if (l) {
            l->in = x;
            l->cs = (dlt_conv_shape){t->n, t->c, t->h, t->w, t->c, 3, 3, 2, 1, 0, 0};
            l->cs.oh = dlt_out_size(t->h, 3, 2, 1);
            l->cs.ow = dlt_out_size(t->w, 3, 2, 1);
            x = l->out = _tensor(&b, t->n, l->cs.oh, l->cs.ow, t->c);
        }
    }
    for (int stage = 0; stage < 4 && !b.oom; stage++) {
        int planes = base << stage;
        for (int blk = 0; blk < row->blocks[stage] && !b.oom; blk++) {
            char prefix[24];
            snprintf(prefix, sizeof(prefix), "layer%d.%d", stage + 1, blk);
            x = _block(&b, prefix, x, planes, (stage > 0 && blk == 0) ? 2 : 1, row->bottleneck, cfg->v1);
        }
    }
    if (!b.oom) {
        dlt_tensor_shape *t = &m->tensors[x];
        dlt_layer *l = _layer(&b, DLT_LAYER_AVGPOOL, "avgpool");
        int64_t shape[2];
        if (l) {
            l->in = x;
            l->cs = (dlt_conv_shape){t->n, t->c, t->h, t->w, t->c, t->h, t->w, 1, 0, 1, 1};
            x = l->out = _tensor(&b, t->n, 1, 1, t->c);
        }
        t = &m->tensors[x];
        l = _layer(&b, DLT_LAYER_FC, "fc");
        if (l) {
            l->in = x;
            l->cs = (dlt_conv_shape){t->n, t->c, 1, 1, cfg->classes, 1, 1, 1, 0, 1, 1};
            l->w_off = b.poff;
            l->w_len = (size_t)cfg->classes * t->c;
            l->b_off = b.poff + l->w_len;
            l->b_len = (size_t)cfg->classes;
            b.poff += l->w_len + l->b_len;
            m->macs += (int64_t)l->w_len;
            shape[0] = cfg->classes;
            shape[1] = t->c;
            _entry(&b, "fc", "weight", 2, shape, 1, 0, l->w_off, l->w_len, 0);
            _entry(&b, "fc", "bias", 1, shape, 1, 0, l->b_off, l->b_len, 1);
            m->logits_tensor = l->out = _tensor(&b, t->n, 1, 1, cfg->classes);
        }
    }
    if (b.oom) {
        dlt_model_free(m);
        return dlt_fail(err, -ENOMEM, "out of memory building the model");
    }
    m->nparams = b.poff;
    m->nstats = b.soff;
    return 0;
}

void dlt_model_free(dlt_model *m)
{
    free(m->layers);
    free(m->tensors);
    free(m->entries);
    memset(m, 0, sizeof(*m));
}
