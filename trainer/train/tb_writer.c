/* SPDX-License-Identifier: Apache-2.0 */
/* tb_writer: Event protobufs in protobuf's wire format (field tags, varints, fixed64/32,
 * length-delimited strings and messages) inside TFRecord frames. The fields written:
 *   Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
 *   Summary { repeated Value value = 1; }   Value { string tag = 1; float simple_value = 2; }
 * (tensorflow/core/util/event.proto, tensorflow/core/framework/summary.proto). */
#include "config.h"

#include "trainer/train/tb_writer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/crc32c.h"
#include "common/io.h"
#include "common/status.h"

struct dlt_tb_writer {
    int fd;
    char path[4096];
    uint8_t *buf; /* framed records waiting for the next flush */
    size_t len, cap;
};

/* protobuf wire types */
enum { WT_VARINT = 0, WT_FIXED64 = 1, WT_LEN = 2, WT_FIXED32 = 5 };

static size_t _varint(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    do {
        p[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    return n;
}

static size_t _key(uint8_t *p, unsigned field, unsigned wire)
{
    return _varint(p, (uint64_t)field << 3 | wire);
}

static size_t _le(uint8_t *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (uint8_t)(v >> (8 * i));
    return (size_t)bytes;
}

static size_t _double(uint8_t *p, unsigned field, double v)
{
    uint64_t bits;
    size_t n = _key(p, field, WT_FIXED64);
    memcpy(&bits, &v, sizeof(bits));
    return n + _le(p + n, bits, 8);
}

static size_t _bytes(uint8_t *p, unsigned field, const void *s, size_t len)
{
    size_t n = _key(p, field, WT_LEN);
    n += _varint(p + n, len);
    memcpy(p + n, s, len);
    return n + len;
}

static double _wall_time(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void dlt_tb_frame(uint8_t *out, const uint8_t *data, size_t len)
{
    _le(out, len, 8);
    _le(out + 8, dlt_crc32c_masked(out, 8), 4);
    memcpy(out + 12, data, len);
    _le(out + 12 + len, dlt_crc32c_masked(data, len), 4);
}

/* Frames one encoded event into the queue. */
static int _queue(dlt_tb_writer *w, const uint8_t *event, size_t len)
{
    if (w->len + len + 16 > w->cap) {
        size_t cap = 2 * (w->len + len + 16);
        uint8_t *nb = realloc(w->buf, cap);
        if (!nb)
            return -ENOMEM;
        w->buf = nb;
        w->cap = cap;
    }
    dlt_tb_frame(w->buf + w->len, event, len);
    w->len += len + 16;
    return 0;
}

int dlt_tb_scalar(dlt_tb_writer *w, const char *tag, int64_t step, double value)
{
    uint8_t value_msg[300], summary[320], event[360];
    size_t tl = strnlen(tag, 255), nv = 0, ns = 0, ne = 0;
    float f = (float)value;
    uint32_t fbits;
    memcpy(&fbits, &f, sizeof(fbits));
    nv += _bytes(value_msg, 1, tag, tl);
    nv += _key(value_msg + nv, 2, WT_FIXED32);
    nv += _le(value_msg + nv, fbits, 4);
    ns = _bytes(summary, 1, value_msg, nv);
    ne += _double(event, 1, _wall_time());
    ne += _key(event + ne, 2, WT_VARINT);
    ne += _varint(event + ne, (uint64_t)step);
    ne += _bytes(event + ne, 5, summary, ns);
    return _queue(w, event, ne);
}

int dlt_tb_flush(dlt_tb_writer *w, dlt_err *err)
{
    size_t len = w->len;
    w->len = 0;
    if (dlt_write_all(w->fd, w->buf, len) != 0)
        return dlt_fail(err, -errno, "cannot append to the TensorBoard file %s: %s", w->path, strerror(errno));
    return 0;
}

const char *dlt_tb_path(const dlt_tb_writer *w)
{
    return w->path;
}

int dlt_tb_open(dlt_tb_writer **out, const char *dir, dlt_err *err)
{
    static const char version[] = "brain.Event:2";
    char host[256] = "localhost";
    uint8_t event[64];
    size_t ne;
    long now = (long)time(NULL);
    dlt_tb_writer *w;
    int rc;
    *out = NULL;
    if (dlt_mkdirs(dir) != 0)
        return dlt_fail(err, -errno, "cannot create the TensorBoard directory %s: %s", dir, strerror(errno));
    if (!(w = calloc(1, sizeof(*w))))
        return dlt_fail(err, -ENOMEM, "out of memory for the TensorBoard writer");
    if (gethostname(host, sizeof(host) - 1) != 0 || !host[0] || strchr(host, '/'))
        snprintf(host, sizeof(host), "localhost");
    w->fd = -1;
    for (int i = 0; i < 100 && w->fd < 0; i++) {
        if (i == 0)
            snprintf(w->path, sizeof(w->path), "%.3800s/events.out.tfevents.%ld.%.200s", dir, now, host);
        else
            snprintf(w->path, sizeof(w->path), "%.3800s/events.out.tfevents.%ld.%.200s.%d", dir, now, host, i);
        w->fd = open(w->path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
        if (w->fd < 0 && errno != EEXIST)
            break;
    }
    if (w->fd < 0) {
        rc = dlt_fail(err, -errno, "cannot create the TensorBoard file %s: %s", w->path, strerror(errno));
        free(w);
        return rc;
    }
    ne = _double(event, 1, _wall_time());
    ne += _bytes(event + ne, 3, version, sizeof(version) - 1);
    if ((rc = _queue(w, event, ne)) != 0 || (rc = dlt_tb_flush(w, err)) != 0) {
        if (rc == -ENOMEM)
            dlt_fail(err, rc, "out of memory for the TensorBoard writer");
        dlt_tb_close(w);
        return rc;
    }
    *out = w;
    return 0;
}

void dlt_tb_close(dlt_tb_writer *w)
{
    if (!w)
        return;
    if (w->len)
        dlt_tb_flush(w, NULL);
    close(w->fd);
    free(w->buf);
    free(w);
}
