/* SPDX-License-Identifier: Apache-2.0 */
/* folder_index: an image folder's list kept in a file inside it (DLT_FOLDER_INDEX_NAME, which the
 * lister never reads: its name starts with a dot), for repeated jobs on the same data: rank 0 reads
 * it instead of listing 1.28M entries. The file holds the list (folder_list.h), the modification
 * time of each class folder (adding, removing or renaming an image changes its folder's) and a
 * checksum. A damaged or stale index is never used silently: the reader says why and the folder is
 * listed instead. */
#ifndef DLT_FOLDER_INDEX_H
#define DLT_FOLDER_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "trainer/data/dataset.h"

#define DLT_FOLDER_INDEX_NAME ".dltrain-index"
/* The largest index read (ImageNet's is about 20 MB). */
#define DLT_FOLDER_INDEX_MAX (1ull << 30)

/* Lists root (ImageFolder with class folders) and writes root/DLT_FOLDER_INDEX_NAME through a
 * temporary name. *images receives the count. */
int dlt_folder_index_write(const char *root, int64_t *images, dlt_err *err);

/* root's index: 0 when it is there and still matches the folder, with *out the data set it lists
 * (built once, while checking it) and, when list is not NULL, the list itself in *list (malloc'd,
 * for other ranks); 1 when there is none; -1 when there is one that cannot be used, with why
 * ("damaged: checksum mismatch", "stale: class folder n01440764 changed since it was made", ...). */
int dlt_folder_index_read(const char *root, dlt_dataset **out, uint8_t **list, size_t *len, char *why, size_t whylen);

#endif
