/* SPDX-License-Identifier: Apache-2.0 */
/* cpu_onednn: the ops table on the CPU: oneDNN primitives (created once per shape and reused) for
 * convolutions, batch norm and max pooling here; OpenMP loops for the rest in cpu_loops.c. With
 * bf16, activations and their gradients are bf16 from the input's normalization to the logits
 * (convolutions, batch norm, pooling and the element-wise ops read and write them as they lie, so
 * no reorder runs between layers); convolutions take bf16 copies of the float weights and
 * accumulate in f32; weight gradients, BN statistics and the optimizer stay float. */
#include "config.h"

#include <errno.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/backend/backend.h"
#include "trainer/backend/cpu_internal.h"

/* A oneDNN memory object bound to caller buffers at execution time. */
typedef struct {
    dnnl_memory_t mem;
} bound_mem;

/* One activation argument of a convolution primitive that may run in another layout than the
 * caller's NHWC: reorder NULL when the primitive takes NHWC itself (the caller's buffer is used
 * directly); else prim lies on the backend's staging buffer `slot` and the reorder runs from the
 * caller's buffer (an input) or into it (an output) around the primitive. */
typedef struct {
    dnnl_primitive_t reorder;
    dnnl_memory_t user, prim;
    int slot;
} staged_arg;

struct dlt_op {
    /* conv */
    dlt_conv_shape cs;
    dnnl_primitive_t fwd, bwd_data, bwd_weights;
    const float *w_master;       /* the bound KRSC weights (conv_bind_weights) */
    dnnl_primitive_t w_reorder;  /* ohwi (KRSC) f32 -> fwd weights layout */
    dnnl_primitive_t wb_reorder; /* ohwi f32 -> bwd-data weights layout, when it differs */
    dnnl_memory_t m_wb;
    void *wb_buf;
    dnnl_primitive_t dw_reorder; /* bwd-weights layout -> ohwi f32 */
    dnnl_memory_t m_x, m_y, m_w_user, m_w, m_dy, m_dx, m_dw, m_dw_user;
    void *w_buf, *dw_buf;
    /* fp32 convolutions wider than 1x1 with outputs of 56x56 or more run in the layout oneDNN
     * picks for them (blocked: nChw8c with AVX2, nChw16c with AVX-512), their activations staged: fwd x in, y out;
     * bwd-data dy in, dx out; bwd-weights x and dy in (_conv_plan's rule, measured there). */
    int staged;
    staged_arg f_x, f_y, d_dy, d_dx, w_x, w_dy;
    /* bn */
    dlt_act_shape as;
    float eps;
    dnnl_memory_t m_mean, m_var, m_scale, m_shift, m_dscale, m_dshift, m_src, m_dst, m_dsrc, m_ddst;
    dnnl_primitive_t bn_infer;
    /* bn with oneDNN's fused ReLU (_bn_relu_make, at planning; NULL where oneDNN has none here: the
     * loops run); relu_mask: the workspace holds the ReLU mask of a training forward (its backward
     * reads it). */
    dnnl_primitive_t bn_fwd_relu, bn_bwd_relu;
    int relu_mask;
    /* the statistics the last training forward of the ReLU form wrote, which its backward reads:
     * the caller's, or stat_buf (2c floats) when it asked for none */
    const float *fwd_mean, *fwd_var;
    float *stat_buf;
    /* pool's workspace, and the fused bn's ReLU mask */
    dnnl_memory_t m_ws;
    void *ws_buf;
};

static int _md(dlt_backend *be, dnnl_memory_desc_t *md, int n, int c, int h, int w, dnnl_data_type_t dt,
               dnnl_format_tag_t tag)
{
    dnnl_dims_t dims = {n, c, h, w};
    DLT_TRY(be->err, DLT_DNNL_CHECK(be->err, dnnl_memory_desc_init_by_tag(md, 4, dims, dt, tag)));
    return 0;
}

static int _mem(dlt_backend *be, dnnl_memory_t *m, const dnnl_memory_desc_t *md, void *handle)
{
    DLT_TRY(be->err, DLT_DNNL_CHECK(be->err, dnnl_memory_create(m, md, _cpu(be)->engine, handle)));
    return 0;
}

static int _exec(dlt_backend *be, dnnl_primitive_t p, int nargs, const dnnl_exec_arg_t *args)
{
    DLT_TRY(be->err, DLT_DNNL_CHECK(be->err, dnnl_primitive_execute(p, _cpu(be)->stream, nargs, args)));
    DLT_TRY(be->err, DLT_DNNL_CHECK(be->err, dnnl_stream_wait(_cpu(be)->stream)));
    return 0;
}

static int _reorder(dlt_backend *be, dnnl_primitive_t *p, const dnnl_memory_desc_t *from, const dnnl_memory_desc_t *to)
{
    dnnl_primitive_desc_t pd;
    DLT_TRY(be->err, DLT_DNNL_CHECK(be->err, dnnl_reorder_primitive_desc_create(&pd, from, _cpu(be)->engine, to,
                                                                                _cpu(be)->engine, NULL)));
    DLT_TRY(be->err, DLT_DNNL_CHECK(be->err, dnnl_primitive_create(p, pd)));
    dnnl_primitive_desc_destroy(pd);
    return 0;
}

/* Every allocation failure says so: the caller prefixes the layer ("planning layer layer2.1.conv2:
 * ..."), and the words must never be what the buffer held before. */
static int _oom(dlt_backend *be)
{
    return dlt_fail(be->err, -ENOMEM,
                    "out of memory (the process's memory or address-space limit: `ulimit -v`, the "
                    "job's --mem; a smaller --batch needs less)");
}

static void *_alloc_md(const dnnl_memory_desc_t *md)
{
    size_t sz = dnnl_memory_desc_get_size(md);
    void *p = NULL;
    if (posix_memalign(&p, 64, sz ? sz : 64) != 0)
        return NULL;
    return p;
}

/* The type activations have between ops: bf16 under --precision bf16, else f32. */
static dnnl_data_type_t _act_dt(dlt_backend *be)
{
    return _cpu(be)->bf16 ? dnnl_bf16 : dnnl_f32;
}

