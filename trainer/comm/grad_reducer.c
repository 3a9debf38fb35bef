/* SPDX-License-Identifier: Apache-2.0 */
/* grad_reducer: the choice of reduction path, and the host paths. */
#include "config.h"

#include "trainer/comm/grad_reducer.h"

#include <errno.h>
#include <stdlib.h>

#include "common/status.h"
#include "common/tunables.h"
#include "trainer/backend/cuda_module.h"
#include "trainer/comm/grad_buckets.h"

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

/* The host buckets (CPU backend, a communicator with a non-blocking sum): each bucket's sum starts
 * as soon as backward has finished it, and every later ready call drives the communicator's
 * progress (MPI moves a non-blocking collective on only inside its calls), so the reductions cross
 * while backward computes the layers below; finish waits for what is left. */
typedef struct {
    dlt_grad_buckets bk;
    void **req;  /* per bucket (b[0] the top): the request in flight, or NULL */
    int settled; /* buckets b[0..settled) are summed */
} host_buckets;

/* Starts the buckets take() just completed, then tests the oldest in flight until one is not done. */
static int _hb_start_and_progress(dlt_grad_reducer *r, host_buckets *h, int taken)
{
    dlt_comm *c = r->comm;
    int rc, done = 1;
    for (int i = h->bk.launched - taken; i < h->bk.launched; i++) {
        const dlt_grad_bucket *b = &h->bk.b[i];
        if ((rc = c->ops->iallreduce_start(c, r->grads + b->lo, b->hi - b->lo, DLT_DTYPE_F32, &h->req[i])) != 0)
            return rc;
    }
    while (done && h->settled < h->bk.launched) {
        if ((rc = c->ops->iallreduce_test(c, &h->req[h->settled], &done)) != 0)
            return rc;
        h->settled += done;
    }
    return 0;
}

static int _hb_ready(dlt_grad_reducer *r, size_t lo)
{
    host_buckets *h = r->impl;
    return _hb_start_and_progress(r, h, dlt_grad_buckets_take(&h->bk, lo));
}

static int _hb_done(dlt_grad_reducer *r)
{
    return _hb_ready(r, 0); /* every gradient is final */
}

static int _hb_finish(dlt_grad_reducer *r)
{
    host_buckets *h = r->impl;
    int rc = 0;
    if (h->bk.launched < h->bk.n) /* a backward that said nothing: every bucket now */
        rc = _hb_done(r);
    for (; rc == 0 && h->settled < h->bk.launched; h->settled++)
        rc = r->comm->ops->iallreduce_wait(r->comm, &h->req[h->settled]);
    if (rc == 0) {
        dlt_grad_buckets_reset(&h->bk);
        h->settled = 0;
    }
    return rc;
}

/* A request still in flight after a failure is not waited for (a lost peer would keep it so): its
 * holder is freed, the communicator's own state goes with the run. */
static void _hb_destroy(dlt_grad_reducer *r)
{
    host_buckets *h = r->impl;
    if (!h)
        return;
    for (int i = 0; h->req && i < h->bk.n; i++)
        free(h->req[i]);
    free(h->req);
    dlt_grad_buckets_free(&h->bk);
    free(h);
}

void dlt_grad_bucket_sizes(const dlt_grad_reducer_config *cfg, size_t *cap_elems, size_t *bottom_elems)
{
    double mib = cfg && cfg->bucket_mib > 0 ? cfg->bucket_mib : DLT_DEFAULT_BUCKET_MIB;
    size_t cap = (size_t)(mib * 1048576.0 / sizeof(float));
    double bottom_mib = cfg && cfg->bottom_mib > 0 ? cfg->bottom_mib : DLT_BOTTOM_BUCKET_MIB;
    size_t bottom = (size_t)(bottom_mib * 1048576.0 / sizeof(float));
    *cap_elems = cap ? cap : 1;
    *bottom_elems = bottom == 0 ? 1 : bottom < *cap_elems ? bottom : *cap_elems;
}

static int _hb_create(dlt_grad_reducer *r, const dlt_grad_reducer_config *cfg, dlt_err *err)
{
    host_buckets *h = calloc(1, sizeof(*h));
    size_t cap, bottom;
    int rc;
    if (!h)
        return dlt_fail(err, -ENOMEM, "out of memory");
    r->impl = h;
    dlt_grad_bucket_sizes(cfg, &cap, &bottom);
    if ((rc = dlt_grad_buckets_plan(&h->bk, r->n, cap, bottom, DLT_BUCKET_ALIGN_ELEMS)) != 0)
        return dlt_fail(err, rc, "gradient buckets: cannot plan %zu values", r->n);
    if (!(h->req = calloc((size_t)h->bk.n, sizeof(*h->req))))
        return dlt_fail(err, -ENOMEM, "out of memory");
    return 0;
}

/* Nothing to reduce records trivially; the host path copies through host memory (a download waits). */
static const dlt_grad_reducer_ops g_none = {"none", 1, _none_ready, _none_done, _none_finish, _none_agree, NULL};
static const dlt_grad_reducer_ops g_host = {"host",       0,           _none_ready,  _none_done,
                                            _host_finish, _host_agree, _host_destroy};
static const dlt_grad_reducer_ops g_host_buckets = {"host-buckets", 0,           _hb_ready,  _hb_done,
                                                    _hb_finish,     _host_agree, _hb_destroy};

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
    if (!be->host_memory && comm->ops->nccl) {
        const dlt_cuda_module *m = dlt_cuda_module_get(err); /* open: the communicator is NCCL's */
        if (!m) {
            rc = -ENOTSUP;
            goto fail;
        }
        if ((rc = m->grad_reducer_create(r, cfg, err)) != 0) /* a partial path: undone below */
            goto fail;
    } else if (comm->size > 1 && be->host_memory && comm->ops->iallreduce_start) {
        r->ops = &g_host_buckets;
        if ((rc = _hb_create(r, cfg, err)) != 0) /* a partial path: undone below */
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
