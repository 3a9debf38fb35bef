/* SPDX-License-Identifier: Apache-2.0 */
/* io: small file I/O helpers (whole writes, whole reads, opening the files users name). */
#include "config.h"

#include "common/io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int dlt_write_all(int fd, const void *p, size_t n)
{
    const uint8_t *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (w == 0)
                errno = EIO;
            return -1;
        }
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

size_t dlt_read_full(int fd, void *p, size_t n)
{
    uint8_t *c = p;
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, c + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    return got;
}

const char *dlt_file_kind(mode_t mode)
{
    if (S_ISREG(mode))
        return "a regular file";
    if (S_ISDIR(mode))
        return "a directory";
    if (S_ISFIFO(mode))
        return "a FIFO";
    if (S_ISCHR(mode))
        return "a character device";
    if (S_ISBLK(mode))
        return "a block device";
    if (S_ISSOCK(mode))
        return "a socket";
    return "a special file";
}

/* "WHAT PATH: why" (or "PATH: why" without an option name); returns -e. */
static int _refuse(const char *what, const char *path, int e, const char *why, dlt_err *err)
{
    dlt_fail(err, -e, "%s%s%s: %s", what ? what : "", what ? " " : "", path, why);
    errno = e;
    return -e;
}

static int _kind_refusal(const char *what, const char *path, mode_t mode, int want_dir, dlt_err *err)
{
    char why[96];
    snprintf(why, sizeof(why), "%s, not %s", dlt_file_kind(mode), want_dir ? "a directory" : "a regular file");
    return _refuse(what, path, want_dir ? ENOTDIR : EINVAL, why, err);
}

int dlt_open_regular(const char *what, const char *path, int flags, mode_t mode, dlt_err *err)
{
    struct stat st;
    int fd, fl;
    /* A read-open of a FIFO waits for a writer and a write-open for a reader, forever: open without
     * waiting, then look at what was opened. */
    fd = open(path, flags | O_NONBLOCK | O_CLOEXEC, mode);
    if (fd < 0) {
        int e = errno;
        if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) /* ENXIO: a FIFO without a reader, a socket */
            return _kind_refusal(what, path, st.st_mode, 0, err);
        return _refuse(what, path, e, strerror(e), err);
    }
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return _refuse(what, path, e, strerror(e), err);
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return _kind_refusal(what, path, st.st_mode, 0, err);
    }
    if ((fl = fcntl(fd, F_GETFL)) < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        int e = errno;
        close(fd);
        return _refuse(what, path, e, strerror(e), err);
    }
    return fd;
}

FILE *dlt_fopen_regular(const char *what, const char *path, const char *fmode, dlt_err *err)
{
    int flags = fmode[0] == 'w'   ? O_WRONLY | O_CREAT | O_TRUNC
                : fmode[0] == 'a' ? O_WRONLY | O_CREAT | O_APPEND
                                  : O_RDONLY;
    int fd = dlt_open_regular(what, path, flags, 0644, err);
    FILE *f;
    if (fd < 0)
        return NULL;
    if (!(f = fdopen(fd, fmode))) {
        int e = errno;
        close(fd);
        _refuse(what, path, e, strerror(e), err);
        return NULL;
    }
    return f;
}

int dlt_check_path(const char *what, const char *path, int want_dir, dlt_err *err)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        int e = errno;
        return _refuse(what, path, e, strerror(e), err);
    }
    if (want_dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode))
        return _kind_refusal(what, path, st.st_mode, want_dir, err);
    return 0;
}

int dlt_check_parent_dir(const char *what, const char *path, dlt_err *err)
{
    char dir[4096];
    const char *slash = strrchr(path, '/');
    size_t n;
    struct stat st;
    if (!slash)
        return 0; /* the working directory */
    n = slash == path ? 1 : (size_t)(slash - path);
    if (n >= sizeof(dir))
        return dlt_fail(err, -ENAMETOOLONG, "%s %s: its folder's path is longer than %zu bytes", what, path,
                        sizeof(dir) - 1);
    memcpy(dir, path, n);
    dir[n] = '\0';
    if (stat(dir, &st) != 0) {
        int e = errno;
        if (e == ENOENT)
            return dlt_fail(err, -e,
                            "%s %s: its folder %s does not exist: create it (mkdir -p %s) or name "
                            "another",
                            what, path, dir, dir);
        return dlt_fail(err, -e, "%s %s: its folder %s: %s", what, path, dir, strerror(e));
    }
    if (!S_ISDIR(st.st_mode))
        return dlt_fail(err, -ENOTDIR, "%s %s: %s is %s, not a folder", what, path, dir, dlt_file_kind(st.st_mode));
    return 0;
}

int dlt_mkdirs(const char *path)
{
    char buf[4096];
    struct stat st;
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof(buf)) {
        errno = n ? ENAMETOOLONG : ENOENT;
        return -1;
    }
    memcpy(buf, path, n + 1);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
        return -1;
    if (stat(buf, &st) != 0)
        return -1;
    if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

/* The failure of one step of an atomic write, as its words and -errno. */
static int _write_failed(const char *what, const char *path, int code, dlt_err *err)
{
    return dlt_fail(err, -code, "%s %s: %s", what, path, strerror(code));
}

int dlt_write_file_atomic(const char *path, const void *data, size_t len, mode_t mode, dlt_err *err)
{
    char tmp[4200];
    int fd, rc = 0;
    if (snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof(tmp))
        return _write_failed("cannot write", path, ENAMETOOLONG, err);
    if ((fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)) < 0)
        return _write_failed("cannot write", tmp, errno, err);
    if (dlt_write_all(fd, data, len) != 0 || fsync(fd) != 0)
        rc = _write_failed("cannot write", tmp, errno, err);
    if (close(fd) != 0 && rc == 0)
        rc = _write_failed("cannot write", tmp, errno, err);
    if (rc == 0 && rename(tmp, path) != 0)
        rc = _write_failed("cannot rename it into place:", tmp, errno, err);
    if (rc != 0)
        (void)unlink(tmp);
    return rc;
}
