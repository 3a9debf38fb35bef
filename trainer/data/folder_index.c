/* SPDX-License-Identifier: Apache-2.0 */
/* folder_index: an image folder's list kept in a file inside it (folder_index.h). */
#include "config.h"

#include "trainer/data/folder_index.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/fnv.h"
#include "common/io.h"
#include "common/status.h"
#include "trainer/data/dataset.h"
#include "trainer/data/folder_list.h"

static const char INDEX_MAGIC[8] = {'D', 'L', 'T', 'I', 'D', 'X', '0', '2'};
/* An index of the versions that listed only .jpg/.jpeg: its folders' mtimes still match, but it
 * leaves their .png files out, so it is stale, whatever else it holds. */
static const char INDEX_MAGIC_JPEG_ONLY[8] = {'D', 'L', 'T', 'I', 'D', 'X', '0', '1'};

/* A folder changed within this many seconds of the index being made may have changed again within
 * the same timestamp tick (filesystems with 1-second times): such an index is not trusted. */
#define INDEX_SETTLE_NS 2000000000LL

static void _put64(uint8_t *p, uint64_t v)
{
    for (int k = 0; k < 8; k++)
        p[k] = (uint8_t)(v >> (8 * k));
}

static uint64_t _get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int k = 0; k < 8; k++)
        v |= (uint64_t)p[k] << (8 * k);
    return v;
}

static int64_t _mtime_ns(const struct stat *st)
{
    return (int64_t)st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec;
}

static int64_t _now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* Class folder c's modification time (ns): 0, or -errno with path filled. */
static int _class_mtime(const char *root, const dlt_dataset *ds, int c, int64_t *ns, char *path, size_t pathlen)
{
    struct stat st;
    snprintf(path, pathlen, "%s/%s", root, dlt_dataset_class_name(ds, c));
    if (stat(path, &st) != 0)
        return -errno;
    *ns = _mtime_ns(&st);
    return 0;
}

int dlt_folder_index_write(const char *root, int64_t *images, dlt_err *err)
{
    dlt_dataset *ds = NULL;
    uint8_t *list = NULL, *buf = NULL;
    size_t len = 0, total, o = 0;
    char path[4200];
    int rc, classes;
    int64_t made = _now_ns(), *mtimes = NULL;

    *images = 0;
    /* The index's time is taken before the listing: a class folder changed while it was listed then
     * reads as changed after it and the index is refused, never used with a list that misses the
     * change. A folder changed in the last moments could change again within the same timestamp
     * tick: wait until it has settled (at most INDEX_SETTLE_NS and a little, once), so that the
     * index is usable. */
    for (int tries = 0; tries < 2; tries++) {
        int64_t newest = 0;
        made = _now_ns();
        if ((rc = dlt_dataset_open_folder(&ds, root, NULL, err)) != 0)
            return rc;
        classes = dlt_dataset_classes(ds);
        free(mtimes);
        if (!(mtimes = malloc(sizeof(*mtimes) * (size_t)classes))) {
            rc = dlt_fail(err, -ENOMEM, "out of memory for the index of %s", root);
            goto out;
        }
        /* Each class folder's time, read once after the listing: what the index records. */
        for (int c = 0; c < classes; c++) {
            if ((rc = _class_mtime(root, ds, c, &mtimes[c], path, sizeof(path))) != 0) {
                rc = dlt_fail(err, rc, "%s: %s (the folder changed while it was listed)", path, strerror(-rc));
                goto out;
            }
            if (mtimes[c] > newest)
                newest = mtimes[c];
        }
        if (newest <= made - INDEX_SETTLE_NS || tries == 1)
            break;
        dlt_dataset_close(ds);
        ds = NULL;
        {
            /* Bounded: a folder time in the future (a server's clock ahead) is not waited for;
             * the reader then refuses the index, saying why. */
            int64_t wait = newest + INDEX_SETTLE_NS + 100000000LL - _now_ns();
            if (wait > INDEX_SETTLE_NS + 100000000LL)
                wait = INDEX_SETTLE_NS + 100000000LL;
            if (wait > 0) {
                struct timespec t = {(time_t)(wait / 1000000000LL), (long)(wait % 1000000000LL)};
                nanosleep(&t, NULL);
            }
        }
    }
    if ((rc = dlt_folder_list_pack(ds, &list, &len, err)) != 0)
        goto out;
    total = 8 + 8 + 8 + (size_t)classes * 8 + 8 + len + 8;
    if (!(buf = malloc(total))) {
        rc = dlt_fail(err, -ENOMEM, "out of memory for the index of %s", root);
        goto out;
    }
    memcpy(buf, INDEX_MAGIC, 8);
    o = 8;
    _put64(buf + o, (uint64_t)made), o += 8;
    _put64(buf + o, (uint64_t)classes), o += 8;
    for (int c = 0; c < classes; c++)
        _put64(buf + o, (uint64_t)mtimes[c]), o += 8;
    _put64(buf + o, (uint64_t)len), o += 8;
    memcpy(buf + o, list, len), o += len;
    _put64(buf + o, dlt_fnv1a64(DLT_FNV_OFFSET, buf, o)), o += 8;
    snprintf(path, sizeof(path), "%s/%s", root, DLT_FOLDER_INDEX_NAME);
    if ((rc = dlt_write_file_atomic(path, buf, o, 0644, err)) != 0) {
        dlt_fail_prefix(err, rc, "the index lives inside the folder it lists");
        goto out;
    }
    *images = dlt_dataset_count(ds);
out:
    free(mtimes);
    free(buf);
    free(list);
    dlt_dataset_close(ds);
    return rc;
}

