/* SPDX-License-Identifier: Apache-2.0 */
/* cmd_data: `dltrain data pack`: an ImageFolder into an MXNet RecordIO pair (.rec + .idx), each
 * image optionally re-encoded with its shorter side resized (e.g. 256 or 160), showing its
 * progress (progress.h). Unreadable images are reported and left out. */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stb/stb_image_resize.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <turbojpeg.h>
#include <unistd.h>

#include "common/exit_status.h"
#include "common/io.h"
#include "common/progress.h"
#include "trainer/cli/commands.h"
#include "trainer/cli/opt_table.h"
#include "trainer/data/dataset.h"
#include "trainer/data/folder_index.h"
#include "trainer/data/transform.h"

/* Decodes (the training path's decoder: CMYK and grayscale handled), resizes the shorter side to
 * `side`, re-encodes at `quality`. */
static int _resize_jpeg(dlt_decoder *dec, tjhandle enc, const uint8_t *in, size_t len, int side, int quality,
                        unsigned char **out, unsigned long *outlen, dlt_err *err)
{
    const uint8_t *rgb;
    int w, h, nw, nh, rc = -1;
    unsigned char *small;
    if (dlt_decode_rgb(dec, in, len, &rgb, &w, &h, err) != 0)
        return -1;
    nw = w <= h ? side : (int)((long)w * side / h);
    nh = w <= h ? (int)((long)h * side / w) : side;
    small = malloc((size_t)nw * nh * 3);
    if (!small)
        dlt_fail(err, -EIO, "out of memory");
    else if (!stbir_resize_uint8(rgb, w, h, w * 3, small, nw, nh, nw * 3, 3))
        dlt_fail(err, -EIO, "resize failed");
    else if (tjCompress2(enc, small, nw, 0, nh, TJPF_RGB, out, outlen, TJSAMP_420, quality, 0) != 0)
        dlt_fail(err, -EIO, "encode failed: %s", tjGetErrorStr2(enc));
    else
        rc = 0;
    free(small);
    return rc;
}

/* OUT.rec's companions: base is OUT without ".rec" (OUT itself when it has no such ending). */
static void _out_names(const char *rec, char *idx, char *classes, size_t len)
{
    dlt_recordio_sibling(rec, ".idx", idx, len);
    dlt_recordio_sibling(rec, ".classes", classes, len);
}

/* Whether OUT would land inside SRC_DIR (packing would read its own output, or overwrite an
 * image): compared as real paths, the output's folder resolved (the file need not exist). */
static int _inside(const char *src, const char *out)
{
    char s[PATH_MAX], d[PATH_MAX], dir[PATH_MAX];
    const char *slash = strrchr(out, '/');
    size_t n;
    if (!realpath(src, s))
        return 0;
    snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - out) : 1, slash ? (slash == out ? "/" : out) : ".");
    if (!realpath(dir, d))
        return 0;
    n = strlen(s);
    return !strcmp(d, s) || (!strncmp(d, s, n) && (d[n] == '/' || !strcmp(s, "/")));
}

/* Moves the finished temporary files to their names: the data, the class names, the index last
 * (a reader that finds the index finds a complete pack). */
static int _commit(const char *const tmp[3], const char *const fin[3])
{
    static const int order[3] = {0, 2, 1};
    for (int k = 0; k < 3; k++)
        if (rename(tmp[order[k]], fin[order[k]]) != 0) {
            fprintf(stderr, "dltrain: cannot rename %s to %s: %s\n", tmp[order[k]], fin[order[k]], strerror(errno));
            return -1;
        }
    return 0;
}

/* `dltrain data index DIR`: DIR's list kept in DIR/.dltrain-index for later jobs; with the
 * --data layout (DIR/train, DIR/val) each of those. */
static int _cmd_index(int argc, char **argv)
{
    dlt_err err = DLT_ERR_INIT;
    char sub[PATH_MAX];
    const char *parts[] = {"train", "val"};
    int done = 0;
    struct stat st;
    if (argc != 3 || argv[2][0] == '-') {
        if (argc == 3 && (!strcmp(argv[2], "--help") || !strcmp(argv[2], "-h"))) {
            printf("usage: dltrain data index DIR\n  Lists the image folder DIR (or DIR/train and DIR/val) once and "
                   "keeps the list in DIR/%s;\n  later jobs on DIR read it instead of listing the folder, as long "
                   "as no class folder changed.\n",
                   DLT_FOLDER_INDEX_NAME);
            return 0;
        }
        fprintf(stderr, "usage: dltrain data index DIR\n");
        return DLT_EXIT_USAGE;
    }
    for (int k = 0; k < 2; k++) {
        int64_t images = 0;
        if (snprintf(sub, sizeof(sub), "%s/%s", argv[2], parts[k]) >= (int)sizeof(sub) || stat(sub, &st) != 0 ||
            !S_ISDIR(st.st_mode))
            continue;
        if (dlt_folder_index_write(sub, &images, &err) != 0) {
            fprintf(stderr, "dltrain: data index: %s\n", err.msg);
            return 1;
        }
        printf("dltrain: indexed %s: %lld images, list in %s/%s\n", sub, (long long)images, sub, DLT_FOLDER_INDEX_NAME);
        done++;
    }
    if (!done) {
        int64_t images = 0;
        if (dlt_folder_index_write(argv[2], &images, &err) != 0) {
            fprintf(stderr, "dltrain: data index: %s\n", err.msg);
            return 1;
        }
        printf("dltrain: indexed %s: %lld images, list in %s/%s\n", argv[2], (long long)images, argv[2],
               DLT_FOLDER_INDEX_NAME);
    }
    return 0;
}

