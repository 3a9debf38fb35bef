/* SPDX-License-Identifier: Apache-2.0 */
/* imagefolder: an ImageFolder tree (ROOT/CLASS/IMAGE.JPEG) or a flat folder with a labels file,
 * listed into a data set (entry kinds from readdir, stat only for links), and its files read. */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/io.h"
#include "common/status.h"
#include "trainer/data/dataset.h"
#include "trainer/data/dataset_internal.h"

/* The names listed as images: .jpg, .jpeg, .png in any case. The decoder reads each by its content
 * (transform.h), so a PNG named .JPEG (ImageNet has one) is read too, and counted by the loader. */
static int _is_image(const char *name)
{
    const char *dot = strrchr(name, '.');
    return name[0] != '.' && dot && (!strcasecmp(dot, ".jpeg") || !strcasecmp(dot, ".jpg") || !strcasecmp(dot, ".png"));
}

/* The other extensions torchvision's ImageFolder reads (IMG_EXTENSIONS): images a user expects to
 * be used, which this reader leaves out. */
static int _is_other_image(const char *name)
{
    static const char *const ext[] = {".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp"};
    const char *dot = strrchr(name, '.');
    for (size_t i = 0; dot && i < sizeof(ext) / sizeof(ext[0]); i++)
        if (!strcasecmp(dot, ext[i]))
            return 1;
    return 0;
}

/* Whether name holds a control character (C0 or DEL). */
static int _has_control(const char *name)
{
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            return 1;
    return 0;
}

/* name with its control characters written as \n, \t or \xHH, for a message. */
static void _escape(const char *name, char *out, size_t len)
{
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)name; *p && o + 5 < len; p++) {
        if (*p == '\n')
            o += (size_t)snprintf(out + o, len - o, "\\n");
        else if (*p == '\t')
            o += (size_t)snprintf(out + o, len - o, "\\t");
        else if (*p < 0x20 || *p == 0x7f)
            o += (size_t)snprintf(out + o, len - o, "\\x%02x", *p);
        else
            out[o++] = (char)*p;
    }
    out[o] = '\0';
}

static void _note(int64_t *count, char *first, size_t firstlen, const char *dir, const char *name)
{
    if ((*count)++ == 0)
        snprintf(first, firstlen, "%.150s/%.150s", dir, name);
}

/* st_mode's file type for a directory entry's d_type; 0 where stat() must say (a link, unknown). */
static mode_t _dtype_mode(unsigned char t)
{
    switch (t) {
    case DT_REG: return S_IFREG;
    case DT_DIR: return S_IFDIR;
    case DT_FIFO: return S_IFIFO;
    case DT_SOCK: return S_IFSOCK;
    case DT_CHR: return S_IFCHR;
    case DT_BLK: return S_IFBLK;
    default: return 0;
    }
}

/* Sorted names of the entries of dir that are directories (want_dirs) or image files; what is left
 * out is counted in lo (hidden entries, names starting with '.', aside). */
