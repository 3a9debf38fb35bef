/* SPDX-License-Identifier: Apache-2.0 */
/* model_from_checkpoint: the model a checkpoint was trained as (arch, width, image size, classes,
 * as its state file records them) for `dltrain eval`, so the model need not be told again; an
 * option that contradicts the record is refused naming both values. */
#ifndef DLT_MODEL_FROM_CHECKPOINT_H
#define DLT_MODEL_FROM_CHECKPOINT_H

#include <stddef.h>

#include "trainer/model/resnet.h"
#include "trainer/common/status.h"

/* Which of the model options the command line gave. */
typedef struct {
    int arch, width, image, classes;
} dlt_model_given;

/* Applies the settings recorded in config (the state file's "arch=... width=... image=...
 * classes=..." text) to m where the command line did not give them; a given one that differs is
 * an error naming the option, both values and the fix. Returns 0 or -EINVAL. */
int dlt_model_adopt_config(dlt_model_config *m, const dlt_model_given *given, const char *config, dlt_err *err);

#endif
