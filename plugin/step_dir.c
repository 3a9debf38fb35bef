/* SPDX-License-Identifier: Apache-2.0 */
/* step_dir: the step-private directory under the site's topo_dir. */
#include "step_dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int _os_fail(dlt_err *err, int code, const char *what, const char *path)
{
    return dlt_fail(err, -code, "%s %s: %s", what, path, strerror(code));
}

int dlt_expand_node(const char *pattern, const char *node, char *out, size_t outlen)
{
    size_t o = 0;
    if (!node || !*node || strchr(node, '/') || !strcmp(node, "..") || !strcmp(node, "."))
        return -1;
    for (const char *p = pattern; *p; p++) {
        const char *ins = NULL;
        char one[2] = {*p, 0};
        if (p[0] == '%' && p[1] == 'n') {
            ins = node;
            p++;
        } else {
            ins = one;
        }
        for (; *ins; ins++) {
            if (o + 1 >= outlen)
                return -1;
            out[o++] = *ins;
        }
    }
    if (!outlen)
        return -1;
    out[o] = '\0';
    return 0;
}

int dlt_topo_dir_check(const char *topo_dir, dlt_err *err)
{
    struct stat st;
    if (lstat(topo_dir, &st) != 0) {
        if (errno != ENOENT)
            return _os_fail(err, errno, "cannot stat topo_dir", topo_dir);
        if (mkdir(topo_dir, 0755) != 0 && errno != EEXIST)
            return _os_fail(err, errno, "cannot create topo_dir", topo_dir);
        if (lstat(topo_dir, &st) != 0)
            return _os_fail(err, errno, "cannot stat topo_dir", topo_dir);
    }
    if (!S_ISDIR(st.st_mode)) {
        return dlt_fail(err, -ENOTDIR, "topo_dir %s is not a directory (a link or file there is refused)", topo_dir);
    }
    if (st.st_uid != 0 || (st.st_mode & (S_IWGRP | S_IWOTH))) {
        return dlt_fail(err, -EPERM, "topo_dir %s must be owned by root and not writable by group or others (mode %04o)",
                 topo_dir, (unsigned)(st.st_mode & 07777));
    }
    return 0;
}

static int _valid_component(const char *name)
{
    return name && *name && !strchr(name, '/') && strcmp(name, ".") && strcmp(name, "..") && strlen(name) < 128;
}

/* Removes parent/name and everything below it, as root, in a tree its user may still be changing:
 * every step is relative to an open directory, no link is followed (O_NOFOLLOW, unlinkat), no other
 * filesystem is entered (st_dev), the depth is bounded. Returns 0, or the first failure as -errno
 * with the entry's name in where. */
static int _remove_tree(int parent, const char *name, dev_t dev, int depth, char *where, size_t wherelen)
{
    struct stat st;
    DIR *d;
    struct dirent *e;
    int dfd, rc = 0;

    dfd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (dfd < 0) {
        if (errno == ENOENT)
            return 0;
        /* A link, file, FIFO or socket: remove the entry itself, never what it points to. */
        if ((errno == ELOOP || errno == ENOTDIR) && (unlinkat(parent, name, 0) == 0 || errno == ENOENT))
            return 0;
        snprintf(where, wherelen, "%s", name);
        return -errno;
    }
    if (fstat(dfd, &st) != 0) {
        rc = -errno;
        snprintf(where, wherelen, "%s", name);
        close(dfd);
        return rc;
    }
    if (st.st_dev != dev || depth >= DLT_STEP_DIR_MAX_DEPTH) {
        rc = st.st_dev != dev ? -EXDEV : -ELOOP;
        snprintf(where, wherelen, "%s", name);
        close(dfd);
        return rc;
    }
    d = fdopendir(dfd);
    if (!d) {
        rc = -errno;
        close(dfd);
        snprintf(where, wherelen, "%s", name);
        return rc;
    }
    /* Entries made while we read (a process of the user elsewhere) get a bounded second look. */
    for (int pass = 0; pass < 3; pass++) {
        int removed = 0;
        while ((e = readdir(d)) != NULL) {
            int r;
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                continue;
            r = _remove_tree(dirfd(d), e->d_name, dev, depth + 1, where, wherelen);
            if (r != 0 && rc == 0)
                rc = r;
            removed += r == 0;
        }
        if (rc != 0 || unlinkat(parent, name, AT_REMOVEDIR) == 0 || errno == ENOENT) {
            closedir(d);
            return rc;
        }
        if (errno != ENOTEMPTY && errno != EEXIST)
            break;
        rewinddir(d);
        (void)removed;
    }
    rc = -errno;
    snprintf(where, wherelen, "%s", name);
    closedir(d);
    return rc;
}

