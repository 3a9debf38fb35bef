/* SPDX-License-Identifier: Apache-2.0 */
/* algo_cache: convolution algorithm choices kept in a text file across processes, so that a second
 * launch on the same GPU model and cuDNN skips the timed search (a ResNet-50 search costs seconds
 * per launch). Every line is "dltalgo1 KEY... = CHOICE..." and is checked whole before it is used. */
#include "config.h"

#include "trainer/backend/algo_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define TAG "dltalgo1"

static void _key_text(const dlt_algo_key *k, char *out, size_t outlen)
{
    char dev[sizeof(k->device)];
    size_t i;
    for (i = 0; i + 1 < sizeof(dev) && k->device[i]; i++)
        dev[i] = (k->device[i] == ' ' || k->device[i] == '\t' || k->device[i] == '\n' || k->device[i] == '=')
                     ? '_'
                     : k->device[i];
    dev[i] = 0;
    snprintf(out, outlen, "%s %s cc%d cudnn%ld dt%d math%d det%d ws%zu n%d c%d/%d h%d w%d k%d r%d s%d st%d pad%d", TAG,
             dev[0] ? dev : "-", k->cc, k->library, k->dtype, k->math, k->deterministic, k->ws_limit, k->s.n, k->s.c,
             k->channels, k->s.h, k->s.w, k->s.k, k->s.r, k->s.s, k->s.stride, k->s.pad);
}

int dlt_algo_cache_lookup(const char *path, const dlt_algo_key *key, dlt_algo_choice *out, int *damaged, dlt_err *err)
{
    char want[512], line[1024];
    size_t wl;
    int found = 0, bad = 0;
    FILE *f = fopen(path, "r");
    if (!f) {
        if (errno == ENOENT)
            return 0;
        return dlt_fail(err, -errno, "--cudnn-cache %s: %s", path, strerror(errno));
    }
    _key_text(key, want, sizeof(want));
    wl = strlen(want);
    while (fgets(line, sizeof(line), f)) {
        dlt_algo_choice c;
        char end;
        if (!strchr(line, '\n') && !feof(f)) { /* longer than any line this writes: skip the rest */
            int ch;
            while ((ch = fgetc(f)) != EOF && ch != '\n')
                ;
            bad++;
            continue;
        }
        if (strncmp(line, TAG " ", sizeof(TAG)) != 0) {
            bad += line[0] != '\n' && line[0] != '#';
            continue;
        }
        if (strncmp(line, want, wl) != 0 || strncmp(line + wl, " = ", 3) != 0)
            continue; /* another key (or a damaged one: it can never match) */
        if (sscanf(line + wl + 3, "fwd %d/%d data %d/%d/%d filter %d/%d%c", &c.fwd, &c.fwd_math, &c.data, &c.data_math,
                   &c.data_ok, &c.filter, &c.filter_math, &end) != 8 ||
            end != '\n' || c.fwd < 0 || c.data < 0 || c.filter < 0 || c.fwd_math < 0 || c.data_math < 0 ||
            c.filter_math < 0 || (c.data_ok != 0 && c.data_ok != 1)) {
            bad++;
            continue;
        }
        *out = c;
        found = 1;
    }
    if (ferror(f)) {
        dlt_fail(err, -EIO, "--cudnn-cache %s: read error", path);
        fclose(f);
        return -EIO;
    }
    fclose(f);
    if (damaged)
        *damaged = bad;
    return found;
}

int dlt_algo_cache_store(const char *path, const dlt_algo_key *key, const dlt_algo_choice *c, dlt_err *err)
{
    char line[1024];
    size_t kl;
    ssize_t w;
    int fd, e;
    _key_text(key, line, sizeof(line));
    kl = strlen(line);
    snprintf(line + kl, sizeof(line) - kl, " = fwd %d/%d data %d/%d/%d filter %d/%d\n", c->fwd, c->fwd_math, c->data,
             c->data_math, c->data_ok, c->filter, c->filter_math);
    fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        e = errno;
        return dlt_fail(err, -e, "--cudnn-cache %s: cannot open for appending: %s", path, strerror(e));
    }
    kl = strlen(line);
    w = write(fd, line, kl);
    e = errno;
    if (close(fd) != 0 && w == (ssize_t)kl) {
        w = -1;
        e = errno;
    }
    if (w != (ssize_t)kl) {
        dlt_fail(err, -EIO, "--cudnn-cache %s: cannot append: %s", path, w < 0 ? strerror(e) : "short write");
        return w < 0 ? -e : -EIO;
    }
    return 0;
}
