/* SPDX-License-Identifier: Apache-2.0 */
/* agree_pmix: the agreements over PMIx, before there is a communicator (the launch) or beside it
 * (the health check's records). Apart from agree.c so that what links the trainer's core needs no
 * libdltpmix. */
#include "config.h"

#include "trainer/comm/agree.h"

#include <errno.h>

static int _pmix_gather(void *arg, const void *mine, size_t bytes, void *all, dlt_err *err)
{
    dltpmix_ctx *px = arg;
    return dltpmix_allgather(px, mine, bytes, all) != 0 ? dlt_fail(err, -EIO, "%s", dltpmix_error(px)) : 0;
}

static int _pmix_share(void *arg, void *buf, size_t bytes, int root, dlt_err *err)
{
    dltpmix_ctx *px = arg;
    return dltpmix_bcast(px, root, buf, bytes) != 0 ? dlt_fail(err, -EIO, "%s", dltpmix_error(px)) : 0;
}

dlt_agreement dlt_agreement_of_pmix(dltpmix_ctx *px)
{
    const dltpmix_info *info = dltpmix_get_info(px);
    dlt_agreement a = {info->rank, info->size, _pmix_gather, _pmix_share, NULL, px};
    return a;
}
