/* SPDX-License-Identifier: Apache-2.0 */
/* dataset: indexed access to encoded images and their labels, from an ImageFolder tree
 * (ROOT/CLASS/IMAGE.JPEG, classes sorted by name as torchvision; or a flat folder with a labels
 * file) or an MXNet RecordIO pair (.rec + .idx, as im2rec writes). Reads are thread-safe. */
#ifndef DLT_DATASET_H
#define DLT_DATASET_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define DLT_DATASET_MAX_FILE (64u << 20)

typedef struct dlt_dataset dlt_dataset;

/* ImageFolder. labels_file: NULL for class subdirectories; else ROOT holds the images and each
 * line of labels_file is "FILENAME CLASS" (CLASS: a name, mapped in sorted order, or an index). */
int dlt_dataset_open_folder(dlt_dataset **out, const char *root, const char *labels_file, char *err, size_t errlen);
/* MXNet RecordIO: path is the .rec file; the .idx beside it lists "key<TAB>offset" per record. */
int dlt_dataset_open_recordio(dlt_dataset **out, const char *rec_path, char *err, size_t errlen);
void dlt_dataset_close(dlt_dataset *d);

int64_t dlt_dataset_count(const dlt_dataset *d);
/* 1 while the dataset's root directory (or .rec file) is still there. */
int dlt_dataset_present(const dlt_dataset *d);
const char *dlt_dataset_root(const dlt_dataset *d);
int dlt_dataset_classes(const dlt_dataset *d);
const char *dlt_dataset_class_name(const dlt_dataset *d, int c);

/* Reads sample i into *buf (grown as needed, caller frees) and its label; name identifies it in
 * messages (path, or rec file and offset). Returns 0 or a negative status with err filled. */
int dlt_dataset_read(dlt_dataset *d, int64_t i, uint8_t **buf, size_t *cap, size_t *len, int32_t *label, char *name,
                     size_t namelen, char *err, size_t errlen);

/* RecordIO writing (the packer): one record with an im2rec header (flag 0, label, id). */
typedef struct {
    int fd;
    FILE *idx;
    uint64_t offset;
} dlt_recordio_writer;
int dlt_recordio_create(dlt_recordio_writer *w, const char *rec_path, char *err, size_t errlen);
int dlt_recordio_append(dlt_recordio_writer *w, uint64_t id, float label, const uint8_t *data, size_t len, char *err,
                        size_t errlen);
int dlt_recordio_close(dlt_recordio_writer *w, char *err, size_t errlen);

#endif
