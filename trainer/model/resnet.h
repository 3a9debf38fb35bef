/* SPDX-License-Identifier: Apache-2.0 */
/* resnet: the ResNet family (18/34/50/101/152, v1.5 or v1) built once from a depth table into a
 * flat list of layers over NHWC tensors, with every parameter in one flat buffer (a gradient
 * bucket is a contiguous slice) and torchvision's names for each tensor. */
#ifndef DLT_RESNET_H
#define DLT_RESNET_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "trainer/backend/backend.h"

typedef enum { DLT_LAYER_CONV, DLT_LAYER_BN, DLT_LAYER_MAXPOOL, DLT_LAYER_AVGPOOL, DLT_LAYER_FC } dlt_layer_kind;

typedef struct {
    dlt_layer_kind kind;
    char name[40];       /* torchvision module path: "conv1", "layer1.0.bn2", "layer2.0.downsample.0", "fc" */
    int in, out, add;    /* tensor ids; add: residual input of a BN (-1 none) */
    int relu;            /* BN: ReLU after (the add) */
    dlt_conv_shape cs;   /* conv and pooling geometry */
    size_t w_off, w_len; /* conv weight / BN gamma / FC weight in the parameter buffer */
    size_t b_off, b_len; /* BN beta / FC bias */
    size_t stat_off;     /* BN: running mean at stats[stat_off], running var at stats[stat_off + c] */
    int zero_gamma;      /* last BN of a residual block */
    dlt_op *op;
} dlt_layer;

typedef struct {
    int n, h, w, c;
    size_t size;
} dlt_tensor_shape;

typedef struct {
    char arch[24]; /* "resnet50" */
    int depth;     /* 18, 34, 50, 101, 152 */
    int v1;        /* stride on the 1x1 conv of the bottleneck (original ResNet), else v1.5 */
    float width;   /* channel multiplier (1.0 = the published model) */
    int image;     /* input height = width */
    int classes;
    int batch;
} dlt_model_config;

/* One named tensor of the state dict, as torchvision lists it. */
typedef struct {
    char name[64];
    int ndim;
    int64_t shape[4];
    int is_param;   /* 1: in params; 0: BN running stat (in stats) or num_batches_tracked */
    int is_counter; /* num_batches_tracked (int64 scalar) */
    size_t off;     /* offset in params or stats */
    size_t len;
    int no_decay; /* BN weight/bias or FC bias */
} dlt_state_entry;

typedef struct {
    dlt_model_config cfg;
    int nlayers;
    dlt_layer *layers;
    int ntensors;
    dlt_tensor_shape *tensors;
    size_t nparams; /* trainable values (25,557,032 for ResNet-50) */
    size_t nstats;  /* BN running mean + var values */
    int nbn;
    int64_t macs; /* multiply-adds per image, forward */
    int nentries;
    dlt_state_entry *entries;
    int input_tensor, logits_tensor;
} dlt_model;

/* Builds the layer list and state-dict table (no memory for activations). */
int dlt_model_build(dlt_model *m, const dlt_model_config *cfg, dlt_err *err);
void dlt_model_free(dlt_model *m);

/* For a model of width other than 1: one sentence saying torchvision cannot load its checkpoints
 * (torchvision's ResNets have no width multiplier: the channel counts differ), written to buf.
 * NULL for width 1, whose checkpoints torchvision loads. */
const char *dlt_model_torchvision_note(const dlt_model_config *cfg, char *buf, size_t len);

/* Parses "resnet50", "resnet50-v1", "resnet18", ... into cfg->arch/depth/v1. */
int dlt_model_parse_arch(const char *arch, dlt_model_config *cfg, dlt_err *err);

#endif