#define SET(m, ptr) dnnl_memory_set_data_handle((m), (void *)(ptr))

/* Staging buffer `slot` at least `bytes` long (planning only: no call's copy lives across plans). */
static int _stage_reserve(dlt_backend *be, int slot, size_t bytes)
{
    cpu_backend *c = _cpu(be);
    void *p = NULL;
    if (bytes <= c->stage_size[slot])
        return 0;
    if (posix_memalign(&p, 64, bytes) != 0)
        return dlt_fail(be->err, -ENOMEM, "out of memory (a staging buffer of %zu bytes; a smaller --batch needs less)",
                        bytes);
    free(c->stage[slot]);
    c->stage[slot] = p;
    c->stage_size[slot] = bytes;
    return 0;
}

/* a: the caller's NHWC `user` layout against the primitive's `prim`; in: the caller's buffer is read. */
static int _stage_plan(dlt_backend *be, staged_arg *a, const dnnl_memory_desc_t *user, const dnnl_memory_desc_t *prim,
                       int slot, int in)
{
    int rc;
    a->slot = slot;
    if ((rc = _mem(be, &a->user, user, DNNL_MEMORY_NONE)) != 0 || dnnl_memory_desc_equal(user, prim))
        return rc;
    if ((rc = _mem(be, &a->prim, prim, DNNL_MEMORY_NONE)) != 0 ||
        (rc = _stage_reserve(be, slot, dnnl_memory_desc_get_size(prim))) != 0)
        return rc;
    return in ? _reorder(be, &a->reorder, user, prim) : _reorder(be, &a->reorder, prim, user);
}

/* The memory the primitive reads for the caller's input at src: the caller's own, or its copy
 * reordered into the staging buffer. */
static int _stage_in(dlt_backend *be, staged_arg *a, const void *src, dnnl_memory_t *out)
{
    dnnl_exec_arg_t r[] = {{DNNL_ARG_FROM, a->user}, {DNNL_ARG_TO, a->prim}};
    SET(a->user, src);
    *out = a->user;
    if (!a->reorder)
        return 0;
    SET(a->prim, _cpu(be)->stage[a->slot]);
    *out = a->prim;
    return _exec(be, a->reorder, 2, r);
}

/* The memory the primitive writes for the caller's output at dst; _stage_out_done then moves a
 * staged result into dst. */
static dnnl_memory_t _stage_out(dlt_backend *be, staged_arg *a, void *dst)
{
    SET(a->user, dst);
    if (!a->reorder)
        return a->user;
    SET(a->prim, _cpu(be)->stage[a->slot]);
    return a->prim;
}

static int _stage_out_done(dlt_backend *be, staged_arg *a)
{
    dnnl_exec_arg_t r[] = {{DNNL_ARG_FROM, a->prim}, {DNNL_ARG_TO, a->user}};
    return a->reorder ? _exec(be, a->reorder, 2, r) : 0;
}

/* ------------------------------------------------------------------ convolution */

