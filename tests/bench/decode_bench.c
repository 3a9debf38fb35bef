/* SPDX-License-Identifier: Apache-2.0 */
/* decode_bench DIR [SECONDS]: per-core images/s of dltrain's training decode (JPEG decode with DCT
 * scaling + RandomResizedCrop + flip + resize to 224) over the .jpg files of DIR, single-threaded,
 * and of a plain full-size decode to RGB of the same files with libjpeg-turbo (as tjbench does).
 * tests/bench/decode_bench.sh runs it beside tjbench itself and prints the ratios. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <turbojpeg.h>

#include "trainer/data/transform.h"

static double _now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    DIR *d;
    struct dirent *e;
    unsigned char *files[256];
    size_t lens[256];
    int n = 0, scale_hist[9] = {0};
    double secs = argc > 2 ? atof(argv[2]) : 3.0, t0, t_ours, t_full;
    long done = 0, done_full = 0;
    static uint8_t out[224 * 224 * 3];
    unsigned char *rgb = NULL;
    dlt_err err = DLT_ERR_INIT;
    dlt_decoder *dec = dlt_decoder_create();
    tjhandle tj = tjInitDecompress();
    dlt_rng r;
    if (argc < 2 || !(d = opendir(argv[1]))) {
        fprintf(stderr, "usage: decode_bench DIR [SECONDS]\n");
        return 2;
    }
    while ((e = readdir(d)) && n < 256) {
        char p[4096];
        FILE *f;
        long sz;
        if (!strstr(e->d_name, ".jpg"))
            continue;
        snprintf(p, sizeof(p), "%s/%s", argv[1], e->d_name);
        f = fopen(p, "rb");
        if (!f)
            continue;
        fseek(f, 0, SEEK_END);
        sz = ftell(f);
        fseek(f, 0, SEEK_SET);
        files[n] = malloc((size_t)sz);
        lens[n] = fread(files[n], 1, (size_t)sz, f);
        fclose(f);
        n++;
    }
    closedir(d);
    if (!n || !dec || !tj)
        return 1;
    dlt_rng_seed(&r, 1, 1);
    t0 = _now();
    while (_now() - t0 < secs) {
        int num, den;
        if (dlt_decode_transform(dec, files[done % n], lens[done % n], 224, 1, &r, out, dlt_err_fresh(&err)) != 0) {
            fprintf(stderr, "decode_bench: %s\n", err.msg);
            return 1;
        }
        dlt_decoder_last_scale(dec, &num, &den);
        scale_hist[den > 0 ? 8 * num / den : 0]++;
        done++;
    }
    t_ours = _now() - t0;
    t0 = _now();
    while (_now() - t0 < secs) {
        int w, h, ss, cs;
        unsigned char *buf = files[done_full % n];
        tjDecompressHeader3(tj, buf, lens[done_full % n], &w, &h, &ss, &cs);
        rgb = rgb ? rgb : malloc((size_t)4096 * 4096 * 3);
        if (tjDecompress2(tj, buf, lens[done_full % n], rgb, w, 0, h, TJPF_RGB, 0) != 0)
            return 1;
        done_full++;
    }
    t_full = _now() - t0;
    printf("{\"files\":%d,\"ours_images_per_s\":%.1f,\"full_decode_images_per_s\":%.1f,\"dct_scales_eighths\":[%d,%d,%"
           "d,%d,"
           "%d,%d,%d,%d]}\n",
           n, done / t_ours, done_full / t_full, scale_hist[1], scale_hist[2], scale_hist[3], scale_hist[4],
           scale_hist[5], scale_hist[6], scale_hist[7], scale_hist[8]);
    return 0;
}
