/* SPDX-License-Identifier: Apache-2.0 */
/* forward_dump: dltrain's inference forward of a checkpoint on given input tensors, for the
 * comparison with torchvision (tests/torch/parity.py): reads N normalised NHWC float32 images,
 * writes N x classes float32 logits.
 * usage: forward_dump ARCH CLASSES IMAGE CHECKPOINT IN.f32 N OUT.f32 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/backend/backend.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/model/network.h"

int main(int argc, char **argv)
{
    dlt_model_config cfg;
    dlt_backend *be = NULL;
    dlt_net net;
    dlt_err err = DLT_ERR_INIT;
    float *in = NULL, *logits = NULL;
    size_t nin, nout;
    FILE *f;
    int n;
    if (argc != 8) {
        fprintf(stderr, "usage: forward_dump ARCH CLASSES IMAGE CHECKPOINT IN.f32 N OUT.f32\n");
        return 2;
    }
    memset(&cfg, 0, sizeof(cfg));
    cfg.width = 1.0f;
    if (dlt_model_parse_arch(argv[1], &cfg, dlt_err_fresh(&err)) != 0) {
        fprintf(stderr, "forward_dump: %s\n", err.msg);
        return 2;
    }
    cfg.classes = atoi(argv[2]);
    cfg.image = atoi(argv[3]);
    cfg.batch = n = atoi(argv[6]);
    nin = (size_t)n * cfg.image * cfg.image * 3;
    nout = (size_t)n * cfg.classes;
    in = malloc(nin * sizeof(float));
    logits = malloc(nout * sizeof(float));
    if (!in || !logits || !(f = fopen(argv[5], "rb")) || fread(in, sizeof(float), nin, f) != nin) {
        fprintf(stderr, "forward_dump: cannot read %zu floats from %s\n", nin, argv[5]);
        return 1;
    }
    fclose(f);
    if (dlt_backend_cpu_create(&be, DLT_PREC_FP32, dlt_err_fresh(&err)) != 0 ||
        dlt_net_create(&net, &cfg, be, dlt_err_fresh(&err)) != 0 ||
        dlt_checkpoint_load(&net, argv[4], NULL, dlt_err_fresh(&err)) != 0 || dlt_net_upload(&net) != 0 ||
        be->ops->act_from_float(be, dlt_net_input(&net), in, nin) != 0 || dlt_net_forward(&net, 0) != 0 ||
        be->ops->act_to_float(be, logits, dlt_net_logits(&net), nout) != 0) {
        fprintf(stderr, "forward_dump: %s\n", err.msg);
        return 1;
    }
    if (!(f = fopen(argv[7], "wb")) || fwrite(logits, sizeof(float), nout, f) != nout || fclose(f) != 0) {
        fprintf(stderr, "forward_dump: cannot write %s\n", argv[7]);
        return 1;
    }
    dlt_net_destroy(&net);
    be->ops->destroy(be);
    free(in);
    free(logits);
    return 0;
}