int dlt_cmd_data(int argc, char **argv)
{
    dlt_cli_opts o;
    unsigned char seen[DLT_OPT_MAX] = {0};
    const char *labels;
    int side, quality, opt, rc = 1, quiet, first;
    dlt_dataset *ds = NULL;
    dlt_recordio_writer w;
    dlt_decoder *dec = NULL;
    tjhandle enc = NULL;
    uint8_t *buf = NULL;
    size_t cap = 0;
    int64_t n = 0, written = 0, bad = 0, renamed[2] = {0, 0}; /* PNG named .jpg/.jpeg, JPEG named .png */
    char first_renamed[1024] = "";
    dlt_err err = DLT_ERR_INIT;
    char idx_path[PATH_MAX + 16], classes_path[PATH_MAX + 16], tmp_rec[PATH_MAX + 32], tmp_idx[PATH_MAX + 48],
        tmp_classes[PATH_MAX + 48];
    dlt_progress prog;

    if (argc >= 2 && !strcmp(argv[1], "index"))
        return _cmd_index(argc, argv);
    if (argc < 2 || strcmp(argv[1], "pack")) {
        if (argc >= 2 && argv[1][0] != '-')
            fprintf(stderr, "dltrain data: unknown subcommand '%s' (the ones there are: pack, index)\n", argv[1]);
        fprintf(stderr, "usage: dltrain data pack SRC_DIR OUT.rec [--resize SHORT_SIDE] [--quality Q] [--labels FILE] "
                        "[--force] [--quiet]\n       dltrain data index DIR\n");
        return DLT_EXIT_USAGE;
    }
    memset(&o, 0, sizeof(o));
    o.quality = 90;
    if ((opt = dlt_opt_parse_command(DLT_CMD_DATA, NULL, argc, argv, 2, &o, seen, &first, 0)) >= 0)
        return opt;
    side = o.resize;
    quality = o.quality;
    labels = o.labels;
    quiet = o.quiet;
    if (argc - first != 2) {
        fprintf(stderr, "dltrain data pack: SRC_DIR and OUT.rec are needed (see dltrain data pack --help)\n");
        return DLT_EXIT_USAGE;
    }
    _out_names(argv[first + 1], idx_path, classes_path, sizeof(idx_path));
    /* before anything is read: a missing folder was found only when the temporary file could not be
     * created, and the message named that file instead of OUT.rec */
    if (dlt_check_parent_dir("data pack: OUT.rec", argv[first + 1], &err) != 0) {
        fprintf(stderr, "dltrain: %s\n", err.msg);
        return DLT_EXIT_USAGE;
    }
    if (_inside(argv[first], argv[first + 1])) {
        fprintf(stderr,
                "dltrain: data pack: %s is inside %s: packing would read (or overwrite) its own output; "
                "write it elsewhere\n",
                argv[first + 1], argv[first]);
        return DLT_EXIT_USAGE;
    }
    {
        const char *fin[3] = {argv[first + 1], idx_path, classes_path};
        struct stat st;
        for (int k = 0; k < 3; k++)
            if (stat(fin[k], &st) == 0 && !S_ISREG(st.st_mode)) { /* a FIFO, a directory: never replaced */
                fprintf(stderr, "dltrain: %s: %s, not a regular file\n", fin[k], dlt_file_kind(st.st_mode));
                return DLT_EXIT_USAGE;
            }
    }
    if (!o.force) {
        const char *fin[3] = {argv[first + 1], idx_path, classes_path};
        for (int k = 0; k < 3; k++)
            if (access(fin[k], F_OK) == 0) {
                fprintf(stderr,
                        "dltrain: data pack: %s exists: --force replaces it (a job reading it keeps the "
                        "files it has open), or name another OUT.rec\n",
                        fin[k]);
                return DLT_EXIT_USAGE;
            }
    }
    snprintf(tmp_rec, sizeof(tmp_rec), "%s.tmp.%ld", argv[first + 1], (long)getpid());
    snprintf(tmp_idx, sizeof(tmp_idx), "%s.idx", tmp_rec); /* what dlt_recordio_create names it */
    snprintf(tmp_classes, sizeof(tmp_classes), "%s.classes", tmp_rec);
    if (dlt_dataset_open_folder(&ds, argv[first], labels, &err) != 0) {
        fprintf(stderr, "dltrain: %s\n", err.msg);
        return 1;
    }
    {
        char what[2048];
        dlt_dataset_describe_left_out(ds, what, sizeof(what));
        if (what[0])
            fprintf(stderr, "dltrain: %s: left out: %s\n", argv[first], what);
    }
    if (dlt_recordio_create(&w, tmp_rec, &err) != 0) {
        fprintf(stderr, "dltrain: %s\n", err.msg);
        goto drop;
    }
    dec = dlt_decoder_create();
    enc = tjInitCompress();
    if (!dec || !enc) {
        fprintf(stderr, "dltrain: cannot create the JPEG codec\n");
        dlt_recordio_close(&w, &err);
        goto drop;
    }
    n = dlt_dataset_count(ds);
    quiet |= getenv("DLT_LOG") && !strcmp(getenv("DLT_LOG"), "quiet");
    dlt_progress_start(&prog, stderr, quiet, "packing", "images", n);
    for (int64_t i = 0; i < n; i++) {
        char name[4096];
        size_t len;
        int32_t label;
        unsigned char *jpg = NULL;
        unsigned long jlen = 0;
        dlt_err_clear(&err); /* each image's failure is its own */
        if (dlt_dataset_read(ds, i, &buf, &cap, &len, &label, name, sizeof(name), &err) != 0 ||
            (side && _resize_jpeg(dec, enc, buf, len, side, quality, &jpg, &jlen, &err) != 0) ||
            (!side && dlt_decode_rgb(dec, buf, len, &(const uint8_t *){NULL}, &(int){0}, &(int){0}, &err) != 0)) {
            dlt_progress_clear(&prog);
            fprintf(stderr, "dltrain: leaving out %s: %s\n", name, err.msg);
            bad++;
            continue;
        }
        {
            /* Stored as read (or re-encoded as JPEG with --resize): the reader goes by content too. */
            dlt_image_format got = dlt_decoder_last_format(dec), named = dlt_image_format_of_name(name);
            if (named != DLT_IMAGE_UNKNOWN && named != got) {
                if (!first_renamed[0])
                    snprintf(first_renamed, sizeof(first_renamed), "%.1000s", name);
                renamed[got == DLT_IMAGE_PNG ? 0 : 1]++;
            }
        }
        if (dlt_recordio_append(&w, (uint64_t)written, (float)label, jpg ? jpg : buf, jpg ? jlen : len, &err) != 0) {
            dlt_progress_clear(&prog);
            fprintf(stderr, "dltrain: writing %s: %s\n", tmp_rec, err.msg);
            tjFree(jpg);
            dlt_recordio_close(&w, &err);
            goto drop;
        }
        tjFree(jpg);
        written++;
        dlt_progress_update(&prog, i + 1);
    }
    dlt_progress_end(&prog, n);
    dlt_err_clear(&err); /* the left-out images were said one by one */
    if (dlt_recordio_close(&w, &err) != 0 || dlt_recordio_write_classes(tmp_rec, ds, &err) != 0) {
        fprintf(stderr, "dltrain: %s\n", err.msg);
        goto drop;
    }
    {
        const char *tmp[3] = {tmp_rec, tmp_idx, tmp_classes}, *fin[3] = {argv[first + 1], idx_path, classes_path};
        if (_commit(tmp, fin) != 0)
            goto drop;
    }
    printf("dltrain: packed %lld image%s of %d class%s into %s (%lld unreadable image%s left out)\n",
           (long long)written, written == 1 ? "" : "s", dlt_dataset_classes(ds),
           dlt_dataset_classes(ds) == 1 ? "" : "es", argv[first + 1], (long long)bad, bad == 1 ? "" : "s");
    if (renamed[0] + renamed[1] > 0)
        printf("dltrain: %lld image(s) were decoded by their content, not their name: %lld PNG named .jpg/.jpeg, "
               "%lld JPEG named .png (first: %s); %s\n",
               (long long)(renamed[0] + renamed[1]), (long long)renamed[0], (long long)renamed[1], first_renamed,
               side ? "re-encoded as JPEG (--resize)" : "stored as they are (readers go by content too)");
    rc = 0;
    goto out;
drop: /* nothing of a failed pack takes a name; its temporary files go */
    unlink(tmp_rec);
    unlink(tmp_idx);
    unlink(tmp_classes);
out:
    dlt_decoder_destroy(dec);
    if (enc)
        tjDestroy(enc);
    free(buf);
    dlt_dataset_close(ds);
    return rc;
}
