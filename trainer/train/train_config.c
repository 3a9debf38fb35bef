/* SPDX-License-Identifier: Apache-2.0 */
/* train_config: the defaults of a run's settings (the Goyal et al. ImageNet recipe). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/tunables.h"
#include "trainer/train/trainer.h"

void dlt_train_config_defaults(dlt_train_config *c)
{
    const char *log = getenv("DLT_LOG");
    memset(c, 0, sizeof(*c));
    c->max_bad_share = 0.01;
    snprintf(c->model.arch, sizeof(c->model.arch), "resnet50");
    c->model.depth = 50;
    c->model.width = 1.0f;
    c->model.image = 224;
    c->model.classes = 1000;
    c->model.batch = 32;
    dlt_backend_config_defaults(&c->backend);
    c->reduce.bucket_mib = DLT_DEFAULT_BUCKET_MIB;
    c->reduce.bottom_mib = DLT_BOTTOM_BUCKET_MIB;
    c->loss_scale_window = DLT_DEFAULT_LOSS_SCALE_WINDOW;
    c->epochs = 90;
    c->base_lr = 0.1;
    c->momentum = 0.9;
    c->weight_decay = 1e-4;
    c->label_smoothing = 0.1;
    c->warmup_epochs = 5;
    c->milestones[0] = 30;
    c->milestones[1] = 60;
    c->milestones[2] = 80;
    c->nmilestones = 3;
    c->zero_init_residual = 1;
    c->seed = 1;
    c->synthetic_size = 1281167;
    c->learnable = 1;
    c->augment = 1;
    c->log_every = 10;
    c->log_level = DLT_LOG_INFO;
    if (log && !strcmp(log, "quiet"))
        c->log_level = DLT_LOG_QUIET;
    else if (log && !strcmp(log, "verbose"))
        c->log_level = DLT_LOG_VERBOSE;
    c->eval_size = 50000;
    c->eval_every = -1;
    c->check_every = DLT_DEFAULT_CHECK_EVERY;
    c->max_bad_steps = 5;
    c->stall_timeout = DLT_DEFAULT_STALL_TIMEOUT_S;
}
