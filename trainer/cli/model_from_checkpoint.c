/* SPDX-License-Identifier: Apache-2.0 */
/* model_from_checkpoint: adopting the recorded model settings. */
#include "config.h"

#include "trainer/cli/model_from_checkpoint.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/checkpoint/checkpoint.h"
#include "trainer/common/status.h"

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
            return dlt_fail(err, -EINVAL, "--arch %s, but the checkpoint was trained as %s (drop --arch)",
                            m->arch, rec.arch);
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
            return dlt_fail(err, -EINVAL,
                            "--image-size %d, but the checkpoint was trained at %d (drop --image-size)", m->image,
                            rec.image);
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
