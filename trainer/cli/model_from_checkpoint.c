/* SPDX-License-Identifier: Apache-2.0 */
/* model_from_checkpoint: adopting the recorded model settings. */
#include "config.h"

#include "trainer/cli/model_from_checkpoint.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/status.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/safetensors.h"

int dlt_model_adopt_config(dlt_model_config *m, const dlt_model_given *given, const char *config, dlt_err *err)
{
    char v[128];
    dlt_err arch_err = DLT_ERR_INIT;
    dlt_model_config rec = *m;
    if (!config || !*config)
        return 0;
    if (dlt_checkpoint_config_field(config, "arch", v, sizeof(v))) {
        if (dlt_model_parse_arch(v, &rec, &arch_err) != 0)
            return dlt_fail(err, -EINVAL, "the checkpoint records arch=%s, which this dltrain does not know", v);
        if (given->arch && strcmp(rec.arch, m->arch))
            return dlt_fail(err, -EINVAL, "--arch %s, but the checkpoint was trained as %s (drop --arch)", m->arch,
                            rec.arch);
    }
    if (dlt_checkpoint_config_field(config, "width", v, sizeof(v))) {
        rec.width = strtof(v, NULL);
        if (given->width && fabsf(rec.width - m->width) > 1e-6f)
            return dlt_fail(err, -EINVAL, "--width %g, but the checkpoint was trained with width %g (drop --width)",
                            (double)m->width, (double)rec.width);
    }
    if (dlt_checkpoint_config_field(config, "image", v, sizeof(v))) {
        rec.image = atoi(v);
        if (given->image && rec.image != m->image)
            return dlt_fail(err, -EINVAL, "--image-size %d, but the checkpoint was trained at %d (drop --image-size)",
                            m->image, rec.image);
    }
    if (dlt_checkpoint_config_field(config, "classes", v, sizeof(v))) {
        rec.classes = atoi(v);
        if (given->classes && rec.classes != m->classes)
            return dlt_fail(err, -EINVAL, "--classes %d, but the checkpoint has %d classes (drop --classes)",
                            m->classes, rec.classes);
    }
    rec.batch = m->batch;
    *m = rec;
    return 0;
}

/* Blocks in stage L (layerL.0, layerL.1, ...). */
static int _blocks(const dlt_st_file *f, int stage)
{
    char name[64];
    int k = 0;
    for (;; k++) {
        snprintf(name, sizeof(name), "layer%d.%d.conv1.weight", stage, k);
        if (!dlt_st_find(f, name))
            return k;
    }
}

int dlt_model_infer_from_tensors(const char *path, dlt_model_config *m, const dlt_model_given *given, int *found,
                                 char *said, size_t saidlen, dlt_err *err)
{
    static const struct {
        int depth, bottleneck, blocks[4];
    } table[] = {{18, 0, {2, 2, 2, 2}},
                 {34, 0, {3, 4, 6, 3}},
                 {50, 1, {3, 4, 6, 3}},
                 {101, 1, {3, 4, 23, 3}},
                 {152, 1, {3, 8, 36, 3}}};
    dlt_st_file f;
    dlt_err ignore = DLT_ERR_INIT;
    const dlt_st_entry *conv1, *fc;
    int blocks[4], depth = 0, bottleneck, rc = 0;
    char config[160];
    *found = 0;
    said[0] = '\0';
    memset(&f, 0, sizeof(f));
    if (dlt_st_load(&f, path, &ignore) != 0)
        return 0; /* not readable as safetensors: the load says why */
    conv1 = dlt_st_find(&f, "conv1.weight");
    fc = dlt_st_find(&f, "fc.weight");
    bottleneck = dlt_st_find(&f, "layer1.0.conv3.weight") != NULL;
    for (int s = 0; s < 4; s++)
        blocks[s] = _blocks(&f, s + 1);
    for (size_t t = 0; t < sizeof(table) / sizeof(table[0]); t++)
        if (table[t].bottleneck == bottleneck && !memcmp(table[t].blocks, blocks, sizeof(blocks)))
            depth = table[t].depth;
    if (depth && conv1 && conv1->ndim == 4 && conv1->shape[0] % 8 == 0 && conv1->shape[1] == 3 && fc && fc->ndim == 2 &&
        fc->shape[0] > 0) {
        double width = (double)conv1->shape[0] / 64.0;
        snprintf(config, sizeof(config), "arch=resnet%d width=%g classes=%lld", depth, width, (long long)fc->shape[0]);
        snprintf(said, saidlen, "resnet%d, width %g, %lld classes", depth, width, (long long)fc->shape[0]);
        *found = 1;
        /* v1 and v1.5 have the same tensors: the given --arch decides, else torchvision's v1.5 */
        if (given->arch && m->depth == depth)
            snprintf(config, sizeof(config), "arch=%s width=%g classes=%lld", m->arch, width, (long long)fc->shape[0]);
        rc = dlt_model_adopt_config(m, given, config, err);
        if (rc != 0)
            rc = dlt_fail_prefix(err, rc, "its tensors are those of %s", said);
    }
    dlt_st_free(&f);
    return rc;
}
