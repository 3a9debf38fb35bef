/* SPDX-License-Identifier: Apache-2.0 */
/* mkjpegs: writes JPEG test data with libjpeg-turbo.
 *   mkjpegs folder DIR CLASSES PER_CLASS W H [variants] : DIR/train/cNN/img_NNNN.JPEG and DIR/val/cNN/...,
 *       each class a coloured square on noise (learnable); "variants" mixes grayscale, CMYK,
 *       progressive and odd sizes, and plants corrupt files (truncated, empty, not a JPEG).
 *   mkjpegs bench DIR COUNT W H QUALITY : COUNT photo-like images (smooth gradients + noise). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <turbojpeg.h>
#include <unistd.h>

#include "trainer/common/rng.h"

static int _write(const char *path, const unsigned char *buf, unsigned long len)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(buf, 1, len, f) != len) {
        fprintf(stderr, "mkjpegs: cannot write %s: %s\n", path, strerror(errno));
        if (f)
            fclose(f);
        return -1;
    }
    return fclose(f);
}

static int _jpeg(const char *path, const unsigned char *rgb, int w, int h, int kind, int quality)
{
    /* A fresh handle per image: libjpeg-turbo 2.1 keeps progressive-mode state in a reused
     * compressor, and the next baseline file comes out with broken Huffman tables. */
    tjhandle tj = tjInitCompress();
    unsigned char *out = NULL, *src = (unsigned char *)rgb, *cmyk = NULL;
    unsigned long len = 0;
    int pf = TJPF_RGB, samp = TJSAMP_420, flags = 0, rc;
    if (kind == 1)
        samp = TJSAMP_GRAY;
    if (kind == 2) { /* CMYK, stored inverted as Adobe does */
        cmyk = malloc((size_t)w * h * 4);
        for (int p = 0; p < w * h; p++) {
            cmyk[4 * p] = rgb[3 * p];
            cmyk[4 * p + 1] = rgb[3 * p + 1];
            cmyk[4 * p + 2] = rgb[3 * p + 2];
            cmyk[4 * p + 3] = 255;
        }
        src = cmyk;
        pf = TJPF_CMYK;
        samp = TJSAMP_444;
    }
    if (kind == 3)
        flags |= TJFLAG_PROGRESSIVE;
    rc = tjCompress2(tj, src, w, 0, h, pf, &out, &len, samp, quality, flags);
    free(cmyk);
    if (rc != 0) {
        fprintf(stderr, "mkjpegs: %s\n", tjGetErrorStr2(tj));
        tjDestroy(tj);
        return -1;
    }
    tjDestroy(tj);
    rc = _write(path, out, len);
    tjFree(out);
    return rc;
}

static void _image(dlt_rng *r, int cls, int w, int h, int photo, unsigned char *rgb)
{
    dlt_rng c;
    dlt_rng_seed(&c, 77, (uint64_t)cls + 1);
    int side = (w < h ? w : h) / 3, x0 = (int)dlt_rng_below(&c, (uint32_t)(w - side)), y0 = (int)dlt_rng_below(&c, (uint32_t)(h - side));
    unsigned char col[3] = {(unsigned char)(80 + dlt_rng_below(&c, 170)), (unsigned char)(80 + dlt_rng_below(&c, 170)),
                            (unsigned char)(80 + dlt_rng_below(&c, 170))};
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int k = 0; k < 3; k++) {
                int v = photo ? (int)(128 + 100 * ((x * (k + 1) + y * (3 - k)) % 256 - 128) / 128) + (int)dlt_rng_below(r, 24)
                              : (int)dlt_rng_below(r, 64);
                if (!photo && x >= x0 && x < x0 + side && y >= y0 && y < y0 + side)
                    v = col[k];
                rgb[((size_t)y * w + x) * 3 + k] = (unsigned char)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
}

int main(int argc, char **argv)
{
    dlt_rng r;
    char path[4096];
    dlt_rng_seed(&r, 5, 9);
    if (argc >= 8 && !strcmp(argv[1], "folder")) {
        int classes = atoi(argv[3]), per = atoi(argv[4]), w = atoi(argv[5]), h = atoi(argv[6]);
        int variants = argc > 7 && !strcmp(argv[7], "variants");
        unsigned char *rgb = malloc((size_t)(2 * w) * (2 * h) * 3);
        for (int split = 0; split < 2; split++) {
            const char *sn = split ? "val" : "train";
            snprintf(path, sizeof(path), "%s/%s", argv[2], sn);
            mkdir(argv[2], 0755);
            mkdir(path, 0755);
            for (int c = 0; c < classes; c++) {
                snprintf(path, sizeof(path), "%s/%s/c%02d", argv[2], sn, c);
                mkdir(path, 0755);
                for (int i = 0; i < per; i++) {
                    int kind = variants ? i % 4 : 0, iw = w, ih = h;
                    if (variants && i % 5 == 4)
                        iw = w * 2, ih = h / 2 + 3; /* odd aspect and size */
                    _image(&r, c, iw, ih, 0, rgb);
                    snprintf(path, sizeof(path), "%s/%s/c%02d/img_%04d.JPEG", argv[2], sn, c, i);
                    if (_jpeg(path, rgb, iw, ih, kind, 90))
                        return 1;
                }
            }
        }
        if (variants) {
            /* Planted damage: truncated, empty, not a JPEG at all. */
            FILE *f;
            snprintf(path, sizeof(path), "%s/train/c00/img_0000.JPEG", argv[2]);
            if (truncate(path, 300) != 0)
                return 1;
            snprintf(path, sizeof(path), "%s/train/c01/empty.JPEG", argv[2]);
            f = fopen(path, "w");
            if (f)
                fclose(f);
            snprintf(path, sizeof(path), "%s/train/c01/notajpeg.jpg", argv[2]);
            f = fopen(path, "w");
            if (f) {
                fputs("\x89PNG\r\n\x1a\n this is not a jpeg", f);
                fclose(f);
            }
        }
        free(rgb);
        return 0;
    }
    if (argc >= 7 && !strcmp(argv[1], "bench")) {
        int n = atoi(argv[3]), w = atoi(argv[4]), h = atoi(argv[5]), q = atoi(argv[6]);
        unsigned char *rgb = malloc((size_t)w * h * 3);
        mkdir(argv[2], 0755);
        for (int i = 0; i < n; i++) {
            _image(&r, i, w, h, 1, rgb);
            snprintf(path, sizeof(path), "%s/img_%04d.jpg", argv[2], i);
            if (_jpeg(path, rgb, w, h, 0, q))
                return 1;
        }
        free(rgb);
        return 0;
    }
    fprintf(stderr, "usage: mkjpegs folder DIR CLASSES PER_CLASS W H [variants] | mkjpegs bench DIR COUNT W H QUALITY\n");
    return 2;
}
