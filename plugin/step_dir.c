/* SPDX-License-Identifier: Apache-2.0 */
/* step_dir: the step-private directory under the site's topo_dir. */
#include "config.h"

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

void dlt_name_escape(const char *in, char *out, size_t outlen)
{
    size_t total = 0, used = 0;
    const unsigned char *p;
    if (!outlen)
        return;
    for (p = (const unsigned char *)in; *p; p++)
        total += *p == '\\' ? 2 : (*p < 0x20 || *p >= 0x7f) ? 4 : 1;
    for (p = (const unsigned char *)in; *p; p++) {
        char piece[5];
        size_t n;
        if (*p == '\\')
            n = (size_t)snprintf(piece, sizeof(piece), "\\\\");
        else if (*p < 0x20 || *p >= 0x7f)
            n = (size_t)snprintf(piece, sizeof(piece), "\\x%02x", *p);
        else
            n = (size_t)snprintf(piece, sizeof(piece), "%c", *p);
        /* Whole escapes only; "..." says the name went on. */
        if (total < outlen ? used + n >= outlen : used + n + 3 >= outlen)
            break;
        memcpy(out + used, piece, n);
        used += n;
    }
    if (total >= outlen && used + 3 < outlen) {
        memcpy(out + used, "...", 3);
        used += 3;
    }
    out[used] = '\0';
}

static void _where(char *where, size_t wherelen, const char *name)
{
    dlt_name_escape(name, where, wherelen);
}

/* Removes the entry name of the directory dfd when it is not a directory (a file, link, FIFO,
 * socket: the entry itself, never what a link points to). 1 removed (or gone), 0 a directory, or
 * -errno. */
static int _unlink_non_dir(int dfd, const char *name)
{
    if (unlinkat(dfd, name, 0) == 0 || errno == ENOENT)
        return 1;
    return errno == EISDIR ? 0 : -errno;
}

/* Moves the directory name of dfd up into sd under a fresh name, so that it is emptied from there:
 * the walk never goes deeper than one level below sd, whatever the depth of the user's tree. A mount
 * point cannot move (EXDEV, EBUSY): it is reported, never entered. */
static int _lift(int dfd, const char *name, int sd, unsigned long *lifted)
{
    char fresh[48];
    for (int tries = 0; tries < 64; tries++) {
        snprintf(fresh, sizeof(fresh), ".dlt-lifted-%lu", (*lifted)++);
        if (renameat2(dfd, name, sd, fresh, RENAME_NOREPLACE) == 0 || errno == ENOENT)
            return 0;
        if (errno != EEXIST)
            return errno == EBUSY ? -EXDEV : -errno;
    }
    return -EEXIST;
}

/* Removes everything inside the open directory sd, at any depth, as root, in a tree its user may
 * still be changing. No recursion and no path: each directory one level below sd is emptied of its
 * files and links, its own sub-directories are moved up into sd (same filesystem: renameat2 with
 * RENAME_NOREPLACE), and it is removed; the moved ones follow in the next pass. Two directory fds at
 * most, every step relative to an open directory, no link followed (O_NOFOLLOW, unlinkat), no other
 * filesystem entered (st_dev). At most DLT_STEP_DIR_MAX_ENTRIES entries are handled, so a task that
 * keeps adding entries cannot hold slurmstepd. 0, or the first failure as -errno with the entry's
 * name, escaped, in where. */