static int _conv_plan(dlt_backend *be, const dlt_conv_shape *s, dlt_op **out)
{
    dnnl_memory_desc_t x_md, y_md, w_any, w_user, x_user, y_user;
    dnnl_convolution_desc_t fd, bd, wd;
    dnnl_primitive_desc_t fpd, bpd, wpd;
    dnnl_dims_t strides = {s->stride, s->stride}, pad = {s->pad, s->pad};
    dnnl_dims_t wdims = {s->k, s->c, s->r, s->s};
    const dnnl_memory_desc_t *w_fmt, *dw_fmt, *wb_fmt;
    int lp = _cpu(be)->bf16;
    /* The activation type between layers: bf16 activations are read and written as they lie. */
    dnnl_data_type_t act = _act_dt(be);
    /* fp32 convolutions wider than 1x1, channels in whole blocks of 8, with outputs of at least
     * 56x56 (ResNet-50's layer1 at 224x224) run in the activation layout oneDNN picks for them
     * (x_any, y_any: blocked), their NHWC activations reordered in and out through the staging
     * buffers (6 reorders a step). Measured on an AMD EPYC (AVX2, 2 threads, oneDNN 2.6), per shape
     * at batch 16: 3x3 64->64 at 56x56 forward 1.8x, backward data 1.4x, backward weights 4.1x
     * faster than on NHWC, a reorder of its activation 4.5 ms against 287 ms saved. Smaller outputs
     * gain less per call than the reorders cost (they run at 0.5-2 GB/s there): every 3x3 layer
     * staged made ResNet-50 at 112x112 slower (about 8%) and the half-width ResNet-18 at 32x32 10%
     * slower, while at 224x224 it was 1.18x faster. 1x1 convolutions keep NHWC (64->256 at 56x56:
     * 27.7 ms to gain, 51 MB to reorder). */
    int staged = !lp && (s->r > 1 || s->s > 1) && s->c % 8 == 0 && s->k % 8 == 0 && s->oh * s->ow >= 56 * 56;
    dlt_op *op = calloc(1, sizeof(*op));
    int rc;
    if (!op)
        return _oom(be);
    op->cs = *s;
    if ((rc = _md(be, &x_user, s->n, s->c, s->h, s->w, act, dnnl_nhwc)) ||
        (rc = _md(be, &y_user, s->n, s->k, s->oh, s->ow, act, dnnl_nhwc)) ||
        (rc = _md(be, &x_md, s->n, s->c, s->h, s->w, act, staged ? dnnl_format_tag_any : dnnl_nhwc)) ||
        (rc = _md(be, &y_md, s->n, s->k, s->oh, s->ow, act, staged ? dnnl_format_tag_any : dnnl_nhwc)))
        goto fail;
    DLT_TRY(be->err, DLT_DNNL_CHECK(be->err, dnnl_memory_desc_init_by_tag(&w_any, 4, wdims, act, dnnl_format_tag_any)));
    /* The parameter buffer keeps conv weights KRSC (OHWI), as the GPU backend's kernels read them. */
    DLT_TRY(be->err, DLT_DNNL_CHECK(be->err, dnnl_memory_desc_init_by_tag(&w_user, 4, wdims, dnnl_f32, dnnl_ohwi)));
    /* Forward: activations and weights of the activation type (bf16: accumulated in f32). */
    DLT_TRY(be->err, DLT_DNNL_CHECK(be->err, dnnl_convolution_forward_desc_init(&fd, dnnl_forward_training,
                                                                                dnnl_convolution_direct, &x_md, &w_any,
                                                                                NULL, &y_md, strides, pad, pad)));
    DLT_TRY(be->err, DLT_DNNL_CHECK(be->err, dnnl_primitive_desc_create(&fpd, &fd, NULL, _cpu(be)->engine, NULL)));
    w_fmt = dnnl_primitive_desc_query_md(fpd, dnnl_query_weights_md, 0);
    DLT_TRY(be->err, DLT_DNNL_CHECK(be->err, dnnl_primitive_create(&op->fwd, fpd)));
    /* Backward data picks its own weight layout (forcing the forward's can leave only the reference
     * kernel); a second reorder per step is far cheaper than that. */
    DLT_TRY(be->err,
            DLT_DNNL_CHECK(be->err, dnnl_convolution_backward_data_desc_init(&bd, dnnl_convolution_direct, &x_md,
                                                                             &w_any, &y_md, strides, pad, pad)));
    DLT_TRY(be->err, DLT_DNNL_CHECK(be->err, dnnl_primitive_desc_create(&bpd, &bd, NULL, _cpu(be)->engine, fpd)));
    DLT_TRY(be->err, DLT_DNNL_CHECK(be->err, dnnl_primitive_create(&op->bwd_data, bpd)));
    wb_fmt = dnnl_primitive_desc_query_md(bpd, dnnl_query_weights_md, 0);
    {
        /* Weight gradients are float whatever the activations (the optimizer's type). */
        dnnl_memory_desc_t dw_any;
        DLT_TRY(be->err, DLT_DNNL_CHECK(
                             be->err, dnnl_memory_desc_init_by_tag(&dw_any, 4, wdims, dnnl_f32, dnnl_format_tag_any)));
        DLT_TRY(be->err, DLT_DNNL_CHECK(be->err, dnnl_convolution_backward_weights_desc_init(
                                                     &wd, dnnl_convolution_direct, &x_md, &dw_any, NULL, &y_md, strides,
                                                     pad, pad)));
    }
    DLT_TRY(be->err, DLT_DNNL_CHECK(be->err, dnnl_primitive_desc_create(&wpd, &wd, NULL, _cpu(be)->engine, fpd)));
    dw_fmt = dnnl_primitive_desc_query_md(wpd, dnnl_query_diff_weights_md, 0);
    DLT_TRY(be->err, DLT_DNNL_CHECK(be->err, dnnl_primitive_create(&op->bwd_weights, wpd)));
    if (staged) {
        op->staged = 1;
        if ((rc = _stage_plan(be, &op->f_x, &x_user, dnnl_primitive_desc_query_md(fpd, dnnl_query_src_md, 0), 0, 1)) ||
            (rc = _stage_plan(be, &op->f_y, &y_user, dnnl_primitive_desc_query_md(fpd, dnnl_query_dst_md, 0), 1, 0)) ||
            (rc = _stage_plan(be, &op->d_dy, &y_user, dnnl_primitive_desc_query_md(bpd, dnnl_query_diff_dst_md, 0), 0,
                              1)) ||
            (rc = _stage_plan(be, &op->d_dx, &x_user, dnnl_primitive_desc_query_md(bpd, dnnl_query_diff_src_md, 0), 1,
                              0)) ||
            (rc = _stage_plan(be, &op->w_x, &x_user, dnnl_primitive_desc_query_md(wpd, dnnl_query_src_md, 0), 0, 1)) ||
            (rc = _stage_plan(be, &op->w_dy, &y_user, dnnl_primitive_desc_query_md(wpd, dnnl_query_diff_dst_md, 0), 1,
                              1))) {
            dnnl_primitive_desc_destroy(fpd);
            dnnl_primitive_desc_destroy(bpd);
            dnnl_primitive_desc_destroy(wpd);
            goto fail;
        }
    }

    op->w_buf = _alloc_md(w_fmt);
    op->dw_buf = _alloc_md(dw_fmt);
    if (!op->w_buf || !op->dw_buf) {
        rc = _oom(be);
        goto fail;
    }
    if (!dnnl_memory_desc_equal(wb_fmt, w_fmt)) {
        op->wb_buf = _alloc_md(wb_fmt);
        if (!op->wb_buf) {
            rc = _oom(be);
            goto fail;
        }
        if ((rc = _reorder(be, &op->wb_reorder, &w_user, wb_fmt)) || (rc = _mem(be, &op->m_wb, wb_fmt, op->wb_buf)))
            goto fail;
    }
    if ((rc = _reorder(be, &op->w_reorder, &w_user, w_fmt)) || (rc = _reorder(be, &op->dw_reorder, dw_fmt, &w_user)) ||
        (rc = _mem(be, &op->m_w_user, &w_user, DNNL_MEMORY_NONE)) || (rc = _mem(be, &op->m_w, w_fmt, op->w_buf)) ||
        (rc = _mem(be, &op->m_dw, dw_fmt, op->dw_buf)) || (rc = _mem(be, &op->m_dw_user, &w_user, DNNL_MEMORY_NONE)))
        goto fail;
    /* The caller's NHWC activations, read and written in place (a staged op has its staged_args). */
    if (!staged &&
        ((rc = _mem(be, &op->m_x, &x_user, DNNL_MEMORY_NONE)) || (rc = _mem(be, &op->m_y, &y_user, DNNL_MEMORY_NONE)) ||
         (rc = _mem(be, &op->m_dy, &y_user, DNNL_MEMORY_NONE)) ||
         (rc = _mem(be, &op->m_dx, &x_user, DNNL_MEMORY_NONE))))
        goto fail;
    dnnl_primitive_desc_destroy(fpd);
    dnnl_primitive_desc_destroy(bpd);
    dnnl_primitive_desc_destroy(wpd);
    *out = op;
    return 0;
fail:
    be->ops->op_destroy(be, op);
    return rc;
}

