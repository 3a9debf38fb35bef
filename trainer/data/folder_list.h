/* SPDX-License-Identifier: Apache-2.0 */
/* folder_list: an ImageFolder's list (class names, image paths under the root, labels, and what
 * was left out) as one compact, checksummed byte string, so that one rank scans a folder and the
 * others build the same data set from its list instead of scanning the shared filesystem again.
 * Paths are stored relative to the root, front-coded (each name shares its prefix with the one
 * before), labels as varints: ImageNet's 1,281,167 paths fit in about 20 MB. */
#ifndef DLT_FOLDER_LIST_H
#define DLT_FOLDER_LIST_H

#include <stddef.h>
#include <stdint.h>

#include "common/status.h"
#include "trainer/data/dataset.h"

/* d (a folder data set) as a list: *out malloc'd (caller frees), *len its size. */
int dlt_folder_list_pack(const dlt_dataset *d, uint8_t **out, size_t *len, dlt_err *err);
/* The data set a list describes, with its paths under root (this rank's path of the same folder).
 * A list that is cut, damaged (checksum) or of another format is refused. */
int dlt_folder_list_open(dlt_dataset **out, const char *root, const uint8_t *buf, size_t len, dlt_err *err);
/* Whether this node's filesystem holds the data set's files: count of them chosen by seed, each
 * looked at with stat(). 0, or -errno with the first missing file and why in err. */
int dlt_folder_list_check_sample(const dlt_dataset *d, int count, uint64_t seed, dlt_err *err);

#endif
