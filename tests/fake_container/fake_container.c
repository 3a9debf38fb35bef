/* SPDX-License-Identifier: Apache-2.0 */
/* fake_container: a SPANK plugin for the tests that does in task_init what pyxis does there: puts
 * the task in another mount namespace before the plugins listed after it run (pyxis joins the
 * container's namespaces with setns in its slurm_spank_task_init). Arguments: hide=DIR (a tmpfs
 * over DIR, as a container image lacks the host's /run), bind=PATH and stash=DIR (PATH bound back
 * read-only at the same place: the bind spank_dltrain(8) documents). Tasks run as root in the
 * test cluster, which this needs (CAP_SYS_ADMIN). Never installed. */
#define _GNU_SOURCE /* unshare, CLONE_NEWNS */
#include <errno.h>
#include <sched.h>
#include <slurm/spank.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>

SPANK_PLUGIN(fake_container, 1);

static int _mkdir_p(const char *path)
{
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", path);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(buf, 0755) != 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    return mkdir(buf, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

static int _fail(const char *what, const char *path)
{
    slurm_error("fake_container: %s %s: %s", what, path, strerror(errno));
    return -1;
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
    const char *hide = NULL, *bind = NULL, *stash = NULL;
    (void)sp;
    for (int i = 0; i < ac; i++) {
        if (!strncmp(av[i], "hide=", 5))
            hide = av[i] + 5;
        else if (!strncmp(av[i], "bind=", 5))
            bind = av[i] + 5;
        else if (!strncmp(av[i], "stash=", 6))
            stash = av[i] + 6;
    }
    if (!hide)
        return 0;
    if (unshare(CLONE_NEWNS) != 0)
        return _fail("unshare", "CLONE_NEWNS");
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
        return _fail("make private", "/");
    if (bind && stash && (_mkdir_p(stash) != 0 || mount(bind, stash, NULL, MS_BIND | MS_REC, NULL) != 0))
        return _fail("bind to the stash", bind);
    if (mount("tmpfs", hide, "tmpfs", 0, "mode=0755") != 0)
        return _fail("tmpfs over", hide);
    if (bind && stash) {
        if (_mkdir_p(bind) != 0 || mount(stash, bind, NULL, MS_BIND | MS_REC, NULL) != 0)
            return _fail("bind back", bind);
        if (mount(NULL, bind, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL) != 0)
            return _fail("read-only", bind);
    }
    return 0;
}