static int _list(const char *dir, int want_dirs, char ***out, int64_t *n, dlt_dataset_left_out *lo, dlt_err *err)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char **v = NULL;
    int64_t cap = 0, k = 0;
    if (!d)
        return dlt_fail(err, -errno, "cannot open %s: %s", dir, strerror(errno));
    while ((e = readdir(d)) != NULL) {
        char p[PATH_MAX];
        struct stat st;
        if (e->d_name[0] == '.')
            continue;
        /* The kind from the directory entry itself: one stat() per file of a 1.28M-image folder is
         * what loads a parallel filesystem's metadata server. Only a link (whose target decides)
         * or a filesystem that does not fill d_type is asked with stat(). */
        st.st_mode = _dtype_mode(e->d_type);
        if (!st.st_mode && (snprintf(p, sizeof(p), "%s/%s", dir, e->d_name) >= (int)sizeof(p) || stat(p, &st) != 0)) {
            _note(&lo->unreadable, lo->first_unreadable, sizeof(lo->first_unreadable), dir, e->d_name);
            continue;
        }
        if (want_dirs ? !S_ISDIR(st.st_mode) : (!S_ISREG(st.st_mode) || !_is_image(e->d_name))) {
            if (!want_dirs && S_ISDIR(st.st_mode))
                _note(&lo->nested, lo->first_nested, sizeof(lo->first_nested), dir, e->d_name);
            else if (!S_ISREG(st.st_mode) && (_is_other_image(e->d_name) || _is_image(e->d_name)))
                _note(&lo->special, lo->first_special, sizeof(lo->first_special), dir, e->d_name);
            else if (_is_other_image(e->d_name) || _is_image(e->d_name))
                _note(&lo->images, lo->first_images, sizeof(lo->first_images), dir, e->d_name);
            else
                _note(&lo->other, lo->first_other, sizeof(lo->first_other), dir, e->d_name);
            continue;
        }
        if (want_dirs && _has_control(e->d_name)) {
            /* A class name is stored one per line (the checkpoint's state file, the data pack's
             * label list): one that cannot be, is refused here, for train, eval and pack alike. */
            char shown[256];
            _escape(e->d_name, shown, sizeof(shown));
            closedir(d);
            dlt_ds_free_list(v, k);
            return dlt_fail(err, -EINVAL,
                            "class folder %s/%s: its name holds a control character (a "
                            "newline, a tab, ...), which cannot be stored as a class name: rename the folder",
                            dir, shown);
        }
        if (k == cap) {
            char **nv = realloc(v, (size_t)(cap ? 2 * cap : 256) * sizeof(*v));
            if (!nv)
                break;
            v = nv;
            cap = cap ? 2 * cap : 256;
        }
        if (!(v[k] = strdup(e->d_name)))
            break;
        k++;
    }
    closedir(d);
    if (e) { /* stopped early: out of memory (a shorter list would be a smaller data set, silently) */
        dlt_ds_free_list(v, k);
        return dlt_fail(err, -ENOMEM, "out of memory listing %s (%" PRId64 " entries so far)", dir, k);
    }
    if (k)
        qsort(v, (size_t)k, sizeof(*v), dlt_ds_cmp_str);
    *out = v;
    *n = k;
    return 0;
}

/* One image: its path below the root (a data set of 1.28M images keeps only those) and label. */
static int _add(dlt_dataset *d, int64_t *cap, const char *rel, int32_t label)
{
    if (d->n == *cap) {
        int64_t nc = *cap ? *cap * 2 : 1024;
        char **np = realloc(d->paths, (size_t)nc * sizeof(char *));
        int32_t *nl;
        if (!np)
            return -ENOMEM;
        d->paths = np;
        nl = realloc(d->labels, (size_t)nc * sizeof(int32_t));
        if (!nl)
            return -ENOMEM;
        d->labels = nl;
        *cap = nc;
    }
    d->paths[d->n] = strdup(rel);
    if (!d->paths[d->n])
        return -ENOMEM;
    d->labels[d->n++] = label;
    return 0;
}

/* A labels file's "FILENAME CLASS" lines, in file order. */
typedef struct {
    char **files, **classes;
    int64_t n, cap;
} label_lines;

