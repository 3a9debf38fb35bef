/* SPDX-License-Identifier: Apache-2.0 */
/* dataset_internal: the data set's representation, shared by the files of trainer/data that build
 * one (dataset.c: scanning a folder, reading RecordIO; folder_list.c: from a list another rank
 * made). Nothing outside trainer/data includes it. */
#ifndef DLT_DATASET_INTERNAL_H
#define DLT_DATASET_INTERNAL_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "trainer/data/dataset.h"
#include "common/status.h"

struct dlt_dataset {
    int recordio;
    int64_t n;
    int nclasses;
    char **class_names;
    char **paths;      /* folder: file paths below root ("CLASS/NAME.JPEG") */
    char *path_arena;  /* folder built from a shared list: every path in one block (paths point in) */
    int32_t *labels;   /* folder: labels; recordio: unused */
    uint64_t *offsets; /* recordio: record offsets */
    long long *idx_lines; /* recordio: the index line of each record (for messages) */
    int numbered;         /* class names may be numbers (a labels file, RecordIO) */
    int local_classes;    /* classes as the data numbers them (before dlt_dataset_map_classes) */
    int32_t *label_map;   /* the data's class -> the class list it was mapped to; NULL: the same */
    int fd;            /* recordio */
    char rec_path[PATH_MAX];
    char root[PATH_MAX]; /* folder root, or the .rec path */
    dlt_dataset_left_out left;
};


/* Helpers of both kinds (dataset.c). */
int dlt_ds_cmp_str(const void *a, const void *b); /* qsort/bsearch of char* */
void dlt_ds_free_list(char **v, int64_t n);
int dlt_ds_grow(uint8_t **buf, size_t *cap, size_t need);

/* Image i's path, root/paths[i] (imagefolder.c): 0, or -ENAMETOOLONG when it does not fit. */
int dlt_imagefolder_path(const dlt_dataset *d, int64_t i, char *out, size_t outlen);

/* Sample i of each kind into *buf (dlt_dataset_read checked the range). */
int dlt_imagefolder_read(dlt_dataset *d, int64_t i, uint8_t **buf, size_t *cap, size_t *len, int32_t *label,
                         char *name, size_t namelen, dlt_err *err);
int dlt_recordio_read(dlt_dataset *d, int64_t i, uint8_t **buf, size_t *cap, size_t *len, int32_t *label,
                      char *name, size_t namelen, dlt_err *err);

#endif