/* The op's blocked copies of its weights, from the bound KRSC floats. */
static int _conv_refresh(dlt_backend *be, dlt_op *op)
{
    dnnl_exec_arg_t a[] = {{DNNL_ARG_FROM, op->m_w_user}, {DNNL_ARG_TO, op->m_w}};
    dnnl_exec_arg_t b[] = {{DNNL_ARG_FROM, op->m_w_user}, {DNNL_ARG_TO, op->m_wb}};
    int rc;
    SET(op->m_w_user, op->w_master);
    if ((rc = _exec(be, op->w_reorder, 2, a)))
        return rc;
    return op->wb_reorder ? _exec(be, op->wb_reorder, 2, b) : 0;
}

static int _conv_bind_weights(dlt_backend *be, dlt_op *op, const float *w)
{
    cpu_backend *c = _cpu(be);
    if (!op->w_master) {
        if (c->nbound == c->bound_cap) {
            int cap = c->bound_cap ? 2 * c->bound_cap : 64;
            dlt_op **b = realloc(c->bound, (size_t)cap * sizeof(*b));
            if (!b) {
                return dlt_fail(be->err, -ENOMEM, "out of memory");
            }
            c->bound = b;
            c->bound_cap = cap;
        }
        c->bound[c->nbound++] = op;
    }
    op->w_master = w;
    return _conv_refresh(be, op);
}

/* After the weights changed: every bound convolution's blocked copies (the CPU's counterpart of
 * the GPU's low-precision twin, which its SGD kernel writes in the same pass). */
/* Brings the convolutions' blocked weight copies up to date (params_loaded, and after sgd_step). */
static int _params_loaded(dlt_backend *be)
{
    cpu_backend *c = _cpu(be);
    int rc;
    for (int i = 0; i < c->nbound; i++)
        if ((rc = _conv_refresh(be, c->bound[i])) != 0)
            return rc;
    return 0;
}

/* A staged convolution (op->staged): its inputs reordered in, the primitive, its output reordered out. */
static int _conv_fwd_staged(dlt_backend *be, dlt_op *op, const float *x, float *y)
{
    dnnl_memory_t mx;
    int rc = _stage_in(be, &op->f_x, x, &mx);
    if (rc == 0) {
        dnnl_exec_arg_t a[] = {
            {DNNL_ARG_SRC, mx}, {DNNL_ARG_WEIGHTS, op->m_w}, {DNNL_ARG_DST, _stage_out(be, &op->f_y, y)}};
        rc = _exec(be, op->fwd, 3, a);
    }
    return rc ? rc : _stage_out_done(be, &op->f_y);
}

static int _conv_bwd_data_staged(dlt_backend *be, dlt_op *op, const float *dy, float *dx)
{
    dnnl_memory_t mdy;
    int rc = _stage_in(be, &op->d_dy, dy, &mdy);
    if (rc == 0) {
        dnnl_exec_arg_t a[] = {{DNNL_ARG_DIFF_DST, mdy},
                               {DNNL_ARG_WEIGHTS, op->wb_reorder ? op->m_wb : op->m_w},
                               {DNNL_ARG_DIFF_SRC, _stage_out(be, &op->d_dx, dx)}};
        rc = _exec(be, op->bwd_data, 3, a);
    }
    return rc ? rc : _stage_out_done(be, &op->d_dx);
}

static int _conv_bwd_weights_staged(dlt_backend *be, dlt_op *op, const float *x, const float *dy, float *dw)
{
    dnnl_memory_t mx, mdy;
    dnnl_exec_arg_t r[] = {{DNNL_ARG_FROM, op->m_dw}, {DNNL_ARG_TO, op->m_dw_user}};
    int rc = _stage_in(be, &op->w_x, x, &mx);
    if (rc == 0 && (rc = _stage_in(be, &op->w_dy, dy, &mdy)) == 0) {
        dnnl_exec_arg_t a[] = {{DNNL_ARG_SRC, mx}, {DNNL_ARG_DIFF_DST, mdy}, {DNNL_ARG_DIFF_WEIGHTS, op->m_dw}};
        rc = _exec(be, op->bwd_weights, 3, a);
    }
    if (rc)
        return rc;
    SET(op->m_dw_user, dw);
    return _exec(be, op->dw_reorder, 2, r);
}

static int _conv_fwd(dlt_backend *be, dlt_op *op, const float *x, float *y)
{
    dnnl_exec_arg_t a[] = {{DNNL_ARG_SRC, op->m_x}, {DNNL_ARG_WEIGHTS, op->m_w}, {DNNL_ARG_DST, op->m_y}};
    if (op->staged)
        return _conv_fwd_staged(be, op, x, y);
    SET(op->m_x, x);
    SET(op->m_y, y);
    return _exec(be, op->fwd, 3, a);
}

static int _conv_bwd_data(dlt_backend *be, dlt_op *op, const float *dy, float *dx)
{
    dnnl_exec_arg_t a[] = {{DNNL_ARG_DIFF_DST, op->m_dy},
                           {DNNL_ARG_WEIGHTS, op->wb_reorder ? op->m_wb : op->m_w},
                           {DNNL_ARG_DIFF_SRC, op->m_dx}};
    if (op->staged)
        return _conv_bwd_data_staged(be, op, dy, dx);
    SET(op->m_dy, dy);
    SET(op->m_dx, dx);
    return _exec(be, op->bwd_data, 3, a);
}

static int _conv_bwd_weights(dlt_backend *be, dlt_op *op, const float *x, const float *dy, float *dw)
{
    dnnl_exec_arg_t a[] = {{DNNL_ARG_SRC, op->m_x}, {DNNL_ARG_DIFF_DST, op->m_dy}, {DNNL_ARG_DIFF_WEIGHTS, op->m_dw}};
    dnnl_exec_arg_t r[] = {{DNNL_ARG_FROM, op->m_dw}, {DNNL_ARG_TO, op->m_dw_user}};
    int rc;
    if (op->staged)
        return _conv_bwd_weights_staged(be, op, x, dy, dw);
    SET(op->m_x, x);
    SET(op->m_dy, dy);
    if ((rc = _exec(be, op->bwd_weights, 3, a)))
        return rc;
    SET(op->m_dw_user, dw);
    return _exec(be, op->dw_reorder, 2, r);
}

