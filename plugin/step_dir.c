/* SPDX-License-Identifier: Apache-2.0 */
/* step_dir: the step-private directory under the site's topo_dir. */
#include "config.h"

#include "step_dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
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

/* A directory above topo_dir that no user can change: root's, and writable by neither group nor
 * others, unless sticky (/tmp: the sticky bit keeps others from renaming or removing root's entries,
 * and an entry a user made first is theirs, which this refuses). */
static int _trusted_dir(const struct stat *st)
{
    return S_ISDIR(st->st_mode) && st->st_uid == 0 && (!(st->st_mode & (S_IWGRP | S_IWOTH)) || (st->st_mode & S_ISVTX));
}

#define TOPO_DIR_MAX_LINKS 40

/* Every directory above topo_dir, from /, checked on the descriptor opened for it (openat with
 * O_NOFOLLOW, so nothing is swapped between the check and the next step): _trusted_dir. A link on
 * the way is followed only when it is root's (its directory being trusted already, nobody else can
 * change it): /var/run -> /run stays usable. Without this, topo_dir=/tmp/%n/dltrain on a node where
 * a user made /tmp/n1 first would let that user point root's step folders anywhere. */
static int _parents_trusted(const char *topo_dir, dlt_err *err)
{
    char path[2 * 4096], next[2 * 4096], link[4096], shown[160];
    struct stat st;
    int fd, links = 0;
    const char *last = strrchr(topo_dir, '/');
    if (topo_dir[0] != '/' || !last)
        return dlt_fail(err, -EINVAL, "topo_dir %s is not an absolute path", topo_dir);
    if (snprintf(path, sizeof(path), "%.*s", (int)(last - topo_dir), topo_dir) >= (int)sizeof(path))
        return dlt_fail(err, -ENAMETOOLONG, "topo_dir %s is too long", topo_dir);
    fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) != 0 || !_trusted_dir(&st)) {
        if (fd >= 0)
            close(fd);
        return dlt_fail(err, -EPERM, "topo_dir %s: / is not root's or is writable by others", topo_dir);
    }
    for (char *p = path; *p;) {
        char *slash, *comp = p;
        int nfd;
        while (*comp == '/')
            comp++;
        if (!*comp)
            break;
        slash = strchr(comp, '/');
        if (slash)
            *slash = '\0';
        p = slash ? slash + 1 : comp + strlen(comp);
        if (!strcmp(comp, "."))
            continue;
        dlt_name_escape(comp, shown, sizeof(shown));
        if (!strcmp(comp, "..")) {
            close(fd);
            return dlt_fail(err, -EINVAL, "topo_dir %s has a '..' in it: give the plain path", topo_dir);
        }
        nfd = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (nfd < 0 && (errno == ELOOP || errno == ENOTDIR) && fstatat(fd, comp, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            S_ISLNK(st.st_mode)) {
            ssize_t n;
            if (st.st_uid != 0 || ++links > TOPO_DIR_MAX_LINKS) {
                close(fd);
                return dlt_fail(err, -EPERM, "topo_dir %s: the link '%s' on its way %s", topo_dir, shown,
                                st.st_uid != 0 ? "is not root's (a user could point it anywhere)"
                                               : "is one of too many links");
            }
            n = readlinkat(fd, comp, link, sizeof(link) - 1);
            if (n <= 0 || snprintf(next, sizeof(next), "%.*s/%s", (int)n, link, p) >= (int)sizeof(next)) {
                close(fd);
                return dlt_fail(err, -ENAMETOOLONG, "topo_dir %s: cannot follow the link '%s' on its way", topo_dir,
                                shown);
            }
            if (link[0] == '/') { /* an absolute target: from / again */
                close(fd);
                fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (fd < 0)
                    return _os_fail(err, errno, "cannot open / for topo_dir", topo_dir);
            }
            memcpy(path, next, strlen(next) + 1);
            p = path;
            continue;
        }
        if (nfd < 0) {
            int code = errno;
            close(fd);
            return dlt_fail(err, -code, "topo_dir %s: cannot open '%s' on its way: %s", topo_dir, shown,
                            strerror(code));
        }
        close(fd);
        fd = nfd;
        if (fstat(fd, &st) != 0 || !_trusted_dir(&st)) {
            close(fd);
            return dlt_fail(err, -EPERM,
                            "topo_dir %s: the folder '%s' on its way is not root's, or others can write it (uid %lu, "
                            "mode %04o): a user could swap what lies below it; put topo_dir under root's folders "
                            "only (default /run/dltrain)",
                            topo_dir, shown, (unsigned long)st.st_uid, (unsigned)(st.st_mode & 07777));
        }
    }
    close(fd);
    return 0;
}

