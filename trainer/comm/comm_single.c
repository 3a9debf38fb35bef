/* SPDX-License-Identifier: Apache-2.0 */
/* comm_single: the one-rank communicator; every collective is the identity. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/comm/comm.h"

static int _allreduce(dlt_comm *c, void *buf, size_t count, dlt_dtype type)
{
    (void)c;
    (void)buf;
    (void)count;
    (void)type;
    return 0;
}

static int _bcast(dlt_comm *c, void *buf, size_t bytes, int root)
{
    (void)buf;
    (void)bytes;
    if (root != 0) {
        return dlt_fail(c->err, -EINVAL, "broadcast root %d on a single rank", root);
    }
    return 0;
}

static int _barrier(dlt_comm *c)
{
    (void)c;
    return 0;
}

static void _destroy(dlt_comm *c)
{
    free(c);
}

static void _abort(dlt_comm *c, int code)
{
    (void)c;
    (void)code;
}

static int _split(dlt_comm *c, int color, int key, dlt_comm **out)
{
    (void)key;
    *out = NULL;
    return color < 0 ? 0 : dlt_comm_single_create(out, c->err);
}

static int _allgather(dlt_comm *c, const void *mine, size_t bytes, void *all)
{
    (void)c;
    memmove(all, mine, bytes);
    return 0;
}

static const dlt_comm_ops g_single_ops = {"single", _allreduce, _bcast,     _barrier, _destroy, _abort, NULL,
                                          _split,   NULL,       _allgather, NULL,     NULL,     NULL};

int dlt_comm_single_create(dlt_comm **out, dlt_err *err)
{
    dlt_comm *c = calloc(1, sizeof(*c));
    if (!c) {
        return dlt_fail(err, -ENOMEM, "out of memory");
    }
    c->ops = &g_single_ops;
    c->err = err;
    c->rank = 0;
    c->size = 1;
    *out = c;
    return 0;
}
