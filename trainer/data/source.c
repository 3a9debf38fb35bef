/* source: real or generated batches behind one interface. */
#include "config.h"

#include "trainer/data/source.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "trainer/common/status.h"

int dlt_source_open_images(dlt_source *s, const char *path, const char *labels, const dlt_loader_config *lc,
                           char *err, size_t errlen)
{
    size_t n = strlen(path);
    int rc;
    memset(s, 0, sizeof(*s));
    s->batch = lc->batch;
    snprintf(s->path, sizeof(s->path), "%s", path);
    if (n > 4 && !strcmp(path + n - 4, ".rec"))
        rc = dlt_dataset_open_recordio(&s->ds, path, err, errlen);
    else
        rc = dlt_dataset_open_folder(&s->ds, path, labels, err, errlen);
    if (rc != 0)
        return rc;
    return dlt_loader_create(&s->loader, s->ds, lc, err, errlen);
}

int dlt_source_open_synthetic(dlt_source *s, int batch, int image, int classes, int64_t size, uint64_t seed,
                              uint64_t class_seed, int learnable, int rank, int world, int exact, char *err,
                              size_t errlen)
{
    memset(s, 0, sizeof(*s));
    s->batch = batch;
    if ((exact ? dlt_synthetic_init_exact(&s->synth, image, classes, size, seed, class_seed, learnable, rank, world)
               : dlt_synthetic_init(&s->synth, image, classes, size, seed, class_seed, learnable, rank, world)) != 0)
        return dlt_fail(err, errlen, -EINVAL, "synthetic data: %lld images cannot be split over %d ranks",
                        (long long)size, world);
    return 0;
}

void dlt_source_close(dlt_source *s)
{
    dlt_loader_destroy(s->loader);
    dlt_dataset_close(s->ds);
    dlt_synthetic_free(&s->synth);
    memset(s, 0, sizeof(*s));
}

int dlt_source_classes(const dlt_source *s)
{
    return s->ds ? dlt_dataset_classes(s->ds) : 0;
}

int64_t dlt_source_images(const dlt_source *s)
{
    return s->ds ? dlt_dataset_count(s->ds) : s->synth.size;
}

int64_t dlt_source_steps_per_epoch(const dlt_source *s)
{
    return s->loader ? dlt_loader_steps_per_epoch(s->loader) : dlt_synthetic_steps_per_epoch(&s->synth, s->batch);
}

int dlt_source_start(dlt_source *s, int64_t epoch, int64_t step, char *err, size_t errlen)
{
    if (s->loader && dlt_loader_start(s->loader, epoch, step) != 0)
        return dlt_fail(err, errlen, -EIO, "cannot start the data loader threads");
    return 0;
}

int dlt_source_next(dlt_source *s, int64_t epoch, int64_t step, uint8_t *images, int32_t *labels, char *err,
                    size_t errlen)
{
    if (s->loader) /* positioned by dlt_source_start, it runs in order */
        return dlt_loader_next(s->loader, images, labels, err, errlen) != 0 ? -EIO : 0;
    dlt_synthetic_batch(&s->synth, epoch, step, s->batch, images, labels);
    s->last_step = step;
    return 0;
}

int dlt_source_last_valid(const dlt_source *s)
{
    if (s->loader)
        return dlt_loader_last_valid(s->loader);
    return s->synth.exact ? dlt_synthetic_valid(&s->synth, s->last_step, s->batch) : s->batch;
}

int64_t dlt_source_bad_images(const dlt_source *s)
{
    return s->loader ? dlt_loader_bad_images(s->loader) : 0;
}