static int _empty_dir(int sd, dev_t dev, char *where, size_t wherelen)
{
    unsigned long budget = DLT_STEP_DIR_MAX_ENTRIES, lifted = 0;
    for (;;) {
        int seen = 0, rc = 0, lfd;
        struct dirent *e;
        DIR *d;
        lfd = openat(sd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (lfd < 0 || !(d = fdopendir(lfd))) {
            rc = -errno;
            if (lfd >= 0)
                close(lfd);
            _where(where, wherelen, ".");
            return rc;
        }
        while (rc == 0 && (e = readdir(d)) != NULL) {
            struct stat st;
            struct dirent *c;
            DIR *cd;
            int cfd, r;
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                continue;
            seen++;
            if (budget-- == 0) {
                rc = -EMLINK;
                _where(where, wherelen, e->d_name);
                break;
            }
            r = _unlink_non_dir(sd, e->d_name);
            if (r != 0) {
                if (r < 0) {
                    rc = r;
                    _where(where, wherelen, e->d_name);
                }
                continue;
            }
            cfd = openat(sd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
            if (cfd < 0) {
                if (errno == ENOENT || errno == ELOOP || errno == ENOTDIR)
                    continue; /* swapped meanwhile: the next pass sees what is there now */
                rc = -errno;
                _where(where, wherelen, e->d_name);
                break;
            }
            if (fstat(cfd, &st) != 0 || st.st_dev != dev) {
                rc = -EXDEV; /* a mount point (or one that cannot be told from one): never entered */
                close(cfd);
                _where(where, wherelen, e->d_name);
                break;
            }
            if (!(cd = fdopendir(cfd))) {
                rc = -errno;
                close(cfd);
                _where(where, wherelen, e->d_name);
                break;
            }
            while (rc == 0 && (c = readdir(cd)) != NULL) {
                if (!strcmp(c->d_name, ".") || !strcmp(c->d_name, ".."))
                    continue;
                if (budget-- == 0) {
                    rc = -EMLINK;
                } else if ((r = _unlink_non_dir(dirfd(cd), c->d_name)) == 0) {
                    rc = _lift(dirfd(cd), c->d_name, sd, &lifted);
                } else if (r < 0) {
                    rc = r;
                }
                if (rc != 0)
                    _where(where, wherelen, c->d_name);
            }
            closedir(cd);
            /* ENOTEMPTY: entries made meanwhile; the next pass empties it again. */
            if (rc == 0 && unlinkat(sd, e->d_name, AT_REMOVEDIR) != 0 && errno != ENOENT && errno != ENOTEMPTY &&
                errno != EEXIST) {
                rc = -errno;
                _where(where, wherelen, e->d_name);
            }
        }
        closedir(d);
        if (rc != 0 || seen == 0)
            return rc;
    }
}

/* Removes topo_dir's entry name (a step folder, or whatever sits at its name) entirely. top is
 * topo_dir, opened by the caller. */
static int _remove_at(int top, const char *name, char *where, size_t wherelen)
{
    struct stat st;
    int sd, rc;
    dev_t dev;
    if (fstat(top, &st) != 0)
        return -errno;
    dev = st.st_dev;
    for (int round = 0; round < 3; round++) {
        rc = _unlink_non_dir(top, name);
        if (rc != 0)
            return rc < 0 ? (_where(where, wherelen, name), rc) : 0;
        sd = openat(top, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (sd < 0) {
            if (errno == ENOENT)
                return 0;
            if (errno == ELOOP || errno == ENOTDIR)
                continue; /* swapped meanwhile */
            rc = -errno;
            _where(where, wherelen, name);
            return rc;
        }
        if (fstat(sd, &st) != 0 || st.st_dev != dev) {
            rc = -EXDEV;
            close(sd);
            _where(where, wherelen, name);
            return rc;
        }
        rc = _empty_dir(sd, dev, where, wherelen);
        close(sd);
        if (rc != 0)
            return rc;
        if (unlinkat(top, name, AT_REMOVEDIR) == 0 || errno == ENOENT)
            return 0;
        if (errno != ENOTEMPTY && errno != EEXIST) {
            rc = -errno;
            _where(where, wherelen, name);
            return rc;
        }
    }
    _where(where, wherelen, name);
    return -ENOTEMPTY;
}

static const char *_why(int rc)
{
    return rc == -EXDEV ? ", a mount point" : rc == -EMLINK ? ", more entries than the limit" : "";
}

int dlt_step_dir_create(const char *topo_dir, const char *name, const char *file_name, const char *contents,
                        size_t len, gid_t gid, char *path_out, size_t pathlen, int *stale, char *note, size_t notelen,
                        dlt_err *err)
{
    int top = -1, dfd = -1, fd = -1, rc = 0;
    size_t done = 0;
    char where[256] = "", aside[192] = "";

    *stale = 0;
    if (notelen)
        note[0] = '\0';
    if (!_valid_component(name) || !_valid_component(file_name)) {
        return dlt_fail(err, -EINVAL, "invalid step directory name");
    }
    top = open(topo_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (top < 0)
        return _os_fail(err, errno, "cannot open topo_dir", topo_dir);
    if (mkdirat(top, name, 0700) != 0) {
        /* A leftover of the same job.step id (job ids wrapped, the controller's state reset, a node
         * that crashed mid-step): nothing of a running step can be there, so it is stale. It is
         * moved aside first, so that whatever it holds never blocks this step, then removed. */
        if (errno != EEXIST) {
            rc = _os_fail(err, errno, "cannot create step directory under", topo_dir);
            goto out;
        }
        *stale = 1;
        for (int i = 0; i < 64 && !aside[0]; i++) {
            snprintf(aside, sizeof(aside), ".stale-%s-%ld-%d", name, (long)getpid(), i);
            if (renameat2(top, name, top, aside, RENAME_NOREPLACE) != 0) {
                int code = errno;
                aside[0] = '\0';
                if (code != EEXIST) {
                    rc = _os_fail(err, code, "cannot move aside a stale step directory under", topo_dir);
                    goto out;
                }
            }
        }
        if (!aside[0] || mkdirat(top, name, 0700) != 0) {
            rc = _os_fail(err, aside[0] ? errno : EEXIST, "cannot create step directory under", topo_dir);
            goto out;
        }
    }
    dfd = openat(top, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0) {
        rc = _os_fail(err, errno, "cannot open step directory under", topo_dir);
        goto out;
    }
    /* Written while the directory is 0700: nobody else can be in it. */
    fd = openat(dfd, file_name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
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
    /* The task needs to read the file, never to write there: the folder stays its creator's (root
     * in slurmstepd), readable by the job's group only, so a task can neither fill root's topo_dir
     * nor leave anything in it. */
    if (fsync(fd) != 0 || fchown(fd, (uid_t)-1, gid) != 0 || fchmod(fd, 0640) != 0 ||
        fchown(dfd, (uid_t)-1, gid) != 0 || fchmod(dfd, 0750) != 0) {
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
    if (rc != 0 && top >= 0 && (dfd >= 0 || fd >= 0 || done))
        (void)_remove_at(top, name, where, sizeof(where));
    if (aside[0]) {
        int r = _remove_at(top, aside, where, sizeof(where));
        if (r != 0)
            snprintf(note, notelen, "the stale step directory, moved aside to %s/%s, could not be removed entirely "
                     "(at '%s': %s%s)", topo_dir, aside, where, strerror(-r), _why(r));
    }
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
    rc = _remove_at(top, name, where, sizeof(where));
    close(top);
    if (rc != 0)
        return dlt_fail(err, rc, "cannot remove %s/%s entirely (at '%s': %s%s)", topo_dir, name, where, strerror(-rc),
                        _why(rc));
    return 0;
}
