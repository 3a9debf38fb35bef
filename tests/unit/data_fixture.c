/* SPDX-License-Identifier: Apache-2.0 */
/* data_fixture: inputs for the data pipeline's unit tests (data_fixture.h). */
#include "config.h"

#include "tests/unit/data_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <turbojpeg.h>
#include <unistd.h>

#include <cmocka.h>

char g_dir[256];

void dlt_test_dir_make(const char *name)
{
    snprintf(g_dir, sizeof(g_dir), "/tmp/dlt-test-%s-%d", name, (int)getpid());
    mkdir(g_dir, 0755);
}

int dlt_test_dir_remove(void)
{
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* kind: 0 RGB 4:2:0, 1 grayscale, 2 CMYK, 3 progressive 4:2:0; + 16: sharp colour texture
 * (per-pixel noise: the chroma edges where cropped decoding could differ from a whole decode). */
unsigned char *dlt_test_jpeg(int w, int h, int kind, unsigned long *len)
{
    int textured = kind & 16;
    kind &= 15;
    tjhandle tj = tjInitCompress();
    unsigned char *rgb = malloc((size_t)w * h * 4), *out = NULL;
    int pf = kind == 2 ? TJPF_CMYK : TJPF_RGB, samp = kind == 1 ? TJSAMP_GRAY : kind == 2 ? TJSAMP_444 : TJSAMP_420;
    const int ps = tjPixelSize[pf];
    /* Smooth gradients (a photo survives DCT downscaling; a one-pixel pattern would average out). */
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int k = 0; k < ps; k++)
                rgb[((size_t)y * w + x) * ps + k] =
                    (unsigned char)(k == 3     ? 255
                                    : textured ? (int)(((uint32_t)x * 73856093u ^ (uint32_t)y * 19349663u ^
                                                        (uint32_t)k * 83492791u) >>
                                                       13) %
                                                     256
                                               : (x * 200 / w + y * 50 / h + 60 * k) % 256);
    assert_int_equal(tjCompress2(tj, rgb, w, w * ps, h, pf, &out, len, samp, 90, kind == 3 ? TJFLAG_PROGRESSIVE : 0),
                     0);
    tjDestroy(tj);
    free(rgb);
    return out;
}

void dlt_test_write(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    fclose(f);
}

/* Writes text to path (the index under test). */
void dlt_test_write_str(const char *path, const char *text)
{
    dlt_test_write(path, text, strlen(text));
}

void dlt_test_make_folder(const char *root, const char *const *classes, int ncls, int per, int bad_in_first)
{
    char p[512];
    mkdir(root, 0755);
    for (int c = 0; c < ncls; c++) {
        snprintf(p, sizeof(p), "%s/%s", root, classes[c]);
        mkdir(p, 0755);
        for (int i = 0; i < per; i++) {
            unsigned long len;
            unsigned char *j = dlt_test_jpeg(40 + 8 * c, 30 + 4 * i, i % 4, &len);
            snprintf(p, sizeof(p), "%s/%s/img%02d.JPEG", root, classes[c], i);
            dlt_test_write(p, j, (c == 0 && i < bad_in_first) ? len / 3 : len);
            tjFree(j);
        }
    }
    snprintf(p, sizeof(p), "%s/%s/README.txt", root, classes[0]);
    dlt_test_write(p, "not an image", 12); /* ignored: not a .JPEG/.jpg */
}
