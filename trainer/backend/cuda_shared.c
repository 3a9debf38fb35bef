/* SPDX-License-Identifier: Apache-2.0 */
/* cuda_shared: what every file of the CUDA backend uses (cuda_cudnn.c, cuda_conv.c, cuda_step.c):
 * the bounded wait for a stream, the shared cuDNN workspace, NHWC descriptors, and where a weight
 * lies in the flat parameter buffer. It calls none of them: within the backend the files form a tree
 * (cuda_cudnn.c creates the backend and fills the ops table from the other two). */
#include "config.h"

#include <errno.h>
#include <stdio.h>

#include "common/cuda_check.h"
#include "trainer/backend/cuda_internal.h"

int dlt_cu_wait(dlt_backend *be, cudaStream_t st)
{
    int rc = dlt_cuda_stream_wait(st, be->peers, be->err);
    if (rc == 0)
        _cu(be)->put_pending = 0; /* every queued copy ran */
    return rc;
}

/* Grows the shared workspace (only while nothing is queued: at planning time). */
int dlt_cu_workspace(dlt_backend *be, size_t need)
{
    cuda_backend *c = _cu(be);
    if (need < 4096)
        need = 4096; /* never NULL: cuDNN's fast NHWC batch-norm kernels want a workspace pointer */
    return _grow(be, &c->ws, NULL, &c->ws_size, need, c->s);
}

int dlt_cu_nhwc(dlt_backend *be, cudnnTensorDescriptor_t *d, int n, int ch, int h, int w)
{
    DLT_TRY(be->err, DLT_CUDNN_CHECK(be->err, cudnnCreateTensorDescriptor(d)));
    DLT_TRY(be->err,
            DLT_CUDNN_CHECK(be->err, cudnnSetTensor4dDescriptor(*d, CUDNN_TENSOR_NHWC, _cu(be)->cdt, n, ch, h, w)));
    return 0;
}

/* Where w (n floats) lies in the planned parameter buffer: 0 and *off, or -EINVAL. */
int dlt_cu_param_offset(dlt_backend *be, const float *w, size_t n, const char *what, size_t *off)
{
    cuda_backend *c = _cu(be);
    if (!c->params || w < c->params || w >= c->params + c->nparams || n > (size_t)(c->params + c->nparams - w)) {
        return dlt_fail(be->err, -EINVAL,
                        "%s (%zu floats at %p) are not inside the parameter buffer sgd_plan named (%p, "
                        "%zu floats): in %s, the backend's copy of them is part of the optimizer's pass",
                        what, n, (const void *)w, (const void *)c->params, c->nparams,
                        dlt_precision_name(be->precision));
    }
    *off = (size_t)(w - c->params);
    return 0;
}