/* ROOT/CLASS/IMAGE.JPEG: classes are the sorted subdirectories, numbered in that order. */
static int _read_class_folders(dlt_dataset *d, const char *root, int64_t *cap, char ***classes, int64_t *ncls,
                               dlt_err *err)
{
    char **files = NULL;
    int64_t nfiles = 0;
    int rc;
    if ((rc = _list(root, 1, classes, ncls, &d->left, err)) != 0)
        return rc;
    if (*ncls < 1)
        return dlt_fail(err, -ENOENT, "%s has no class subdirectories (expected ROOT/CLASS/*.JPEG)", root);
    for (int64_t c = 0; c < *ncls; c++) {
        char dir[PATH_MAX], p[PATH_MAX];
        int64_t added = 0, too_long = 0;
        /* A class folder whose own path cannot be opened would leave its class number without
         * images: refused, naming it, rather than skipped. */
        if (snprintf(dir, sizeof(dir), "%s/%s", root, (*classes)[c]) >= (int)sizeof(dir))
            return dlt_fail(err, -ENAMETOOLONG,
                            "class folder %.200s/%.100s: its path is longer than PATH_MAX (%d "
                            "bytes), so no image in it can be opened: move the data set to a shorter path",
                            root, (*classes)[c], PATH_MAX - 1);
        if ((rc = _list(dir, 0, &files, &nfiles, &d->left, err)) != 0)
            return rc;
        for (int64_t i = 0; i < nfiles && rc == 0; i++) {
            /* A path longer than PATH_MAX cannot be opened: counted with the unreadable entries
             * (said at the start, refused by --strict), never dropped without a word. */
            if (snprintf(p, sizeof(p), "%s/%s", dir, files[i]) >= (int)sizeof(p)) {
                if (too_long++ == 0 && d->left.unreadable == 0)
                    snprintf(d->left.first_unreadable, sizeof(d->left.first_unreadable),
                             "%.150s/%.100s (path longer than PATH_MAX, %d bytes)", dir, files[i], PATH_MAX - 1);
                d->left.unreadable++;
                continue;
            }
            if (_add(d, cap, p + strlen(root) + 1, (int32_t)c) != 0)
                rc = dlt_fail(err, -ENOMEM, "out of memory listing %s", dir);
            added++;
        }
        dlt_ds_free_list(files, nfiles);
        files = NULL;
        if (rc != 0)
            return rc;
        /* torchvision's ImageFolder refuses a class without images: its number would exist with
         * nothing to learn or score. */
        if (added < 1 && too_long > 0)
            return dlt_fail(err, -ENAMETOOLONG,
                            "class folder %s%s: all %" PRId64 " of its images have paths "
                            "longer than PATH_MAX (%d bytes) and cannot be opened, which would leave the class "
                            "without images: shorten the file names or move the data set to a shorter path",
                            strlen(dir) > 160 ? "..." : "", dir + (strlen(dir) > 160 ? strlen(dir) - 160 : 0), too_long,
                            PATH_MAX - 1);
        if (added < 1)
            return dlt_fail(err, -ENOENT,
                            "class folder %s holds no .JPEG/.jpg/.png images (as torchvision's ImageFolder, a class "
                            "without images is refused): add images or remove the folder",
                            dir);
    }
    return 0;
}

static void _lines_free(label_lines *l)
{
    dlt_ds_free_list(l->files, l->n);
    dlt_ds_free_list(l->classes, l->n);
    memset(l, 0, sizeof(*l));
}

/* The lines of labels_file into l (blank lines and # comments aside). A line that is not
 * "FILENAME CLASS" would drop its image from the set without a word: it is refused, as is a read
 * error (which would end the list early). On failure l holds what was read, for _lines_free. */
static int _read_lines(const char *labels_file, label_lines *l, dlt_err *err)
{
    FILE *f = dlt_fopen_regular("labels file", labels_file, "r", err);
    char line[1024];
    long long lineno = 0;
    int rc = 0;
    if (!f)
        return -errno;
    while (rc == 0 && fgets(line, sizeof(line), f)) {
        char fn[512], cl[256], extra[2];
        int fields;
        lineno++;
        if (!strchr(line, '\n') && !feof(f)) {
            rc = dlt_fail(err, -EINVAL, "labels file %s, line %lld: longer than %zu characters", labels_file, lineno,
                          sizeof(line) - 2);
            break;
        }
        fields = sscanf(line, "%511s %255s %1s", fn, cl, extra);
        if (fields <= 0 || fn[0] == '#')
            continue;
        if (fields != 2 || strlen(fn) >= sizeof(fn) - 1 || strlen(cl) >= sizeof(cl) - 1) {
            line[strcspn(line, "\n")] = '\0';
            rc = dlt_fail(err, -EINVAL,
                          "labels file %s, line %lld: '%.80s' is not \"FILENAME CLASS\" (one file name and one "
                          "class, separated by white space)",
                          labels_file, lineno, line);
            break;
        }
        if (l->n == l->cap) {
            int64_t nc = l->cap ? 2 * l->cap : 1024;
            char **nf = realloc(l->files, (size_t)nc * sizeof(char *)), **ncl;
            if (nf)
                l->files = nf;
            ncl = nf ? realloc(l->classes, (size_t)nc * sizeof(char *)) : NULL;
            if (ncl)
                l->classes = ncl;
            if (!nf || !ncl) {
                rc = dlt_fail(err, -ENOMEM, "out of memory reading labels file %s (line %lld)", labels_file, lineno);
                break;
            }
            l->cap = nc;
        }
        l->files[l->n] = strdup(fn);
        l->classes[l->n] = strdup(cl);
        l->n++; /* counted even when a copy failed: _lines_free frees both (free(NULL) is nothing) */
        if (!l->files[l->n - 1] || !l->classes[l->n - 1])
            rc = dlt_fail(err, -ENOMEM, "out of memory reading labels file %s (line %lld)", labels_file, lineno);
    }
    if (rc == 0 && ferror(f))
        rc = dlt_fail(err, -EIO, "reading labels file %s after line %lld: %s", labels_file, lineno, strerror(errno));
    fclose(f);
    return rc;
}

