/* SPDX-License-Identifier: Apache-2.0 */
/* cmd_info: `dltrain info`: the model's layers, parameter count and forward FLOPs per image. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/exit_status.h"
#include "trainer/cli/commands.h"
#include "trainer/cli/launch.h"
#include "trainer/cli/opt_table.h"
#include "trainer/model/resnet.h"
#include "trainer/train/preflight.h"

int dlt_cmd_info(int argc, char **argv)
{
    dlt_cli_opts o;
    dlt_model_config cfg;
    dlt_model m;
    dlt_err err = DLT_ERR_INIT;
    unsigned char seen[DLT_OPT_MAX] = {0};
    int rc, next, layers, state;
    memset(&o, 0, sizeof(o));
    dlt_train_config_defaults(&o.train);
    if ((rc = dlt_opt_parse_command(DLT_CMD_INFO, "info", argc, argv, 1, &o, seen, &next, 0)) >= 0)
        return rc;
    if (o.verify != !!o.checkpoint) {
        fprintf(stderr, "dltrain info: --verify and --checkpoint FILE go together (dltrain info --checkpoint FILE "
                        "--verify)\n");
        return DLT_EXIT_USAGE;
    }
    if (o.verify)
        return dlt_cli_exit_status(dlt_verify_checkpoint_cmd(o.checkpoint));
    cfg = o.train.model;
    cfg.batch = 1;
    layers = o.layers;
    state = o.state_dict;
    if (dlt_model_build(&m, &cfg, &err) != 0) {
        fprintf(stderr, "dltrain: %s\n", err.msg);
        return DLT_EXIT_USAGE;
    }
    if (layers)
        for (int i = 0; i < m.nlayers; i++) {
            const dlt_layer *l = &m.layers[i];
            const dlt_tensor_shape *t = &m.tensors[l->out];
            static const char *kinds[] = {"conv", "bn", "maxpool", "avgpool", "fc"};
            printf("%-28s %-8s out %dx%dx%d", l->name, kinds[l->kind], t->h, t->w, t->c);
            if (l->kind == DLT_LAYER_CONV)
                printf("  %dx%d/%d", l->cs.r, l->cs.s, l->cs.stride);
            if (l->kind == DLT_LAYER_BN && l->add >= 0)
                printf("  +residual");
            if (l->kind == DLT_LAYER_BN && l->relu)
                printf("  relu");
            printf("\n");
        }
    if (state)
        for (int i = 0; i < m.nentries; i++) {
            const dlt_state_entry *e = &m.entries[i];
            printf("%s [", e->name);
            for (int d = 0; d < e->ndim; d++)
                printf("%s%lld", d ? ", " : "", (long long)e->shape[d]);
            printf("]\n");
        }
    printf("%s: %d layers, %zu parameters, %.3g GFLOPs per image (forward multiply-adds, as torchvision counts) at "
           "%dx%d, %d classes\n",
           cfg.arch, m.nlayers, m.nparams, (double)m.macs * 1e-9, cfg.image, cfg.image, cfg.classes);
    {
        char note[256];
        if (dlt_model_torchvision_note(&cfg, note, sizeof(note)))
            printf("note: %s\n", note);
    }
    dlt_model_free(&m);
    return 0;
}