/* ------------------------------------------------------------------ batch normalization */

/* The batch norm with its ReLU fused by oneDNN (dnnl_fuse_norm_relu): the training forward writes
 * y = relu(bn(x)) and the ReLU's mask (a workspace), which the backward reads to pass dy through the
 * ReLU inside its own pass: one read and one write of y fewer in the forward, and in the backward the
 * ReLU loop's pass over y and dy gone. Made with the op, at planning (oneDNN's code generator may
 * fault when memory is short, and a fault while planning is said as such: crash_report.h); where
 * oneDNN has no such kernel for the shape and type, the op's ReLU stays the loops' (the same values:
 * the ReLU's sign test is the same before and after the rounding to bf16). */
static int _bn_relu_make(dlt_backend *be, dlt_op *op, const dnnl_memory_desc_t *md)
{
    dnnl_batch_normalization_desc_t fd, bd;
    dnnl_primitive_desc_t fpd = NULL, bpd = NULL;
    const dnnl_memory_desc_t *ws_md;
    unsigned flags = dnnl_use_scale | dnnl_use_shift | dnnl_fuse_norm_relu;
    int rc = 0;
    DLT_TRY(be->err, DLT_DNNL_CHECK(be->err, dnnl_batch_normalization_forward_desc_init(&fd, dnnl_forward_training, md,
                                                                                        op->eps, flags)));
    DLT_TRY(be->err, DLT_DNNL_CHECK(be->err, dnnl_batch_normalization_backward_desc_init(&bd, dnnl_backward, md, md,
                                                                                         op->eps, flags)));
    if (dnnl_primitive_desc_create(&fpd, &fd, NULL, _cpu(be)->engine, NULL) != dnnl_success ||
        dnnl_primitive_desc_create(&bpd, &bd, NULL, _cpu(be)->engine, fpd) != dnnl_success) {
        if (fpd)
            dnnl_primitive_desc_destroy(fpd);
        return 0; /* no fused kernel: the loops */
    }
    ws_md = dnnl_primitive_desc_query_md(fpd, dnnl_query_workspace_md, 0);
    if (!ws_md || !(op->ws_buf = _alloc_md(ws_md)))
        rc = ws_md ? _oom(be) : dlt_fail(be->err, -EIO, "oneDNN's batch norm with a fused ReLU has no workspace");
    else if ((rc = _mem(be, &op->m_ws, ws_md, op->ws_buf)) == 0 &&
             (rc = DLT_DNNL_CHECK(be->err, dnnl_primitive_create(&op->bn_fwd_relu, fpd))) == 0)
        rc = DLT_DNNL_CHECK(be->err, dnnl_primitive_create(&op->bn_bwd_relu, bpd));
    dnnl_primitive_desc_destroy(fpd);
    dnnl_primitive_desc_destroy(bpd);
    return rc;
}

static int _bn_plan(dlt_backend *be, const dlt_act_shape *s, float eps, dlt_op **out)
{
    dnnl_memory_desc_t md, cmd;
    dnnl_batch_normalization_desc_t fd, bd, id;
    dnnl_primitive_desc_t fpd, bpd, ipd;
    dnnl_dims_t cdims = {s->c};
    unsigned flags = dnnl_use_scale | dnnl_use_shift;
    dlt_op *op = calloc(1, sizeof(*op));
    int rc;
    if (!op)
        return _oom(be);
    op->as = *s;
    op->eps = eps;
    if (!(op->stat_buf = calloc(2 * (size_t)s->c, sizeof(float)))) {
        free(op);
        return _oom(be);
    }
    /* Activations of the activation type; mean, variance, scale and shift float. */
    if ((rc = _md(be, &md, s->n, s->c, s->h, s->w, _act_dt(be), dnnl_nhwc)))
        goto fail;
    DLT_TRY(be->err, DLT_DNNL_CHECK(be->err, dnnl_memory_desc_init_by_tag(&cmd, 1, cdims, dnnl_f32, dnnl_a)));
    DLT_TRY(be->err, DLT_DNNL_CHECK(be->err, dnnl_batch_normalization_forward_desc_init(&fd, dnnl_forward_training, &md,
                                                                                        eps, flags)));
    DLT_TRY(be->err, DLT_DNNL_CHECK(be->err, dnnl_primitive_desc_create(&fpd, &fd, NULL, _cpu(be)->engine, NULL)));
    DLT_TRY(be->err, DLT_DNNL_CHECK(be->err, dnnl_primitive_create(&op->fwd, fpd)));
    DLT_TRY(be->err, DLT_DNNL_CHECK(be->err, dnnl_batch_normalization_backward_desc_init(&bd, dnnl_backward, &md, &md,
                                                                                         eps, flags)));
    DLT_TRY(be->err, DLT_DNNL_CHECK(be->err, dnnl_primitive_desc_create(&bpd, &bd, NULL, _cpu(be)->engine, fpd)));
    DLT_TRY(be->err, DLT_DNNL_CHECK(be->err, dnnl_primitive_create(&op->bwd_data, bpd)));
    DLT_TRY(be->err,
            DLT_DNNL_CHECK(be->err, dnnl_batch_normalization_forward_desc_init(&id, dnnl_forward_inference, &md, eps,
                                                                               flags | dnnl_use_global_stats)));
    DLT_TRY(be->err, DLT_DNNL_CHECK(be->err, dnnl_primitive_desc_create(&ipd, &id, NULL, _cpu(be)->engine, NULL)));
    DLT_TRY(be->err, DLT_DNNL_CHECK(be->err, dnnl_primitive_create(&op->bn_infer, ipd)));
    dnnl_primitive_desc_destroy(fpd);
    dnnl_primitive_desc_destroy(bpd);
    dnnl_primitive_desc_destroy(ipd);
    if ((rc = _mem(be, &op->m_src, &md, DNNL_MEMORY_NONE)) || (rc = _mem(be, &op->m_dst, &md, DNNL_MEMORY_NONE)) ||
        (rc = _mem(be, &op->m_dsrc, &md, DNNL_MEMORY_NONE)) || (rc = _mem(be, &op->m_ddst, &md, DNNL_MEMORY_NONE)) ||
        (rc = _mem(be, &op->m_mean, &cmd, DNNL_MEMORY_NONE)) || (rc = _mem(be, &op->m_var, &cmd, DNNL_MEMORY_NONE)) ||
        (rc = _mem(be, &op->m_scale, &cmd, DNNL_MEMORY_NONE)) ||
        (rc = _mem(be, &op->m_shift, &cmd, DNNL_MEMORY_NONE)) ||
        (rc = _mem(be, &op->m_dscale, &cmd, DNNL_MEMORY_NONE)) ||
        (rc = _mem(be, &op->m_dshift, &cmd, DNNL_MEMORY_NONE)) || (rc = _bn_relu_make(be, op, &md)))
        goto fail;
    *out = op;
    return 0;
fail:
    be->ops->op_destroy(be, op);
    return rc;
}