static int _clear_dir(int parent, const char *name, char *where, size_t wherelen)
{
    struct stat st;
    if (fstat(parent, &st) != 0)
        return -errno;
    return _remove_tree(parent, name, st.st_dev, 0, where, wherelen);
}

int dlt_step_dir_create(const char *topo_dir, const char *name, const char *file_name, const char *contents,
                        size_t len, uid_t uid, gid_t gid, char *path_out, size_t pathlen, int *stale, dlt_err *err)
{
    int top = -1, dfd = -1, fd = -1, rc = 0;
    size_t done = 0;
    char where[256] = "";

    *stale = 0;

    if (!_valid_component(name) || !_valid_component(file_name)) {
        return dlt_fail(err, -EINVAL, "invalid step directory name");
    }
    top = open(topo_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (top < 0)
        return _os_fail(err, errno, "cannot open topo_dir", topo_dir);
    if (mkdirat(top, name, 0700) != 0) {
        /* A leftover of the same job.step id (job ids wrapped, the controller's state reset, a node
         * that crashed mid-step): nothing of a running step can be there, so it is stale. */
        if (errno != EEXIST) {
            rc = _os_fail(err, errno, "cannot create step directory under", topo_dir);
            goto out;
        }
        *stale = 1;
        rc = _clear_dir(top, name, where, sizeof(where));
        if (rc != 0) {
            dlt_fail(err, -EIO, "cannot remove the stale step directory %s/%s left by an earlier step of the same id "
                     "(at '%s': %s)", topo_dir, name, where, strerror(-rc));
            goto out;
        }
        if (mkdirat(top, name, 0700) != 0) {
            rc = _os_fail(err, errno, "cannot create step directory under", topo_dir);
            goto out;
        }
    }
    dfd = openat(top, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0) {
        rc = _os_fail(err, errno, "cannot open step directory under", topo_dir);
        goto out;
    }
    /* Written while the directory is still root's and 0700: no user can race us in it. */
    fd = openat(dfd, file_name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) {
        rc = _os_fail(err, errno, "cannot create file in step directory under", topo_dir);
        goto out;
    }
    while (done < len) {
        ssize_t w = write(fd, contents + done, len - done);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            rc = _os_fail(err, w < 0 ? errno : EIO, "cannot write topology file under", topo_dir);
            goto out;
        }
        done += (size_t)w;
    }
    if (fsync(fd) != 0 || fchown(fd, uid, gid) != 0 || fchown(dfd, uid, gid) != 0) {
        rc = _os_fail(err, errno, "cannot finish step directory under", topo_dir);
        goto out;
    }
    if (snprintf(path_out, pathlen, "%s/%s/%s", topo_dir, name, file_name) >= (int)pathlen) {
        dlt_fail(err, -ENAMETOOLONG, "step directory path too long");
        rc = -ENAMETOOLONG;
    }
out:
    if (fd >= 0)
        close(fd);
    if (dfd >= 0)
        close(dfd);
    if (rc != 0 && top >= 0 && !where[0])
        (void)_clear_dir(top, name, where, sizeof(where));
    if (top >= 0)
        close(top);
    return rc;
}

int dlt_step_dir_remove(const char *topo_dir, const char *name, dlt_err *err)
{
    char where[256] = "";
    int top, rc;
    if (!_valid_component(name)) {
        return dlt_fail(err, -EINVAL, "invalid step directory name");
    }
    top = open(topo_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (top < 0)
        return _os_fail(err, errno, "cannot open topo_dir", topo_dir);
    rc = _clear_dir(top, name, where, sizeof(where));
    close(top);
    if (rc != 0)
        return dlt_fail(err, rc, "cannot remove %s/%s entirely (at '%s': %s%s)", topo_dir, name, where, strerror(-rc),
                        rc == -EXDEV ? ", a mount point" : rc == -ELOOP ? ", deeper than the limit" : "");
    return 0;
}
