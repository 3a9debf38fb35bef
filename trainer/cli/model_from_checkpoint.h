/* SPDX-License-Identifier: Apache-2.0 */
/* model_from_checkpoint: the model a checkpoint was trained as (arch, width, image size, classes,
 * as its state file records them) for `dltrain eval`, so the model need not be told again; an
 * option that contradicts the record is refused naming both values. */
#ifndef DLT_MODEL_FROM_CHECKPOINT_H
#define DLT_MODEL_FROM_CHECKPOINT_H

#include <stddef.h>

#include "common/status.h"
#include "trainer/model/resnet.h"

/* Which of the model options the command line gave. */
typedef struct {
    int arch, width, image, classes;
} dlt_model_given;

/* Applies the settings recorded in config (the state file's "arch=... width=... image=...
 * classes=..." text) to m where the command line did not give them; a given one that differs is
 * an error naming the option, both values and the fix. Returns 0 or -EINVAL. */
int dlt_model_adopt_config(dlt_model_config *m, const dlt_model_given *given, const char *config, dlt_err *err);

/* A model file without a state file (a torchvision export, torch.save of a state_dict converted to
 * safetensors): the architecture, width and class count its tensors' names and shapes imply
 * (torchvision's names: conv1.weight [64*width,3,7,7], layerL.K.conv3 in bottleneck blocks, the
 * blocks per stage, fc.weight [classes, features]), adopted as dlt_model_adopt_config adopts a
 * recorded one. *found: 0 when the file is no ResNet of ours (then m is untouched and the load
 * judges it later); said: "resnet50, width 1, 1000 classes". Returns 0 or -EINVAL (a given option
 * contradicts the tensors, err names both). */
int dlt_model_infer_from_tensors(const char *path, dlt_model_config *m, const dlt_model_given *given, int *found,
                                 char *said, size_t saidlen, dlt_err *err);

#endif
