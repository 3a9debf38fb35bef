/* SPDX-License-Identifier: Apache-2.0 */
/* source: real or generated batches behind one interface. */
#include "config.h"

#include "trainer/data/source.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/status.h"

int dlt_source_open_images(dlt_source *s, const char *path, const char *labels, const dlt_loader_config *lc,
                           dlt_err *err)
{
    int rc;
    memset(s, 0, sizeof(*s));
    s->batch = lc->batch;
    snprintf(s->path, sizeof(s->path), "%s", path);
    if (dlt_recordio_path(path))
        rc = dlt_dataset_open_recordio(&s->ds, path, err);
    else
        rc = dlt_dataset_open_folder(&s->ds, path, labels, err);
    if (rc != 0)
        return rc;
    return dlt_loader_create(&s->loader, s->ds, lc, err);
}

int dlt_source_open_dataset(dlt_source *s, dlt_dataset *ds, const char *path, const dlt_loader_config *lc, dlt_err *err)
{
    memset(s, 0, sizeof(*s));
    s->batch = lc->batch;
    snprintf(s->path, sizeof(s->path), "%s", path);
    s->ds = ds;
    return dlt_loader_create(&s->loader, s->ds, lc, err);
}

int dlt_source_open_synthetic(dlt_source *s, int batch, int image, int classes, int64_t size, uint64_t seed,
                              uint64_t class_seed, int learnable, int rank, int world, int exact, dlt_err *err)
{
    int rc;
    memset(s, 0, sizeof(*s));
    s->batch = batch;
    rc = exact ? dlt_synthetic_init_exact(&s->synth, image, classes, size, seed, class_seed, learnable, rank, world)
               : dlt_synthetic_init(&s->synth, image, classes, size, seed, class_seed, learnable, rank, world);
    if (rc == -ENOMEM)
        return dlt_fail(err, rc,
                        "synthetic data: out of memory for the order of its %lld images (the "
                        "process's memory limit: `ulimit -v`, the job's --mem; --synthetic-size N needs less)",
                        (long long)size);
    if (rc != 0)
        return dlt_fail(err, -EINVAL, "synthetic data: %lld images cannot be split over %d ranks", (long long)size,
                        world);
    return 0;
}

void dlt_source_set_allocator(dlt_source *s, void *(*alloc)(void *arg, size_t bytes),
                              void (*release)(void *arg, void *p), void *arg)
{
    s->alloc = alloc;
    s->release = release;
    s->alloc_arg = arg;
}

void dlt_source_close(dlt_source *s)
{
    for (int i = 0; i < DLT_SOURCE_RING; i++) {
        if (s->ring_images[i])
            s->alloc ? s->release(s->alloc_arg, s->ring_images[i]) : free(s->ring_images[i]);
        free(s->ring_labels[i]);
    }
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

int dlt_source_start(dlt_source *s, int64_t epoch, int64_t step, dlt_err *err)
{
    int rc;
    if (s->loader && (rc = dlt_loader_start(s->loader, epoch, step)) != 0)
        return dlt_fail(err, rc,
                        "cannot start the data loader's worker threads: %s (the process or user thread "
                        "limit, ulimit -u, or memory for their stacks: lower --workers)",
                        strerror(-rc));
    return 0;
}

int dlt_source_acquire(dlt_source *s, int64_t epoch, int64_t step, const uint8_t **images, const int32_t **labels,
                       dlt_err *err)
{
    size_t bytes = (size_t)s->batch * s->synth.image * s->synth.image * 3;
    int i;
    if (s->loader) { /* positioned by dlt_source_start, it runs in order */
        int rc = dlt_loader_acquire(s->loader, images, labels, err);
        if (rc == 0)
            s->acquired++;
        return rc != 0 ? (rc == -EBUSY ? rc : -EIO) : 0;
    }
    if (s->acquired - s->released >= DLT_SOURCE_RING - 2)
        return dlt_fail(err, -EBUSY, "%d generated batches held already: release one first", DLT_SOURCE_RING - 2);
    i = (int)(s->acquired % DLT_SOURCE_RING);
    if (!s->ring_images[i]) {
        s->ring_images[i] = s->alloc ? s->alloc(s->alloc_arg, bytes) : malloc(bytes);
        s->ring_labels[i] = malloc(sizeof(int32_t) * (size_t)s->batch);
        if (!s->ring_images[i] || !s->ring_labels[i])
            return dlt_fail(err, -ENOMEM, "out of memory for a batch of %d generated images", s->batch);
    }
    if (!s->reuse || !s->generated[i])
        dlt_synthetic_batch(&s->synth, epoch, step, s->batch, s->ring_images[i], s->ring_labels[i]);
    s->generated[i] = 1;
    s->last_step = step;
    s->acquired++;
    *images = s->ring_images[i];
    *labels = s->ring_labels[i];
    return 0;
}

void dlt_source_reuse_generated(dlt_source *s)
{
    s->reuse = 1;
}

void dlt_source_release(dlt_source *s)
{
    if (s->released >= s->acquired)
        return;
    s->released++;
    if (s->loader)
        dlt_loader_release(s->loader);
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