/* Reads the whole file at path into *buf. 0, -ENOENT, or another -errno. */
static int _slurp(const char *path, uint8_t **buf, size_t *len)
{
    struct stat st;
    /* O_NONBLOCK: a FIFO planted under the index's name is refused below, not waited on. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW), rc = 0;
    *buf = NULL;
    if (fd < 0)
        return errno == ELOOP ? -EINVAL : -errno;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > DLT_FOLDER_INDEX_MAX) {
        close(fd);
        return -EINVAL;
    }
    if (!(*buf = malloc((size_t)st.st_size + 1))) {
        close(fd);
        return -ENOMEM;
    }
    for (size_t got = 0; got < (size_t)st.st_size;) {
        ssize_t n = read(fd, *buf + got, (size_t)st.st_size - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            rc = n < 0 ? -errno : -EIO;
            break;
        }
        got += (size_t)n;
    }
    close(fd);
    if (rc != 0) {
        free(*buf);
        *buf = NULL;
        return rc;
    }
    *len = (size_t)st.st_size;
    return 0;
}

int dlt_folder_index_read(const char *root, dlt_dataset **out, uint8_t **list, size_t *len, char *why, size_t whylen)
{
    char path[4200];
    dlt_err err = DLT_ERR_INIT;
    uint8_t *buf = NULL;
    size_t n = 0, o, list_len;
    uint64_t classes;
    int64_t made;
    dlt_dataset *ds = NULL;
    int rc;

    *out = NULL;
    if (list) {
        *list = NULL;
        *len = 0;
    }
    snprintf(path, sizeof(path), "%s/%s", root, DLT_FOLDER_INDEX_NAME);
    if ((rc = _slurp(path, &buf, &n)) == -ENOENT)
        return 1;
    if (rc != 0) {
        snprintf(why, whylen, "cannot be read: %s", strerror(-rc));
        return -1;
    }
    if (n >= 8 && !memcmp(buf, INDEX_MAGIC_JPEG_ONLY, 8)) {
        snprintf(why, whylen,
                 "stale: made by an earlier dltrain, which listed no .png files; dltrain data index renews it");
        free(buf);
        return -1;
    }
    if (n < 40 || memcmp(buf, INDEX_MAGIC, 8) || _get64(buf + n - 8) != dlt_fnv1a64(DLT_FNV_OFFSET, buf, n - 8)) {
        snprintf(why, whylen, "damaged: %s",
                 n < 40 || memcmp(buf, INDEX_MAGIC, 8) ? "not a dltrain index" : "checksum mismatch");
        free(buf);
        return -1;
    }
    made = (int64_t)_get64(buf + 8);
    classes = _get64(buf + 16);
    o = 24;
    if (classes > (n - 40) / 8) {
        snprintf(why, whylen, "damaged: class count out of range");
        free(buf);
        return -1;
    }
    o += (size_t)classes * 8;
    list_len = (size_t)_get64(buf + o);
    o += 8;
    if (list_len != n - 8 - o) {
        snprintf(why, whylen, "damaged: list size out of range");
        free(buf);
        return -1;
    }
    /* The list names the classes; each class folder must be as it was. */
    if ((rc = dlt_folder_list_open(&ds, root, buf + o, list_len, &err)) != 0) {
        snprintf(why, whylen, "damaged: %s", err.msg);
        free(buf);
        return -1;
    }
    rc = 0;
    if ((uint64_t)dlt_dataset_classes(ds) != classes) {
        snprintf(why, whylen, "damaged: its class count disagrees with its list");
        rc = -1;
    }
    for (uint64_t c = 0; c < classes && rc == 0; c++) {
        char dir[4200];
        int64_t then = (int64_t)_get64(buf + 24 + c * 8), now = 0;
        int src = _class_mtime(root, ds, (int)c, &now, dir, sizeof(dir));
        if (src != 0) {
            snprintf(why, whylen, "stale: class folder %.200s is gone (%s)", dlt_dataset_class_name(ds, (int)c),
                     strerror(-src));
            rc = -1;
        } else if (now != then || then > made - INDEX_SETTLE_NS) {
            snprintf(why, whylen, "stale: class folder %.200s %s", dlt_dataset_class_name(ds, (int)c),
                     now != then ? "changed since it was made"
                                 : "changed less than 2 s before it was made (remake it)");
            rc = -1;
        }
    }
    /* A class folder added since: the root's own entries. */
    if (rc == 0) {
        DIR *d = opendir(root);
        struct dirent *e;
        int64_t dirs = 0;
        while (d && (e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.')
                continue;
            if (e->d_type == DT_DIR) {
                dirs++;
            } else if (e->d_type == DT_UNKNOWN || e->d_type == DT_LNK) {
                char p[4200];
                struct stat st;
                snprintf(p, sizeof(p), "%s/%s", root, e->d_name);
                dirs += stat(p, &st) == 0 && S_ISDIR(st.st_mode);
            }
        }
        if (d)
            closedir(d);
        if (!d || dirs != (int64_t)classes) {
            snprintf(why, whylen, "stale: %s holds %lld class folder(s), the index %llu", root, (long long)dirs,
                     (unsigned long long)classes);
            rc = -1;
        }
    }
    if (rc != 0) {
        dlt_dataset_close(ds);
        free(buf);
        return -1;
    }
    *out = ds;
    if (list) {
        memmove(buf, buf + o, list_len);
        *list = buf;
        *len = list_len;
    } else {
        free(buf);
    }
    return 0;
}