int dlt_topo_dir_check(const char *topo_dir, dlt_err *err)
{
    struct stat st;
    int rc;
    if ((rc = _parents_trusted(topo_dir, err)) != 0)
        return rc;
    if (lstat(topo_dir, &st) != 0) {
        if (errno != ENOENT)
            return _os_fail(err, errno, "cannot stat topo_dir", topo_dir);
        if (mkdir(topo_dir, 0755) == 0) {
            /* 0755 whatever slurmd's umask: tasks must pass through it to their topology file. */
            int fd = open(topo_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (fd < 0)
                return _os_fail(err, errno, "cannot open topo_dir", topo_dir);
            if (fchmod(fd, 0755) != 0) {
                int code = errno;
                close(fd);
                return _os_fail(err, code, "cannot chmod 0755 the new topo_dir", topo_dir);
            }
            close(fd);
        } else if (errno != EEXIST) {
            return _os_fail(err, errno, "cannot create topo_dir", topo_dir);
        }
        if (lstat(topo_dir, &st) != 0)
            return _os_fail(err, errno, "cannot stat topo_dir", topo_dir);
    }
    if (!S_ISDIR(st.st_mode)) {
        return dlt_fail(err, -ENOTDIR, "topo_dir %s is not a directory (a link or file there is refused)", topo_dir);
    }
    if (st.st_uid != 0 || (st.st_mode & (S_IWGRP | S_IWOTH))) {
        return dlt_fail(err, -EPERM,
                        "topo_dir %s must be owned by root and not writable by group or others (mode %04o)", topo_dir,
                        (unsigned)(st.st_mode & 07777));
    }
    /* The step folder is root's with the job's group, topo_dir root's: a task passes topo_dir as
     * "others". Without that NCCL cannot open NCCL_TOPO_FILE and only warns. */
    if (!(st.st_mode & S_IXOTH)) {
        return dlt_fail(err, -EPERM,
                        "topo_dir %s must be searchable by others (mode %04o), or tasks cannot read their "
                        "topology file: chmod o+x %s (0755)",
                        topo_dir, (unsigned)(st.st_mode & 07777), topo_dir);
    }
    return 0;
}

static int _valid_component(const char *name)
{
    return name && *name && !strchr(name, '/') && strcmp(name, ".") && strcmp(name, "..") && strlen(name) < 128;
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

/* One removal: its limits, and what stopped it. */
typedef struct {
    dev_t dev;            /* topo_dir's filesystem: no other is entered */
    uid_t owner;          /* the removed tree's owner: no folder of another owner is entered */
    unsigned long budget; /* entries this removal may still handle */
    unsigned long lifted; /* names handed out in the work folder */
    char why[96];         /* what strerror does not say: ", a mount point"... */
    char where[256];      /* the entry the walk stopped at, escaped */
} rm_walk;

static int _stop(rm_walk *w, int rc, const char *name, const char *why)
{
    dlt_name_escape(name, w->where, sizeof(w->where));
    snprintf(w->why, sizeof(w->why), "%s", why);
    return rc;
}

static int _stop_owner(rm_walk *w, const char *name, uid_t uid)
{
    char why[96];
    snprintf(why, sizeof(why), ", a folder of uid %lu, not of the tree's owner uid %lu (never entered)",
             (unsigned long)uid, (unsigned long)w->owner);
    return _stop(w, -EPERM, name, why);
}

#define WHY_MOUNT ", a mount point (never entered)"

/* Moves the directory name of dfd up into the work folder wd under a fresh name, so that it is
 * emptied from there: the walk never goes deeper than one level below wd, whatever the depth of the
 * user's tree. wd is root's own (0700, see _remove_at): nobody else can make a name there, so a
 * name taken (EEXIST) is only ever one of this walk's, and the next is tried. A mount point cannot
 * move (EXDEV, EBUSY): it is reported, never entered. */
static int _lift(int dfd, const char *name, int wd, rm_walk *w)
{
    char fresh[48];
    for (int tries = 0; tries < 1024; tries++) {
        snprintf(fresh, sizeof(fresh), "lifted-%lu", w->lifted++);
        if (renameat2(dfd, name, wd, fresh, RENAME_NOREPLACE) == 0 || errno == ENOENT)
            return 0;
        if (errno == EXDEV || errno == EBUSY)
            return _stop(w, -EXDEV, name, WHY_MOUNT);
        if (errno != EEXIST)
            return _stop(w, -errno, name, "");
    }
    return _stop(w, -EEXIST, name, ", no free name in the work folder");
}

/* Empties the directory name of the work folder wd: its files and links are removed, its
 * sub-directories lifted into wd. Only a folder of the tree's owner is read and changed, checked on
 * the descriptor that is read (no window between the check and the use).
 *
 * Why that is safe, as root, in a tree a user may still be changing and may have moved anything of
 * theirs into (an earlier version of the plugin handed the folder to the user): whatever root does
 * inside a folder the owner owns, the owner could do too. The owner of a directory may remove any
 * entry of it (chmod it writable; the sticky bit never protects entries from the directory's owner),
 * so unlinking its files and removing its empty sub-directories takes nobody anything the owner
 * could not take. A folder of anyone else (say another user's 0700 folder inside a sticky 1777
 * folder the owner moved here) is never read, emptied nor lifted: it stays where it is, and the
 * removal stops, naming it. Root's own step folders (owner 0) are walked the same way. Dropping to
 * the owner's ids in a forked child would give the same guarantee from the kernel, at the cost of a
 * fork in the multi-threaded slurmstepd and of a channel for the result; the one ownership check
 * is simpler and needs nothing else. */
static int _empty_one(int wd, const char *name, rm_walk *w)
{
    struct stat st;
    struct dirent *c;
    DIR *cd;
    int cfd, r, rc = 0;
    cfd = openat(wd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (cfd < 0) {
        if (errno == ENOENT || errno == ELOOP || errno == ENOTDIR)
            return 0; /* swapped meanwhile: the next pass sees what is there now */
        return _stop(w, -errno, name, "");
    }
    if (fstat(cfd, &st) != 0) {
        rc = -errno;
        close(cfd);
        return _stop(w, rc, name, " (fstat)");
    }
    if (st.st_dev != w->dev) {
        close(cfd);
        return _stop(w, -EXDEV, name, WHY_MOUNT);
    }
    if (st.st_uid != w->owner) {
        close(cfd);
        return _stop_owner(w, name, st.st_uid);
    }
    if (!(cd = fdopendir(cfd))) {
        rc = -errno;
        close(cfd);
        return _stop(w, rc, name, "");
    }
    for (;;) {
        errno = 0; /* readdir says an error only through errno: never read as the folder's end */
        if (!(c = readdir(cd))) {
            if (errno != 0)
                rc = _stop(w, -errno, name, " (readdir)");
            break;
        }
        if (!strcmp(c->d_name, ".") || !strcmp(c->d_name, ".."))
            continue;
        if (w->budget == 0) {
            rc = _stop(w, -EMLINK, c->d_name, ", more entries than the limit");
            break;
        }
        w->budget--;
        if ((r = _unlink_non_dir(dirfd(cd), c->d_name)) < 0) {
            rc = _stop(w, r, c->d_name, "");
            break;
        }
        if (r > 0)
            continue;
        /* Not lifted when it is another's; the check on the opened folder above is what holds when
         * the name is swapped after this one. */
        if (fstatat(dirfd(cd), c->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode) &&
            st.st_uid != w->owner) {
            rc = _stop_owner(w, c->d_name, st.st_uid);
            break;
        }
        if ((rc = _lift(dirfd(cd), c->d_name, wd, w)) != 0)
            break;
    }
    closedir(cd);
    /* ENOTEMPTY: entries made meanwhile (through a descriptor a task kept); the next pass empties it
     * again. */
    if (rc == 0 && unlinkat(wd, name, AT_REMOVEDIR) != 0 && errno != ENOENT && errno != ENOTEMPTY && errno != EEXIST)
        rc = _stop(w, -errno, name, "");
    return rc;
}

/* Removes everything inside the work folder wd, at any depth. No recursion and no path: each
 * directory in wd is emptied of its files and links, its own sub-directories are moved up into wd
 * (same filesystem: renameat2 with RENAME_NOREPLACE), and it is removed; the moved ones follow in
 * the next pass. Four descriptors at most (topo_dir, wd, a stream over wd, one over the folder being
 * emptied), every step relative to an open directory, no link followed (O_NOFOLLOW, unlinkat), no
 * other filesystem entered (st_dev), no folder of another owner entered (_empty_one). The removal
 * handles at most DLT_STEP_DIR_MAX_ENTRIES entries in all, so a task that keeps adding entries
 * cannot hold slurmstepd. 0, or the first failure as -errno with the entry's name in w. */
static int _empty_work(int wd, rm_walk *w)
{
    for (;;) {
        int seen = 0, rc = 0, r, lfd;
        struct dirent *e;
        DIR *d;
        lfd = openat(wd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (lfd < 0 || !(d = fdopendir(lfd))) {
            rc = -errno;
            if (lfd >= 0)
                close(lfd);
            return _stop(w, rc, ".", "");
        }
        for (;;) {
            errno = 0;
            if (!(e = readdir(d))) {
                if (errno != 0)
                    rc = _stop(w, -errno, ".", " (readdir)");
                break;
            }
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                continue;
            seen++;
            if (w->budget == 0) {
                rc = _stop(w, -EMLINK, e->d_name, ", more entries than the limit");
                break;
            }
            w->budget--;
            if ((r = _unlink_non_dir(wd, e->d_name)) < 0) {
                rc = _stop(w, r, e->d_name, "");
                break;
            }
            if (r == 0 && (rc = _empty_one(wd, e->d_name, w)) != 0)
                break;
        }
        closedir(d);
        if (rc != 0 || seen == 0)
            return rc;
    }
}

/* Removes topo_dir's entry name (a step folder, or whatever sits at its name) entirely. top is
 * topo_dir, opened by the caller. A directory is first moved into a work folder made for this
 * removal, root's and 0700 (mkdirat, a fresh name: created, never reused): from then on no user can
 * reach the tree by its path nor make a name where the walk lifts folders to (a task's descriptor
 * inside the tree reaches no further than the tree itself). 0, or -errno with w's where and why, and
 * work naming the work folder, left in topo_dir with what could not be removed. */
static int _remove_at(int top, const char *name, rm_walk *w, char *work, size_t worklen)
{
    struct stat st;
    int wd = -1, rc;
    work[0] = '\0';
    if (fstat(top, &st) != 0)
        return _stop(w, -errno, ".", " (fstat of topo_dir)");
    w->dev = st.st_dev;
    w->budget = DLT_STEP_DIR_MAX_ENTRIES;
    w->lifted = 0;
    w->where[0] = w->why[0] = '\0';
    rc = _unlink_non_dir(top, name);
    if (rc != 0)
        return rc < 0 ? _stop(w, rc, name, "") : 0;
    for (int i = 0;; i++) {
        if (i == 1000) {
            work[0] = '\0';
            return _stop(w, -EEXIST, name, ", no free name for a work folder in topo_dir");
        }
        snprintf(work, worklen, ".stale-%s-%ld-%d", name, (long)getpid(), i);
        if (mkdirat(top, work, 0700) == 0)
            break;
        if (errno != EEXIST) {
            rc = -errno;
            work[0] = '\0';
            return _stop(w, rc, name, " (making a work folder in topo_dir)");
        }
    }
    wd = openat(top, work, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (wd < 0) {
        rc = _stop(w, -errno, work, "");
        goto out;
    }
    if (renameat2(top, name, wd, name, RENAME_NOREPLACE) != 0) {
        rc = errno == ENOENT                    ? 0
             : errno == EXDEV || errno == EBUSY ? _stop(w, -EXDEV, name, WHY_MOUNT)
                                                : _stop(w, -errno, name, "");
        goto out;
    }
    /* The tree's owner, read where nobody else can swap it any more. */
    if (fstatat(wd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        rc = _stop(w, -errno, name, " (fstat)");
        goto out;
    }
    w->owner = st.st_uid;
    rc = _empty_work(wd, w);
out:
    if (wd >= 0)
        close(wd);
    /* Empty (the tree was removed, or never moved in): the work folder goes too. */
    if (unlinkat(top, work, AT_REMOVEDIR) == 0)
        work[0] = '\0';
    else if (rc == 0)
        rc = _stop(w, -errno, work, "");
    return rc;
}

/* Whether the step folder name of top is held by a live slurmstepd: its lock file opened and
 * flock'ed (LOCK_EX, not waiting). 1 held (someone else has the lock), 0 not (no folder, no lock
 * file: a leftover, or the lock taken and dropped at once). Only root can open the lock file (0600,
 * root's, in a folder tasks cannot write), so no task can hold it and make a folder look live. */
static int _held_by_live_step(int top, const char *name)
{
    int dfd = openat(top, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC), lfd, held = 0;
    if (dfd < 0)
        return 0;
    lfd = openat(dfd, DLT_STEP_DIR_LOCK, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (lfd >= 0) {
        held = flock(lfd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
        close(lfd); /* a lock taken here goes with the descriptor */
    }
    close(dfd);
    return held;
}

int dlt_step_dir_create(const char *topo_dir, const char *name, const char *file_name, const char *contents, size_t len,
                        gid_t gid, char *path_out, size_t pathlen, int *stale, char *note, size_t notelen, int *held,
                        dlt_err *err)
{
    int top = -1, dfd = -1, fd = -1, lfd = -1, rc = 0, r, made = 0;
    size_t done = 0;
    char aside[192] = "", work[192];
    rm_walk w;

    *stale = 0;
    *held = -1;
    if (notelen)
        note[0] = '\0';
    if (!_valid_component(name) || !_valid_component(file_name) || !strcmp(file_name, DLT_STEP_DIR_LOCK)) {
        return dlt_fail(err, -EINVAL, "invalid step directory name");
    }
    top = open(topo_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (top < 0)
        return _os_fail(err, errno, "cannot open topo_dir", topo_dir);
    if (mkdirat(top, name, 0700) != 0) {
        /* A leftover of the same job.step id (job ids wrapped, the controller's state reset, a node
         * that crashed mid-step): nothing of a running step can be there, so it is stale. It is
         * removed first (moved into a work folder of root's, see _remove_at); what cannot be
         * removed stays there, out of the way and out of every user's reach, and never blocks this
         * step. */
        if (errno != EEXIST) {
            rc = _os_fail(err, errno, "cannot create step directory under", topo_dir);
            goto out;
        }
        /* Unless a live slurmstepd holds it: the same job.step on this host from another slurmd
         * (several slurmd on one host sharing a topo_dir without %n). Its folder is never taken. */
        if (_held_by_live_step(top, name)) {
            close(top);
            return dlt_fail(err, -EBUSY,
                            "%s/%s is the folder of a live step of the same id on this host (its slurmstepd holds "
                            "it): several slurmd on one host need their own topo_dir (put %%n in topo_dir=)",
                            topo_dir, name);
        }
        *stale = 1;
        if ((r = _remove_at(top, name, &w, aside, sizeof(aside))) != 0) {
            if (!aside[0]) { /* still at its name: this step cannot have its folder */
                rc = dlt_fail(err, r, "cannot move aside the stale step directory %s/%s (at '%s': %s%s)", topo_dir,
                              name, w.where, strerror(-r), w.why);
                goto out;
            }
            snprintf(note, notelen,
                     "the stale step directory, moved aside to %s/%s, could not be removed entirely "
                     "(at '%s': %s%s)",
                     topo_dir, aside, w.where, strerror(-r), w.why);
        }
        if (mkdirat(top, name, 0700) != 0) {
            rc = _os_fail(err, errno, "cannot create step directory under", topo_dir);
            goto out;
        }
    }
    made = 1;
    dfd = openat(top, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0) {
        rc = _os_fail(err, errno, "cannot open step directory under", topo_dir);
        goto out;
    }
    /* The lock that says this folder is a live step's, held until the step's removal: root's, 0600. */
    lfd = openat(dfd, DLT_STEP_DIR_LOCK, O_RDONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (lfd < 0 || flock(lfd, LOCK_EX | LOCK_NB) != 0) {
        rc = _os_fail(err, errno, "cannot make the step directory's lock under", topo_dir);
        goto out;
    }
    /* Written while the directory is 0700: nobody else can be in it. */
    fd = openat(dfd, file_name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        rc = _os_fail(err, errno, "cannot create file in step directory under", topo_dir);
        goto out;
    }
    while (done < len) {
        ssize_t n = write(fd, contents + done, len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            rc = _os_fail(err, n < 0 ? errno : EIO, "cannot write topology file under", topo_dir);
            goto out;
        }
        done += (size_t)n;
    }
    /* The task needs to read the file, never to write there: the folder stays its creator's (root
     * in slurmstepd), readable by the job's group only, so a task can neither fill root's topo_dir
     * nor leave anything in it. */
    if (fsync(fd) != 0) {
        rc = _os_fail(err, errno, "cannot finish step directory (fsync of the topology file) under", topo_dir);
        goto out;
    }
    if (fchown(fd, (uid_t)-1, gid) != 0 || fchown(dfd, (uid_t)-1, gid) != 0) {
        rc = _os_fail(err, errno, "cannot finish step directory (fchown to the job's group) under", topo_dir);
        goto out;
    }
    if (fchmod(fd, 0640) != 0 || fchmod(dfd, 0750) != 0) {
        rc = _os_fail(err, errno, "cannot finish step directory (fchmod) under", topo_dir);
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
    if (rc == 0)
        *held = lfd;
    else if (lfd >= 0)
        close(lfd);
    /* A failed step leaves nothing: the folder it made goes, even when it could not be opened. */
    if (rc != 0 && made) {
        if ((r = _remove_at(top, name, &w, work, sizeof(work))) != 0)
            dlt_fail_suffix(err, rc, "; the step directory %s/%s could not be removed either%s%s%s%s (at '%s': %s%s)",
                            topo_dir, name, work[0] ? ", what is left is in " : "", work[0] ? topo_dir : "",
                            work[0] ? "/" : "", work, w.where, strerror(-r), w.why);
    }
    close(top);
    return rc;
}

int dlt_step_dir_remove(const char *topo_dir, const char *name, int held, dlt_err *err)
{
    char work[192];
    int top, rc, dfd;
    struct stat mine, there;
    rm_walk w;
    if (!_valid_component(name)) {
        if (held >= 0)
            close(held);
        return dlt_fail(err, -EINVAL, "invalid step directory name");
    }
    top = open(topo_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (top < 0) {
        rc = errno;
        if (held >= 0)
            close(held);
        return _os_fail(err, rc, "cannot open topo_dir", topo_dir);
    }
    /* Only the folder this step made (its lock is the one held): anything else at the name is left. */
    if (held >= 0) {
        dfd = openat(top, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        rc = dfd < 0 || fstat(held, &mine) != 0 || fstatat(dfd, DLT_STEP_DIR_LOCK, &there, AT_SYMLINK_NOFOLLOW) != 0 ||
             mine.st_dev != there.st_dev || mine.st_ino != there.st_ino;
        if (dfd >= 0)
            close(dfd);
        close(held);
        if (rc) {
            close(top);
            return dlt_fail(err, -ESTALE,
                            "%s/%s is no longer the folder this step made (replaced by another slurmstepd sharing "
                            "topo_dir?): left as it is",
                            topo_dir, name);
        }
    }
    rc = _remove_at(top, name, &w, work, sizeof(work));
    close(top);
    if (rc != 0)
        return dlt_fail(err, rc, "cannot remove %s/%s entirely%s%s%s%s (at '%s': %s%s)", topo_dir, name,
                        work[0] ? ": what is left is in " : "", work[0] ? topo_dir : "", work[0] ? "/" : "", work,
                        w.where, strerror(-rc), w.why);
    return 0;
}

/* "J.S": a step folder's name (decimal job and step ids). */
static int _step_folder_name(const char *s)
{
    const char *p = s;
    int dots = 0, digits = 0;
    for (; *p; p++) {
        if (*p == '.' && digits > 0 && dots == 0) {
            dots = 1;
            digits = 0;
        } else if (*p >= '0' && *p <= '9') {
            digits++;
        } else {
            return 0;
        }
    }
    return dots == 1 && digits > 0 && p - s < 32;
}

int dlt_step_dir_sweep(const char *topo_dir, const char *except, int min_age_s, int *removed, char *note,
                       size_t notelen, dlt_err *err)
{
    DIR *d;
    struct dirent *e;
    struct timespec now;
    int top, rc = 0, seen = 0;
    size_t at = 0;
    *removed = 0;
    if (notelen)
        note[0] = '\0';
    top = open(topo_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (top < 0)
        return _os_fail(err, errno, "cannot open topo_dir", topo_dir);
    {
        int dup_fd = dup(top);
        if (dup_fd < 0 || !(d = fdopendir(dup_fd))) {
            rc = _os_fail(err, errno, "cannot list topo_dir", topo_dir);
            if (dup_fd >= 0)
                close(dup_fd);
            close(top);
            return rc;
        }
    }
    clock_gettime(CLOCK_REALTIME, &now);
    while ((e = readdir(d)) != NULL && seen < DLT_STEP_DIR_SWEEP_MAX) {
        struct stat st;
        char work[192];
        rm_walk w;
        int r;
        if (!_step_folder_name(e->d_name) || (except && !strcmp(e->d_name, except)))
            continue;
        seen++;
        /* Only root's folders (what this plugin makes), old enough that their step is past the
         * moment between making the folder and locking it, and whose lock no slurmstepd holds. */
        if (fstatat(top, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
            now.tv_sec - st.st_ctime < min_age_s || _held_by_live_step(top, e->d_name))
            continue;
        if ((r = _remove_at(top, e->d_name, &w, work, sizeof(work))) != 0) {
            if (at < notelen)
                at += (size_t)snprintf(
                    note + at, notelen - at,
                    "%sthe stale step folder %s/%s could not be removed entirely%s%s (at '%s': %s%s)", at ? "; " : "",
                    topo_dir, e->d_name, work[0] ? ", what is left is in " : "", work, w.where, strerror(-r), w.why);
            continue;
        }
        (*removed)++;
    }
    closedir(d);
    close(top);
    return 0;
}