/* Training and inference forward take the same six arguments; only the primitive differs (training
 * writes mean/var, inference reads them); ws: bind the ReLU mask too (the fused ReLU's training). */
static int _bn_fwd(dlt_backend *be, dlt_op *op, dnnl_primitive_t prim, int ws, const float *x, const float *gamma,
                   const float *beta, const float *mean, const float *var, float *y)
{
    dnnl_exec_arg_t a[] = {{DNNL_ARG_SRC, op->m_src},     {DNNL_ARG_DST, op->m_dst},   {DNNL_ARG_SCALE, op->m_scale},
                           {DNNL_ARG_SHIFT, op->m_shift}, {DNNL_ARG_MEAN, op->m_mean}, {DNNL_ARG_VARIANCE, op->m_var},
                           {DNNL_ARG_WORKSPACE, op->m_ws}};
    SET(op->m_src, x);
    SET(op->m_dst, y);
    SET(op->m_scale, gamma);
    SET(op->m_shift, beta);
    SET(op->m_mean, mean);
    SET(op->m_var, var);
    return _exec(be, prim, ws ? 7 : 6, a);
}

static int _bn_fwd_train(dlt_backend *be, dlt_op *op, const float *x, const float *gamma, const float *beta, float *y,
                         float *mean, float *var)
{
    return _bn_fwd(be, op, op->fwd, 0, x, gamma, beta, mean, var, y);
}

static int _bn_fwd_infer(dlt_backend *be, dlt_op *op, const float *x, const float *gamma, const float *beta,
                         const float *mean, const float *var, float *y)
{
    return _bn_fwd(be, op, op->bn_infer, 0, x, gamma, beta, mean, var, y);
}

/* The backward through primitive prim; ws: bind the ReLU mask too (the fused ReLU's). */
static int _bn_bwd_exec(dlt_backend *be, dlt_op *op, dnnl_primitive_t prim, int ws, const float *x, const float *dy,
                        const float *gamma, const float *beta, const float *mean, const float *var, float *dx,
                        float *dgamma, float *dbeta)
{
    dnnl_exec_arg_t a[] = {{DNNL_ARG_SRC, op->m_src},           {DNNL_ARG_DIFF_DST, op->m_ddst},
                           {DNNL_ARG_SCALE, op->m_scale},       {DNNL_ARG_MEAN, op->m_mean},
                           {DNNL_ARG_VARIANCE, op->m_var},      {DNNL_ARG_DIFF_SRC, op->m_dsrc},
                           {DNNL_ARG_DIFF_SCALE, op->m_dscale}, {DNNL_ARG_DIFF_SHIFT, op->m_dshift},
                           {DNNL_ARG_SHIFT, op->m_shift},       {DNNL_ARG_WORKSPACE, op->m_ws}};
    /* oneDNN 2.x checks that the shift is bound in backward too, though it does not read it. */
    SET(op->m_src, x);
    SET(op->m_ddst, dy);
    SET(op->m_scale, gamma);
    SET(op->m_shift, beta);
    SET(op->m_mean, mean);
    SET(op->m_var, var);
    SET(op->m_dsrc, dx);
    SET(op->m_dscale, dgamma);
    SET(op->m_dshift, dbeta);
    return _exec(be, prim, ws ? 10 : 9, a);
}

static int _bn_bwd(dlt_backend *be, dlt_op *op, const float *x, const float *dy, const float *gamma, const float *beta,
                   const float *mean, const float *var, float *dx, float *dgamma, float *dbeta)
{
    return _bn_bwd_exec(be, op, op->bwd_data, 0, x, dy, gamma, beta, mean, var, dx, dgamma, dbeta);
}

/* y = relu(bn(x) + z), training: oneDNN's fused ReLU without a residual (z NULL), else the batch
 * norm and then the add+ReLU loop (the ReLU comes after the add, which oneDNN 2.6 cannot fuse). */
static int _bn_fwd_train_relu(dlt_backend *be, dlt_op *op, const float *x, const float *z, const float *gamma,
                              const float *beta, float *y, float *mean, float *var)
{
    const dlt_act_shape *s = &op->as;
    int rc;
    op->fwd_mean = mean ? mean : op->stat_buf;
    op->fwd_var = var ? var : op->stat_buf + s->c;
    op->relu_mask = 0;
    if (z || !op->bn_fwd_relu) {
        if ((rc = _bn_fwd(be, op, op->fwd, 0, x, gamma, beta, op->fwd_mean, op->fwd_var, y)))
            return rc;
        return dlt_cpu_add_relu(be, y, z, (size_t)s->n * s->c * s->h * s->w);
    }
    if ((rc = _bn_fwd(be, op, op->bn_fwd_relu, 1, x, gamma, beta, op->fwd_mean, op->fwd_var, y)))
        return rc;
    op->relu_mask = 1;
    return 0;
}

/* The backward of _bn_fwd_train_relu from y (dy unchanged): with the fused forward's mask, oneDNN's
 * fused backward; else dz = relu'(y) dy (into dx when there is no residual: oneDNN's batch-norm
 * backward runs in place), then the batch norm's backward from it. The statistics are those its
 * forward wrote (fwd_mean, fwd_var). */
