/* SPDX-License-Identifier: Apache-2.0 */
/* grad_reducer: the choice of reduction path, and the host paths. */
#include "config.h"

#include "trainer/comm/grad_reducer.h"

#include <errno.h>
#include <stdlib.h>

#include "common/status.h"
#include "trainer/backend/cuda_module.h"

void dlt_grad_lowp_plan(int world, float *premul, int *divisor)
{
    *premul = world > 1 ? 1.0f / (float)world : 1.0f;
    *divisor = 1;
}

static int _none_ready(dlt_grad_reducer *r, size_t lo)
{
    (void)r;
    (void)lo;
    return 0;
}

static int _none_done(dlt_grad_reducer *r)
{
    (void)r;
    return 0;
}

static int _none_finish(dlt_grad_reducer *r)
{
    (void)r;
    return 0;
}

static int _none_agree(dlt_grad_reducer *r, double *results, int count)
{
    (void)r;
    (void)results;
    (void)count;
    return 0;
}

static int _host_agree(dlt_grad_reducer *r, double *results, int count)
{
    dlt_backend *be = r->be;
    double host[DLT_RES_COUNT > 16 ? DLT_RES_COUNT : 16];
    size_t bytes = (size_t)count * sizeof(double);
    int rc;
    if (be->host_memory)
        return r->comm->ops->allreduce_sum(r->comm, results, (size_t)count, DLT_DTYPE_F64);
    if ((size_t)count > sizeof(host) / sizeof(host[0]))
        return dlt_fail(r->comm->err, -EINVAL, "%d results: more than the agreement carries", count);
    if ((rc = be->ops->download(be, host, results, bytes)) != 0 ||
        (rc = r->comm->ops->allreduce_sum(r->comm, host, (size_t)count, DLT_DTYPE_F64)) != 0)
        return rc;
    return be->ops->upload(be, results, host, bytes);
}

static void _host_destroy(dlt_grad_reducer *r)
{
    free(r->host);
}

/* One collective over the whole buffer once backward is over; a GPU's gradients cross through
 * host memory. */
static int _host_finish(dlt_grad_reducer *r)
{
    dlt_backend *be = r->be;
    size_t bytes = r->n * sizeof(float);
    int rc;
    if (be->host_memory)
        return r->comm->ops->allreduce_sum(r->comm, r->grads, r->n, DLT_DTYPE_F32);
    if ((rc = be->ops->download(be, r->host, r->grads, bytes)) != 0 ||
        (rc = r->comm->ops->allreduce_sum(r->comm, r->host, r->n, DLT_DTYPE_F32)) != 0)
        return rc;
    return be->ops->upload(be, r->grads, r->host, bytes);
}

/* Nothing to reduce records trivially; the host path copies through host memory (a download waits). */
static const dlt_grad_reducer_ops g_none = {"none", 1, _none_ready, _none_done, _none_finish, _none_agree, NULL};
static const dlt_grad_reducer_ops g_host = {"host",       0,           _none_ready,  _none_done,
                                            _host_finish, _host_agree, _host_destroy};

int dlt_grad_reducer_create(dlt_grad_reducer **out, const dlt_grad_reducer_config *cfg, dlt_comm *comm, dlt_backend *be,
                            float *grads, size_t n, dlt_err *err)
{
    dlt_grad_reducer *r = calloc(1, sizeof(*r));
    int rc = 0;
    *out = NULL;
    if (!r)
        return dlt_fail(err, -ENOMEM, "out of memory");
    r->comm = comm;
    r->be = be;
    r->grads = grads;
    r->n = n;
    r->divisor = comm->size;
    r->ops = &g_none;
    (void)cfg;
    if (!be->host_memory && comm->ops->nccl) {
        const dlt_cuda_module *m = dlt_cuda_module_get(err); /* open: the communicator is NCCL's */
        if (!m) {
            rc = -ENOTSUP;
            goto fail;
        }
        if ((rc = m->grad_reducer_create(r, cfg, err)) != 0) /* a partial path: undone below */
            goto fail;
    } else if (comm->size > 1) {
        r->ops = &g_host;
        if (!be->host_memory && !(r->host = malloc(n * sizeof(float)))) {
            rc = dlt_fail(err, -ENOMEM, "out of memory for the gradient staging buffer");
            goto fail;
        }
    }
    *out = r;
    return 0;
fail:
    dlt_grad_reducer_destroy(r);
    return rc;
}

void dlt_grad_reducer_destroy(dlt_grad_reducer *r)
{
    if (!r)
        return;
    if (r->ops->destroy)
        r->ops->destroy(r);
    free(r);
}

int dlt_grad_reducer_capturable(const dlt_grad_reducer *r)
{
    return r->ops->capturable;
}

static int _listener_ready(void *arg, size_t lo)
{
    dlt_grad_reducer *r = arg;
    return r->ops->ready(r, lo);
}

static int _listener_done(void *arg)
{
    dlt_grad_reducer *r = arg;
    return r->ops->done(r);
}

dlt_grad_listener dlt_grad_reducer_listener(dlt_grad_reducer *r)
{
    dlt_grad_listener l = {_listener_ready, _listener_done, r};
    return l;
}

int dlt_grad_reducer_finish(dlt_grad_reducer *r)
{
    return r->ops->finish(r);
}

int dlt_grad_reducer_agree(dlt_grad_reducer *r, double *results, int count)
{
    return r->ops->agree(r, results, count);
}
