/* SPDX-License-Identifier: Apache-2.0 */
/* dataset_internal: the data set's representation, shared by the files of trainer/data that build
 * one (imagefolder.c: scanning a folder; recordio.c: a RecordIO pair; folder_list.c: a folder from
 * a list another rank made) and by dataset.c, what every kind shares. The files form a tree:
 * dataset.c calls none of the others (a read goes through the reader table the opener set,
 * d->ops), and the openers call dataset.c. Nothing outside trainer/data includes it. */
#ifndef DLT_DATASET_INTERNAL_H
#define DLT_DATASET_INTERNAL_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "trainer/data/dataset.h"

/* A kind's reader: sample i into *buf (dlt_dataset_read checked the range). */
typedef struct {
    int (*read)(dlt_dataset *d, int64_t i, uint8_t **buf, size_t *cap, size_t *len, int32_t *label, char *name,
                size_t namelen, dlt_err *err);
} dlt_dataset_ops;

/* Each kind's table (imagefolder.c, recordio.c), set by its opener. */
extern const dlt_dataset_ops dlt_imagefolder_ops;
extern const dlt_dataset_ops dlt_recordio_ops;

struct dlt_dataset {
    const dlt_dataset_ops *ops; /* the kind's reader */
    int recordio;
    int64_t n;
    int nclasses;
    char **class_names;
    char **paths;         /* folder: file paths below root ("CLASS/NAME.JPEG") */
    char *path_arena;     /* folder built from a shared list: every path in one block (paths point in) */
    int32_t *labels;      /* folder: labels; recordio: unused */
    uint64_t *offsets;    /* recordio: record offsets */
    long long *idx_lines; /* recordio: the index line of each record (for messages) */
    int numbered;         /* class names may be numbers (a labels file, RecordIO) */
    int local_classes;    /* classes as the data numbers them (before dlt_dataset_map_classes) */
    int32_t *label_map;   /* the data's class -> the class list it was mapped to; NULL: the same */
    int fd;               /* recordio */
    char rec_path[PATH_MAX];
    char root[PATH_MAX]; /* folder root, or the .rec path */
    dlt_dataset_left_out left;
};

/* Helpers of every kind (dataset.c). */
int dlt_ds_cmp_str(const void *a, const void *b); /* qsort/bsearch of char* */
void dlt_ds_free_list(char **v, int64_t n);
int dlt_ds_grow(uint8_t **buf, size_t *cap, size_t need);

/* Image i's path, root/paths[i] (imagefolder.c): 0, or -ENAMETOOLONG when it does not fit. */
int dlt_imagefolder_path(const dlt_dataset *d, int64_t i, char *out, size_t outlen);

#endif
