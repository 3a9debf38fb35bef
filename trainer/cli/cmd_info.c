/* SPDX-License-Identifier: Apache-2.0 */
/* cmd_info: `dltrain info`: the model's layers, parameter count and forward FLOPs per image. */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/cli/commands.h"
#include "trainer/cli/parse.h"
#include "trainer/cli/preflight.h"
#include "trainer/model/resnet.h"

int dlt_cmd_info(int argc, char **argv)
{
    static const struct option o[] = {{"arch", required_argument, NULL, 'a'},  {"width", required_argument, NULL, 'w'},
                                      {"image-size", required_argument, NULL, 'i'}, {"classes", required_argument, NULL, 'c'},
                                      {"layers", no_argument, NULL, 'l'},     {"state-dict", no_argument, NULL, 's'},
                                      {"checkpoint", required_argument, NULL, 'k'}, {"verify", no_argument, NULL, 'v'},
                                      {"help", no_argument, NULL, 'h'},       {NULL, 0, NULL, 0}};
    dlt_model_config cfg = {.width = 1.0f, .image = 224, .classes = 1000, .batch = 1};
    dlt_model m;
    char err[512];
    const char *checkpoint = NULL;
    double v;
    int64_t n;
    int opt, layers = 0, state = 0, verify = 0;
    if (dlt_model_parse_arch("resnet50", &cfg, err, sizeof(err)) != 0)
        return 1;
    optind = 1;
    while ((opt = getopt_long(argc, argv, "h", o, NULL)) != -1) {
        switch (opt) {
        case 'a':
            if (dlt_model_parse_arch(optarg, &cfg, err, sizeof(err))) {
                fprintf(stderr, "dltrain: %s\n", err);
                return 2;
            }
            break;
        case 'w':
            if (dlt_parse_real("--width", optarg, 0.01, 4, &v, err, sizeof(err)) != 0)
                goto usage_error;
            cfg.width = (float)v;
            break;
        case 'i':
            if (dlt_parse_whole("--image-size", optarg, 32, 1024, &n, err, sizeof(err)) != 0)
                goto usage_error;
            cfg.image = (int)n;
            break;
        case 'c':
            if (dlt_parse_whole("--classes", optarg, 2, 100000, &n, err, sizeof(err)) != 0)
                goto usage_error;
            cfg.classes = (int)n;
            break;
        case 'k': checkpoint = optarg; break;
        case 'v': verify = 1; break;
        case 'l': layers = 1; break;
        case 's': state = 1; break;
        case 'h':
            printf("usage: dltrain info [--arch NAME] [--width F] [--image-size N] [--classes N] [--layers] "
                   "[--state-dict]\n"
                   "       dltrain info --checkpoint FILE --verify\n"
                   "  --layers: every layer with its output shape; --state-dict: the checkpoint's tensor names and "
                   "shapes (torchvision's)\n"
                   "  --verify: check FILE against the state file beside it (size and CRC-32 it records), print "
                   "its step\n           and settings; exit 0 when it verifies, 1 when damaged or unverifiable\n");
            return 0;
        default: return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "dltrain info: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (verify != !!checkpoint) {
        fprintf(stderr, "dltrain info: --verify and --checkpoint FILE go together (dltrain info --checkpoint FILE "
                "--verify)\n");
        return 2;
    }
    if (verify)
        return dlt_verify_checkpoint_cmd(checkpoint);
    if (dlt_model_build(&m, &cfg, err, sizeof(err)) != 0) {
        fprintf(stderr, "dltrain: %s\n", err);
        return 2;
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
    dlt_model_free(&m);
    return 0;
usage_error:
    fprintf(stderr, "dltrain: %s\n", err);
    return 2;
}