/* A flat folder and a labels file of "FILENAME CLASS" lines: class names numbered in sorted order.
 * A line naming no file, and an image no line names, are left out and counted (d->left). */
static int _read_labels(dlt_dataset *d, const char *root, const char *labels_file, int64_t *cap, char ***classes,
                        int64_t *ncls, dlt_err *err)
{
    label_lines l;
    dlt_dataset_left_out scratch;
    char **sorted = NULL, **files = NULL;
    int64_t nfiles = 0, u = 0;
    int rc;
    memset(&l, 0, sizeof(l));
    if ((rc = _read_lines(labels_file, &l, err)) != 0)
        goto out;
    if (l.n < 1) {
        rc = dlt_fail(err, -EINVAL, "labels file %s lists no \"FILENAME CLASS\" lines", labels_file);
        goto out;
    }
    if (!(sorted = malloc((size_t)l.n * sizeof(char *)))) {
        rc = dlt_fail(err, -ENOMEM, "out of memory reading labels file %s", labels_file);
        goto out;
    }
    /* The same file twice would be scored twice. */
    memcpy(sorted, l.files, (size_t)l.n * sizeof(char *));
    qsort(sorted, (size_t)l.n, sizeof(char *), dlt_ds_cmp_str);
    for (int64_t i = 1; i < l.n; i++)
        if (!strcmp(sorted[i - 1], sorted[i])) {
            rc = dlt_fail(err, -EINVAL, "labels file %s lists %.300s more than once", labels_file, sorted[i]);
            goto out;
        }
    memcpy(sorted, l.classes, (size_t)l.n * sizeof(char *));
    qsort(sorted, (size_t)l.n, sizeof(char *), dlt_ds_cmp_str);
    for (int64_t i = 0; i < l.n; i++)
        if (!u || strcmp(sorted[u - 1], sorted[i]))
            sorted[u++] = sorted[i];
    if (!(*classes = calloc((size_t)u, sizeof(char *)))) {
        rc = dlt_fail(err, -ENOMEM, "out of memory reading labels file %s", labels_file);
        goto out;
    }
    *ncls = u;
    for (int64_t i = 0; i < u; i++)
        if (!((*classes)[i] = strdup(sorted[i]))) {
            rc = dlt_fail(err, -ENOMEM, "out of memory reading labels file %s", labels_file);
            goto out;
        }
    for (int64_t i = 0; i < l.n; i++) {
        char p[PATH_MAX];
        struct stat st;
        char *const *hit = bsearch(&l.classes[i], *classes, (size_t)u, sizeof(char *), dlt_ds_cmp_str);
        /* A line naming no file would have its read fail and another image replace it: in an
         * evaluation that image would be scored twice. Left out and counted instead. */
        if (snprintf(p, sizeof(p), "%s/%s", root, l.files[i]) >= (int)sizeof(p) || stat(p, &st) != 0 ||
            !S_ISREG(st.st_mode)) {
            _note(&d->left.missing, d->left.first_missing, sizeof(d->left.first_missing), root, l.files[i]);
            continue;
        }
        if (_add(d, cap, l.files[i], (int32_t)(hit - *classes)) != 0) {
            rc = dlt_fail(err, -ENOMEM, "out of memory reading labels file %s (%" PRId64 " images so far)", labels_file,
                          d->n);
            goto out;
        }
    }
    if (d->n < 1) {
        rc = dlt_fail(err, -ENOENT,
                      "none of the %" PRId64 " file(s) labels file %s names is in %s (first: "
                      "%.300s)",
                      l.n, labels_file, root, l.files[0]);
        goto out;
    }
    /* Images of the folder that no line names are left out: count them. */
    memset(&scratch, 0, sizeof(scratch));
    qsort(l.files, (size_t)l.n, sizeof(char *), dlt_ds_cmp_str);
    if ((rc = _list(root, 0, &files, &nfiles, &scratch, err)) != 0)
        goto out;
    for (int64_t i = 0; i < nfiles; i++)
        if (!bsearch(&files[i], l.files, (size_t)l.n, sizeof(char *), dlt_ds_cmp_str))
            _note(&d->left.unlisted, d->left.first_unlisted, sizeof(d->left.first_unlisted), root, files[i]);
out:
    dlt_ds_free_list(files, nfiles);
    free(sorted);
    _lines_free(&l);
    return rc;
}

