/* SPDX-License-Identifier: Apache-2.0 */
/* topo_file: whether the task can read its NCCL_TOPO_FILE where it runs, and the bind to add. */
#include "config.h"

#include "common/topo_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* path with control characters as '?', cut to fit. */
static void _shown(const char *path, char *out, size_t len)
{
    size_t n = 0;
    for (; path[n] && n + 1 < len; n++)
        out[n] = (unsigned char)path[n] < 0x20 || path[n] == 0x7f ? '?' : path[n];
    out[n] = '\0';
}

/* The plugin writes TOPO_DIR/JOB.STEP/nccl_topo.xml: the folder to bind is TOPO_DIR, two levels
 * up, which holds every step's folder; a path of another shape is bound as its own folder. */
static void _bind_dir(const char *shown, char *out, size_t len)
{
    const char *last = strrchr(shown, '/');
    size_t n;
    snprintf(out, len, "%s", shown);
    if (!last || last == shown)
        return;
    n = (size_t)(last - shown);
    if (n < len)
        out[n] = '\0';
    last = strrchr(out, '/');
    if (last && last != out)
        out[last - out] = '\0';
}

int dlt_topo_file_check(const char *path, char *msg, size_t len)
{
    char shown[256], dir[256];
    struct stat st;
    int fd, code = 0;
    if (len)
        msg[0] = '\0';
    if (!path || !*path)
        return 0;
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        code = errno;
    else if (fstat(fd, &st) != 0)
        code = errno;
    else if (!S_ISREG(st.st_mode))
        code = S_ISDIR(st.st_mode) ? EISDIR : EINVAL;
    if (fd >= 0)
        close(fd);
    if (code == 0)
        return 0;
    _shown(path, shown, sizeof(shown));
    _bind_dir(shown, dir, sizeof(dir));
    snprintf(msg, len,
             "NCCL_TOPO_FILE=%s cannot be read here (%s): NCCL would ignore it, saying so only under "
             "NCCL_DEBUG=INFO, and guess the node's topology. In a container, bind the plugin's topo_dir "
             "read-only at the same path: pyxis --container-mounts=%s:%s:ro (or a line in "
             "/etc/enroot/mounts.d), Apptainer --bind %s:%s:ro (or 'bind path = %s' in apptainer.conf), "
             "Charliecloud ch-run -b %s (the folder made in the image first), podman run -v %s:%s:ro; "
             "see spank_dltrain(8), CONTAINERS",
             shown, code == EINVAL ? "not a regular file" : strerror(code), dir, dir, dir, dir, dir, dir, dir, dir);
    return -code;
}
