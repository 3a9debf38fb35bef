/* SPDX-License-Identifier: Apache-2.0 */
/* data_fixture: what the data pipeline's unit tests (test_transform.c, test_dataset.c,
 * test_loader.c) make their inputs with: JPEGs encoded here with libjpeg-turbo, files, ImageFolder
 * trees, and a scratch folder per test program. */
#ifndef DLT_TEST_DATA_FIXTURE_H
#define DLT_TEST_DATA_FIXTURE_H

#include <stddef.h>

/* The test program's scratch folder (made by dlt_test_dir_make, removed by dlt_test_dir_remove). */
extern char g_dir[256];
void dlt_test_dir_make(const char *name);
int dlt_test_dir_remove(void);

/* kind: 0 RGB 4:2:0, 1 grayscale, 2 CMYK, 3 progressive 4:2:0; + 16: sharp colour texture. The
 * JPEG is tjAlloc'd (tjFree it). */
unsigned char *dlt_test_jpeg(int w, int h, int kind, unsigned long *len);
void dlt_test_write(const char *path, const void *p, size_t n);
void dlt_test_write_str(const char *path, const char *text);
/* root/CLASS/imgNN.JPEG for each class, per images each (the first bad_in_first of the first class
 * cut to a third), and a README.txt that is no image. */
void dlt_test_make_folder(const char *root, const char *const *classes, int ncls, int per, int bad_in_first);

#endif
