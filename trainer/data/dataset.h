/* SPDX-License-Identifier: Apache-2.0 */
/* dataset: indexed access to encoded images and their labels, from an ImageFolder tree
 * (ROOT/CLASS/IMAGE.JPEG, classes sorted by name as torchvision; or a flat folder with a labels
 * file) or an MXNet RecordIO pair (.rec + .idx, as im2rec writes). Reads are thread-safe. */
#ifndef DLT_DATASET_H
#define DLT_DATASET_H

#include "common/status.h"
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define DLT_DATASET_MAX_FILE (64u << 20)

typedef struct dlt_dataset dlt_dataset;

/* What an ImageFolder holds that the data set leaves out (each count with its first example). */
typedef struct {
    int64_t missing;    /* labels-file lines naming a file that is not there (or not a regular file) */
    int64_t unlisted;   /* images of a labels-file folder that no line names */
    int64_t nested;     /* folders inside class folders (ImageFolder reads one level) */
    int64_t images;     /* other image files torchvision would read (.bmp, .webp, ...): not decoded here */
    int64_t other;      /* other files (not images) */
    int64_t unreadable; /* dangling symbolic links and entries that cannot be looked at */
    int64_t special;    /* entries named as images that are no regular files (a FIFO, a device, a socket) */
    char first_missing[320], first_unlisted[320], first_nested[320], first_images[320], first_other[320],
        first_unreadable[320], first_special[320];
} dlt_dataset_left_out;

/* ImageFolder. labels_file: NULL for class subdirectories; else ROOT holds the images and each
 * line of labels_file is "FILENAME CLASS" (CLASS: a name, mapped in sorted order, or an index). */
int dlt_dataset_open_folder(dlt_dataset **out, const char *root, const char *labels_file, dlt_err *err);
/* MXNet RecordIO: path is the .rec file; the .idx beside it lists "key<TAB>offset" per record. */
int dlt_dataset_open_recordio(dlt_dataset **out, const char *rec_path, dlt_err *err);
void dlt_dataset_close(dlt_dataset *d);

int64_t dlt_dataset_count(const dlt_dataset *d);
/* 1 while the dataset's root directory (or .rec file) is still there. */
int dlt_dataset_present(const dlt_dataset *d);
const char *dlt_dataset_root(const dlt_dataset *d);
int dlt_dataset_classes(const dlt_dataset *d);
/* The class names one a line, in class order (malloc'd; the caller frees), or NULL when the data
 * has none (RecordIO without a PATH.classes file). */
char *dlt_dataset_class_list(const dlt_dataset *d);
/* Maps the data's classes by name onto list (class names one a line, in the order the model's
 * outputs mean them): labels become positions in list, the class count list's. A labels file or
 * RecordIO may give a class as its position (0..N-1) instead of a name. A subset is fine; a class
 * not in list is refused naming it. note receives what to tell the user ("" when nothing). */
int dlt_dataset_map_classes(dlt_dataset *d, const char *list, char *note, size_t notelen, dlt_err *err);
/* Digests that let ranks check they see the same data: files (the image paths under the root and
 * their labels; for RecordIO the index and the file size) and classes (count and names). */
void dlt_dataset_digest(const dlt_dataset *d, uint64_t *files, uint64_t *classes);
/* What the folder held that the data set left out; NULL for RecordIO. */
const dlt_dataset_left_out *dlt_dataset_left(const dlt_dataset *d);
/* One sentence naming what was left out, into buf; returns how many of those entries --strict
 * refuses (all but plain non-image files), and 0 with buf "" when nothing was left out. */
int64_t dlt_dataset_describe_left_out(const dlt_dataset *d, char *buf, size_t len);
const char *dlt_dataset_class_name(const dlt_dataset *d, int c);

/* Reads sample i into *buf (grown as needed, caller frees) and its label; name identifies it in
 * messages (path, or rec file and offset). Returns 0 or a negative status with err filled. */
int dlt_dataset_read(dlt_dataset *d, int64_t i, uint8_t **buf, size_t *cap, size_t *len, int32_t *label, char *name,
                     size_t namelen, dlt_err *err);

/* RecordIO writing (the packer): one record with an im2rec header (flag 0, label, id). */
typedef struct {
    int fd;
    FILE *idx;
    uint64_t offset;
} dlt_recordio_writer;
/* Whether path names a RecordIO file (it ends in ".rec"), not an image folder. */
int dlt_recordio_path(const char *path);
/* A file beside PATH.rec: PATH + ext (".idx", ".classes"); a path without ".rec" gets ext appended.
 * The one place that naming (im2rec's) is made. */
void dlt_recordio_sibling(const char *rec_path, const char *ext, char *out, size_t outlen);
int dlt_recordio_create(dlt_recordio_writer *w, const char *rec_path, dlt_err *err);
int dlt_recordio_append(dlt_recordio_writer *w, uint64_t id, float label, const uint8_t *data, size_t len,
                        dlt_err *err);
int dlt_recordio_close(dlt_recordio_writer *w, dlt_err *err);
/* PATH.classes beside PATH.rec: d's class names in label order, one a line (the reader takes the
 * class count and the names from it). */
int dlt_recordio_write_classes(const char *rec_path, const dlt_dataset *d, dlt_err *err);

#endif