int dlt_dataset_open_folder(dlt_dataset **out, const char *root, const char *labels_file, dlt_err *err)
{
    dlt_dataset *d = calloc(1, sizeof(*d));
    char **classes = NULL;
    int64_t ncls = 0, cap = 0;
    int rc;
    *out = NULL;
    if (!d)
        return dlt_fail(err, -ENOMEM, "out of memory opening %s", root);
    d->ops = &dlt_imagefolder_ops;
    d->fd = -1;
    rc = labels_file ? _read_labels(d, root, labels_file, &cap, &classes, &ncls, err)
                     : _read_class_folders(d, root, &cap, &classes, &ncls, err);
    if (rc == 0 && d->n < 1)
        rc = dlt_fail(err, -ENOENT, "%s holds no .JPEG/.jpg/.png images", root);
    if (rc != 0) {
        dlt_ds_free_list(classes, ncls);
        dlt_dataset_close(d);
        return rc;
    }
    d->class_names = classes;
    d->nclasses = d->local_classes = (int)ncls;
    d->numbered = labels_file != NULL;
    snprintf(d->root, sizeof(d->root), "%s", root);
    *out = d;
    return 0;
}

static int _read(dlt_dataset *d, int64_t i, uint8_t **buf, size_t *cap, size_t *len, int32_t *label, char *name,
                 size_t namelen, dlt_err *err)
{
    char path[PATH_MAX];
    struct stat st;
    size_t got = 0;
    int fd;
    if (dlt_imagefolder_path(d, i, path, sizeof(path)) != 0) {
        snprintf(name, namelen, "%s/%s", d->root, d->paths[i]);
        return dlt_fail(err, -ENAMETOOLONG, "path longer than %d bytes", PATH_MAX);
    }
    /* O_NONBLOCK: a file swapped for a FIFO since the listing is refused below, not waited on
     * (no effect on a regular file's reads). */
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    snprintf(name, namelen, "%s", path);
    *label = d->label_map ? d->label_map[d->labels[i]] : d->labels[i];
    if (fd < 0)
        return dlt_fail(err, -errno, "cannot open: %s", strerror(errno));
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > DLT_DATASET_MAX_FILE) {
        close(fd);
        return dlt_fail(err, -EINVAL, "not a regular file under %u MiB", DLT_DATASET_MAX_FILE >> 20);
    }
    if (dlt_ds_grow(buf, cap, (size_t)st.st_size + 1) != 0) {
        close(fd);
        return -ENOMEM;
    }
    got = dlt_read_full(fd, *buf, (size_t)st.st_size);
    close(fd);
    *len = got;
    return 0;
}

int dlt_imagefolder_path(const dlt_dataset *d, int64_t i, char *out, size_t outlen)
{
    int n = snprintf(out, outlen, "%s/%s", d->root, d->paths[i]);
    return n >= 0 && (size_t)n < outlen ? 0 : -ENAMETOOLONG;
}

const dlt_dataset_ops dlt_imagefolder_ops = {_read};