static int _bn_bwd_relu(dlt_backend *be, dlt_op *op, const float *x, const float *y, const float *dy,
                        const float *gamma, const float *beta, float *dx, float *dz, float *dgamma, float *dbeta)
{
    const dlt_act_shape *s = &op->as;
    float *g = dz ? dz : dx;
    int rc;
    if (!op->fwd_mean)
        return dlt_fail(be->err, -EPROTO, "batch norm + ReLU backward before its training forward");
    if (!dz && op->relu_mask)
        return _bn_bwd_exec(be, op, op->bn_bwd_relu, 1, x, dy, gamma, beta, op->fwd_mean, op->fwd_var, dx, dgamma,
                            dbeta);
    if ((rc = dlt_cpu_relu_bwd(be, y, dy, g, (size_t)s->n * s->c * s->h * s->w)))
        return rc;
    return _bn_bwd(be, op, x, g, gamma, beta, op->fwd_mean, op->fwd_var, dx, dgamma, dbeta);
}

/* ------------------------------------------------------------------ max pooling */

static int _maxpool_plan(dlt_backend *be, const dlt_act_shape *in, int k, int stride, int pad, dlt_op **out)
{
    dnnl_memory_desc_t x_md, y_md;
    const dnnl_memory_desc_t *ws_md;
    dnnl_pooling_desc_t fd, bd;
    dnnl_primitive_desc_t fpd, bpd;
    dnnl_dims_t st = {stride, stride}, ker = {k, k}, pd = {pad, pad};
    int oh = dlt_out_size(in->h, k, stride, pad), ow = dlt_out_size(in->w, k, stride, pad);
    dlt_op *op = calloc(1, sizeof(*op));
    int rc;
    if (!op)
        return _oom(be);
    if ((rc = _md(be, &x_md, in->n, in->c, in->h, in->w, _act_dt(be), dnnl_nhwc)) ||
        (rc = _md(be, &y_md, in->n, in->c, oh, ow, _act_dt(be), dnnl_nhwc)))
        goto fail;
    DLT_TRY(be->err,
            DLT_DNNL_CHECK(be->err, dnnl_pooling_forward_desc_init(&fd, dnnl_forward_training, dnnl_pooling_max, &x_md,
                                                                   &y_md, st, ker, pd, pd)));
    DLT_TRY(be->err, DLT_DNNL_CHECK(be->err, dnnl_primitive_desc_create(&fpd, &fd, NULL, _cpu(be)->engine, NULL)));
    DLT_TRY(be->err, DLT_DNNL_CHECK(be->err, dnnl_primitive_create(&op->fwd, fpd)));
    DLT_TRY(be->err, DLT_DNNL_CHECK(be->err, dnnl_pooling_backward_desc_init(&bd, dnnl_pooling_max, &x_md, &y_md, st,
                                                                             ker, pd, pd)));
    DLT_TRY(be->err, DLT_DNNL_CHECK(be->err, dnnl_primitive_desc_create(&bpd, &bd, NULL, _cpu(be)->engine, fpd)));
    DLT_TRY(be->err, DLT_DNNL_CHECK(be->err, dnnl_primitive_create(&op->bwd_data, bpd)));
    ws_md = dnnl_primitive_desc_query_md(fpd, dnnl_query_workspace_md, 0);
    op->ws_buf = _alloc_md(ws_md);
    if (!op->ws_buf) {
        rc = _oom(be);
        goto fail;
    }
    if ((rc = _mem(be, &op->m_ws, ws_md, op->ws_buf)) || (rc = _mem(be, &op->m_src, &x_md, DNNL_MEMORY_NONE)) ||
        (rc = _mem(be, &op->m_dst, &y_md, DNNL_MEMORY_NONE)) || (rc = _mem(be, &op->m_dsrc, &x_md, DNNL_MEMORY_NONE)) ||
        (rc = _mem(be, &op->m_ddst, &y_md, DNNL_MEMORY_NONE)))
        goto fail;
    dnnl_primitive_desc_destroy(fpd);
    dnnl_primitive_desc_destroy(bpd);
    *out = op;
    return 0;
fail:
    be->ops->op_destroy(be, op);
    return rc;
}

static int _maxpool_fwd(dlt_backend *be, dlt_op *op, const float *x, float *y)
{
    dnnl_exec_arg_t a[] = {{DNNL_ARG_SRC, op->m_src}, {DNNL_ARG_DST, op->m_dst}, {DNNL_ARG_WORKSPACE, op->m_ws}};
    SET(op->m_src, x);
    SET(op->m_dst, y);
    return _exec(be, op->fwd, 3, a);
}

static int _maxpool_bwd(dlt_backend *be, dlt_op *op, const float *dy, float *dx)
{
    dnnl_exec_arg_t a[] = {
        {DNNL_ARG_DIFF_DST, op->m_ddst}, {DNNL_ARG_DIFF_SRC, op->m_dsrc}, {DNNL_ARG_WORKSPACE, op->m_ws}};
    SET(op->m_ddst, dy);
    SET(op->m_dsrc, dx);
    return _exec(be, op->bwd_data, 3, a);
}

/* ------------------------------------------------------------------ memory (host) */

static void *_alloc(dlt_backend *be, size_t bytes)
{
    void *p = NULL;
    (void)be;
    if (posix_memalign(&p, 64, bytes ? bytes : 1) != 0)
        return NULL;
    memset(p, 0, bytes ? bytes : 1);
    return p;
}

static void _release(dlt_backend *be, void *p)
{
    (void)be;
    free(p);
}

static void *_host_alloc(dlt_backend *be, size_t bytes)
{
    return _alloc(be, bytes);
}

static void _host_free(dlt_backend *be, void *p)
{
    (void)be;
    free(p);
}

static int _copy(dlt_backend *be, void *dst, const void *src, size_t bytes)
{
    (void)be;
    if (dst != src && bytes)
        memmove(dst, src, bytes);
    return 0;
}

static int _sync(dlt_backend *be)
{
    (void)be;
    return 0;
}

static int _act_from_float(dlt_backend *be, float *act, const float *host, size_t n)
{
    if (!_cpu(be)->bf16)
        return _copy(be, act, host, n * sizeof(float));
    _bf16_narrow(host, act, n);
    return 0;
}

