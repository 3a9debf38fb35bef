/* SPDX-License-Identifier: Apache-2.0 */
/* device_choice: a task's GPU among the visible ones; one GPU per rank. */
#include "config.h"

#include "trainer/backend/device_choice.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/pci_busid.h"
#include "common/status.h"

int dlt_device_visible_count(const char *cvd)
{
    int n = 1;
    if (!cvd)
        return -1;
    if (!*cvd)
        return 0;
    for (const char *p = cvd; *p; p++)
        n += *p == ',';
    return n;
}

int dlt_device_visible_entry(const char *cvd, int n, char *out, size_t outlen)
{
    const char *p = cvd;
    size_t len;
    if (!cvd || n < 0 || n >= dlt_device_visible_count(cvd))
        return -1;
    while (n-- > 0)
        p = strchr(p, ',') + 1;
    len = strcspn(p, ",");
    snprintf(out, outlen, "%.*s", (int)len, p);
    return 0;
}

int dlt_device_choose(int requested, int plugin_bound, int local_rank, int visible, int *device, dlt_err *err)
{
    if (requested >= 0) {
        if (visible > 0 && requested >= visible)
            return dlt_fail(err, -ENODEV, "--device %d: this task sees %d GPU(s) (0..%d)", requested, visible,
                            visible - 1);
        *device = requested;
        return 0;
    }
    if (plugin_bound || visible <= 0 || local_rank < 0)
        *device = 0;
    else
        *device = local_rank % visible;
    return 0;
}

static int _claim_cmp(const void *a, const void *b)
{
    const dlt_device_claim *x = *(const dlt_device_claim *const *)a, *y = *(const dlt_device_claim *const *)b;
    int c = strcmp(x->host, y->host);
    if (!c)
        c = strcmp(x->gpu, y->gpu);
    return c ? c : (x > y) - (x < y); /* then in the order given */
}

/* Sorted by host and GPU, two ranks on one GPU are neighbours: n log n, not n^2 pairs (524k per
 * rank at 1,024 ranks). Of the neighbours found, the pair whose first entry comes first in the order
 * given is named: the two lowest entries of that group, as a loop over the ranks in order finds. */
int dlt_device_check_distinct(const dlt_device_claim *all, int n, dlt_err *err)
{
    const dlt_device_claim **by = n > 1 ? malloc((size_t)n * sizeof(*by)) : NULL, *first = NULL, *second = NULL;
    if (n <= 1)
        return 0;
    if (!by)
        return dlt_fail(err, -ENOMEM, "out of memory checking %d ranks' GPUs", n);
    for (int i = 0; i < n; i++)
        by[i] = &all[i];
    qsort(by, (size_t)n, sizeof(*by), _claim_cmp);
    for (int i = 1; i < n; i++)
        if (!strcmp(by[i]->host, by[i - 1]->host) && !strcmp(by[i]->gpu, by[i - 1]->gpu) &&
            (!first || by[i - 1] < first)) {
            first = by[i - 1];
            second = by[i];
        }
    free(by);
    if (!first)
        return 0;
    return dlt_fail(err, -EBUSY,
                    "ranks %d and %d on %s would both train on GPU %s: give each task its own GPU "
                    "(srun --gpus-per-task=1, or --gpus-per-node=N with N tasks per node, or "
                    "--dl-train), or pick one with --device",
                    first->rank, second->rank, first->host, first->gpu);
}

int dlt_device_pci_check(const char *bound, const char *opened, int device, dlt_err *err)
{
    char b[32], o[32];
    if (!bound || !*bound || !opened || !*opened)
        return 1;
    if (dlt_pci_busid_normalize(bound, b, sizeof(b)) != 0)
        return dlt_fail(err, -EINVAL,
                        "DLT_GPU_PCI='%s' is not a PCI bus id (the plugin writes "
                        "0000:1a:00.0; unset it when no plugin bound this task)",
                        bound);
    if (dlt_pci_busid_normalize(opened, o, sizeof(o)) != 0)
        return dlt_fail(err, -EINVAL, "CUDA device %d reports PCI bus id '%s', which is not one", device, opened);
    if (strcmp(b, o) != 0)
        return dlt_fail(err, -ENODEV,
                        "the plugin bound this task to GPU %s (DLT_GPU_PCI) but CUDA device %d "
                        "is GPU %s: training there would share another task's GPU (drop --device, and do not change "
                        "CUDA_VISIBLE_DEVICES after the plugin set it)",
                        b, device, o);
    return 0;
}

int dlt_device_sharing_allowed(const char *v)
{
    return v && !strcmp(v, "1");
}
