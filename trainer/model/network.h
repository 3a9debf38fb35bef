/* SPDX-License-Identifier: Apache-2.0 */
/* network: a built model bound to a backend: activation and gradient memory, per-layer plans,
 * forward (training or inference), backward, and the parameter / statistics buffers. */
#ifndef DLT_NETWORK_H
#define DLT_NETWORK_H

#include "common/status.h"
#include "trainer/backend/backend.h"
#include "trainer/comm/grad_listener.h"
#include "trainer/model/resnet.h"

typedef struct {
    dlt_model model;
    dlt_backend *be;
    /* Host copies, in torchvision's layout (conv weights OIHW): initialisation and checkpoints
     * read and write these; the backend works on the d_* buffers, where conv weights (and their
     * gradients and momentum) are KRSC. dlt_net_upload/download convert, nothing else does. */
    float *params, *momentum; /* nparams each */
    float *xfer;              /* host transfer buffer in the backend layout (GPU backends) */
    /* Batch-norm state: only this file touches it (the verbs below; checkpoints through
     * dlt_net_state_host). */
    float *stats;         /* BN running mean/var (the same memory as d_stats on the CPU) */
    int64_t *bn_batches;  /* num_batches_tracked per BN (host only) */
    float *d_stats_saved; /* dlt_net_bn_save's copy (backend memory, made on first use) */
    int64_t *bn_batches_saved;
    /* Backend memory. */
    float *d_params, *d_momentum, *d_stats;
    float *grads;                  /* nparams */
    float *batch_mean, *batch_var; /* per BN channel, from the last training forward */
    float **act, **dact;           /* per tensor, activation type */
    int *dact_live;                /* backward: gradient buffer already holds a value */
    float *scratch;                /* largest tensor, for accumulating into a live gradient */
    float *scratch2;               /* a second one, when the backend fuses BN + add + ReLU */
    size_t *grad_ready_lo;         /* per layer: backward done down to it, gradients >= this are final */
    size_t act_bytes;
    float bn_momentum, bn_eps;
    int bn_running_bound; /* the backend's BN forwards update the running statistics (bn_bind_running) */
    int passed[2];        /* a forward, a backward has run through (before: a fault names the layer) */
    /* The convolution + batch-norm chain, where the backend offers it (conv_fuse_plan and the five
     * ops after it in backend.h): per layer, fuse[i] for a convolution: 0 on its own, 1 writing the
     * statistics of the batch norm fuse_dst[i] that alone reads its output, 2 also reading its
     * input through the batch norm fuse_src[i] applied on the fly; for a batch norm: 0 on its own,
     * 1 finalized from its convolution's statistics, 2 and its output never stored (the next
     * convolution applies it), 3 and its output never stored (the residual join j whose residual
     * it is applies it with its own: the dual apply of a downsample block; fuse_src[j] names it,
     * -1 for the other batch norms). Training forwards and backwards
     * only: inference runs every op on its own. bn_coff[i]: a batch norm's first channel in bn_stats (2 floats per
     * channel) and bn_sb (2 activation values per channel: scale, bias), a multiple of 8 (16-byte aligned). */
    int *fuse, *fuse_src, *fuse_dst;
    size_t *bn_coff;
    float *bn_stats, *bn_sb;
    int fused_convs, virtual_bns, folded_bns;
} dlt_net;

int dlt_net_create(dlt_net *net, const dlt_model_config *cfg, dlt_backend *be, dlt_err *err);
void dlt_net_destroy(dlt_net *net);

/* Kaiming-normal conv weights (fan_out, as torchvision), FC uniform(+-1/sqrt(fan_in)), BN gamma
 * 1 (0 for the last BN of each block when zero_init), beta 0, running var 1. */
void dlt_net_init_params(dlt_net *net, uint64_t seed, int zero_init_residual);

/* Host copies -> backend memory (OIHW -> KRSC, then the backend's derived copies), after
 * initialisation, loading, or any change of the host copies. */
int dlt_net_upload(dlt_net *net);
/* Backend memory -> host copies of params, momentum and statistics (checkpoints only: a whole
 * model crosses). */
int dlt_net_download(dlt_net *net);
/* The gradients in the host layout (tests, against finite differences). */
int dlt_net_grads_to_host(dlt_net *net, float *host);

/* Copies nparams floats between the host layout (conv weights OIHW, torchvision's) and the
 * backend layout (KRSC): to_backend 1 reads OIHW, 0 writes it. src and dst must not overlap. */
void dlt_model_layout(const dlt_model *m, const float *src, float *dst, int to_backend);

/* For each layer i, the flat offset above which every gradient is final once backward has done
 * layers nlayers-1 .. i (params laid out in state-dict order need not follow layer order). */
void dlt_model_grad_ready_offsets(const dlt_model *m, size_t *lo);

/* Batch-norm running statistics and batch counts, which a training forward updates. Save keeps a
 * copy (so a step that must leave no trace can be undone: restore puts it back). Adopt keeps this
 * rank's own (restore gives them back) and takes the ones share() leaves in the host buffer it is
 * handed (the caller broadcasts rank 0's: validation scores what the checkpoint holds). Each
 * returns 0 or a negative status, err in be->err. */
int dlt_net_bn_save(dlt_net *net);
int dlt_net_bn_restore(dlt_net *net);
int dlt_net_bn_adopt(dlt_net *net, int (*share)(void *arg, void *buf, size_t bytes), void *arg);
/* A replayed training step ran the BN forwards on the device only: their host side (the batch
 * counts) follows here. */
void dlt_net_bn_replayed(dlt_net *net);

/* The host copy of state-dict entry e (a parameter, a running statistic or a batch count), in
 * torchvision's layout: what checkpoints write and read. */
void *dlt_net_state_host(const dlt_net *net, const dlt_state_entry *e);

/* Forward over the input tensor (already normalized floats). training: batch statistics and
 * running-stat update; else running statistics. Returns 0 or a negative status (err in be->err,
 * the backend's error sink). */
int dlt_net_forward(dlt_net *net, int training);
/* Backward from d(loss)/d(logits) in dact[logits]; writes grads (overwritten, not accumulated),
 * telling listen (may be NULL; the gradient reducer) as they become final, so finished gradients
 * are reduced while backward goes on. */
int dlt_net_backward(dlt_net *net, const dlt_grad_listener *listen);

static inline float *dlt_net_input(dlt_net *net)
{
    return net->act[net->model.input_tensor];
}
static inline float *dlt_net_logits(dlt_net *net)
{
    return net->act[net->model.logits_tensor];
}
static inline float *dlt_net_dlogits(dlt_net *net)
{
    return net->dact[net->model.logits_tensor];
}

#endif