static int _act_to_float(dlt_backend *be, float *host, const float *act, size_t n)
{
    if (!_cpu(be)->bf16)
        return _copy(be, host, act, n * sizeof(float));
    _bf16_widen(act, host, n);
    return 0;
}

/* ------------------------------------------------------------------ lifetime */

static void _free_mem(dnnl_memory_t m)
{
    if (m)
        dnnl_memory_destroy(m);
}

static void _free_prim(dnnl_primitive_t p)
{
    if (p)
        dnnl_primitive_destroy(p);
}

static void _stage_free(staged_arg *a)
{
    _free_prim(a->reorder);
    _free_mem(a->user);
    _free_mem(a->prim);
}

static void _op_destroy(dlt_backend *be, dlt_op *op)
{
    cpu_backend *c = _cpu(be);
    if (!op)
        return;
    for (int i = 0; i < c->nbound; i++)
        if (c->bound[i] == op) {
            c->bound[i] = c->bound[--c->nbound];
            break;
        }
    _free_prim(op->fwd);
    _free_prim(op->bwd_data);
    _free_prim(op->bwd_weights);
    _free_prim(op->w_reorder);
    _free_prim(op->wb_reorder);
    _free_mem(op->m_wb);
    free(op->wb_buf);
    _free_prim(op->dw_reorder);
    _free_prim(op->bn_infer);
    _free_prim(op->bn_fwd_relu);
    _free_prim(op->bn_bwd_relu);
    _stage_free(&op->f_x), _stage_free(&op->f_y), _stage_free(&op->d_dy), _stage_free(&op->d_dx);
    _stage_free(&op->w_x), _stage_free(&op->w_dy);
    dnnl_memory_t mems[] = {op->m_x,     op->m_y,     op->m_w_user,  op->m_w,      op->m_dy,
                            op->m_dx,    op->m_dw,    op->m_dw_user, op->m_mean,   op->m_var,
                            op->m_scale, op->m_shift, op->m_dscale,  op->m_dshift, op->m_src,
                            op->m_dst,   op->m_dsrc,  op->m_ddst,    op->m_ws};
    for (size_t i = 0; i < sizeof(mems) / sizeof(mems[0]); i++)
        _free_mem(mems[i]);
    free(op->w_buf);
    free(op->dw_buf);
    free(op->ws_buf);
    free(op->stat_buf);
    free(op);
}

static void _destroy(dlt_backend *be)
{
    cpu_backend *c = _cpu(be);
    if (!c)
        return;
    if (c->stream)
        dnnl_stream_destroy(c->stream);
    if (c->engine)
        dnnl_engine_destroy(c->engine);
    free(c->segs);
    free(c->bound);
    free(c->stage[0]);
    free(c->stage[1]);
    free(c->fc_scratch);
    free(c);
}

/* The rest of the table: dlt_cpu_loop_ops. */
static const dlt_backend_ops g_cpu_ops = {
    .name = "cpu-onednn",
    .destroy = _destroy,
    .op_destroy = _op_destroy,
    .alloc = _alloc,
    .release = _release,
    .upload = _copy,
    .download = _copy,
    .copy = _copy,
    .sync = _sync,
    .act_from_float = _act_from_float,
    .act_to_float = _act_to_float,
    .host_alloc = _host_alloc,
    .host_free = _host_free,
    .params_loaded = _params_loaded,
    .conv_plan = _conv_plan,
    .conv_bind_weights = _conv_bind_weights,
    .conv_fwd = _conv_fwd,
    .conv_bwd_data = _conv_bwd_data,
    .conv_bwd_weights = _conv_bwd_weights,
    .bn_plan = _bn_plan,
    .bn_fwd_train = _bn_fwd_train,
    .bn_fwd_infer = _bn_fwd_infer,
    .bn_bwd = _bn_bwd,
    .bn_fwd_train_relu = _bn_fwd_train_relu,
    .bn_bwd_relu = _bn_bwd_relu,
    .maxpool_plan = _maxpool_plan,
    .maxpool_fwd = _maxpool_fwd,
    .maxpool_bwd = _maxpool_bwd,
};

int dlt_backend_cpu_has_bf16(void)
{
    /* oneDNN reports the best ISA it will use; bf16 kernels need avx512_core_bf16 or later. */
    dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    return isa == dnnl_cpu_isa_avx512_core_bf16 || isa == dnnl_cpu_isa_avx512_core_amx;
}

int dlt_backend_cpu_create(dlt_backend **out, dlt_precision prec, dlt_err *err)
{
    cpu_backend *c = calloc(1, sizeof(*c));
    *out = NULL;
    if (!c) {
        return dlt_fail(err, -ENOMEM, "out of memory");
    }
    c->ops = g_cpu_ops;
    dlt_cpu_loop_ops(&c->ops);
    c->refresh_bound = _params_loaded;
    c->base.ops = &c->ops;
    c->base.precision = prec;
    c->bf16 = prec == DLT_PREC_BF16;
    c->base.act_size = c->bf16 ? sizeof(dlt_bf16) : sizeof(float);
    c->base.host_memory = 1;
    c->base.results = c->results;
    c->base.err = err;
    if (prec == DLT_PREC_FP16 || prec == DLT_PREC_TF32) {
        dlt_fail(err, -ENOTSUP, "--precision %s needs the CUDA backend (the CPU backend has fp32 and bf16)",
                 dlt_precision_name(prec));
        free(c);
        return -ENOTSUP;
    }
    if (prec == DLT_PREC_BF16 && !dlt_backend_cpu_has_bf16()) {
        dlt_fail(err, -ENOTSUP,
                 "--precision bf16 needs a CPU with AVX512-BF16 or AMX (oneDNN sees none here); use fp32");
        free(c);
        return -ENOTSUP;
    }
    if (dnnl_engine_create(&c->engine, dnnl_cpu, 0) != dnnl_success ||
        dnnl_stream_create(&c->stream, c->engine, dnnl_stream_default_flags) != dnnl_success) {
        dlt_fail(err, -EIO, "cannot create the oneDNN CPU engine");
        _destroy(&c->base);
        return -EIO;
    }
    *out = &c->base;
    return 0;
}
