/* SPDX-License-Identifier: Apache-2.0 */
/* launch: PMIx bootstrap, the rank's GPU, then the communicator. */
#include "config.h"

#include "trainer/cli/launch.h"

#include "trainer/comm/agree.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/env_contract.h"
#include "common/exit_status.h"
#include "common/status.h"
#include "common/topo_file.h"
#include "trainer/backend/device_choice.h"
#include "trainer/train/trainer.h"

int dlt_cli_check_gpus(dltpmix_ctx *px, const char *gpu, dlt_err *err)
{
    const dltpmix_info *info = dltpmix_get_info(px);
    dlt_agreement a = dlt_agreement_of_pmix(px);
    dlt_device_claim mine, *all;
    int rc;
    if (info->size < 2)
        return 0;
    memset(&mine, 0, sizeof(mine));
    mine.rank = info->rank;
    snprintf(mine.host, sizeof(mine.host), "%.63s", info->hostname);
    snprintf(mine.gpu, sizeof(mine.gpu), "%.63s", gpu);
    if ((rc = dlt_agree_gather(&a, &mine, sizeof(mine), (void **)&all, err)) == 0) {
        rc = dlt_device_check_distinct(all, info->size, err);
        free(all);
    }
    if (rc == -EBUSY && dlt_device_sharing_allowed(getenv("NCCL_MULTI_RANK_GPU_ENABLE"))) {
        if (info->rank == 0)
            fprintf(stderr, "dltrain: ranks share a GPU, as NCCL_MULTI_RANK_GPU_ENABLE=1 asks (NCCL >= 2.30): %s\n",
                    err->msg);
        dlt_err_clear(err); /* allowed: not a failure */
        rc = 0;
    }
    return rc;
}

/* The device of this rank among the GPUs it sees, checked against the other ranks'. */
static int _choose_gpu(dltpmix_ctx *px, dlt_comm_request *req, dlt_backend_config *backend, dlt_err *err)
{
    const dltpmix_info *info = dltpmix_get_info(px);
    int visible = dlt_backend_gpu_count(), dev, rc;
    char id[64];
    if ((rc = dlt_device_choose(backend->device, getenv(DLT_ENV_LOCAL_GPU) != NULL, info->local_rank, visible, &dev,
                                err)) != 0)
        return rc;
    backend->device = dev;
    req->cuda_device = dev;
    if (visible <= 0)
        return 0; /* the backend says there is no GPU */
    /* The GPU the plugin bound (its PCI bus id) must be the one opened. */
    if (dlt_backend_gpu_id(dev, id, sizeof(id)) == 0 &&
        (rc = dlt_device_pci_check(getenv(DLT_ENV_GPU_PCI), id, dev, err)) < 0)
        return rc;
    return dlt_cli_check_gpus(px, id, err);
}

/* What each rank found before the launch, one record per rank through PMIx (no communicator
 * yet, so nothing to abort): when every rank found the same thing it is said once, by rank 0;
 * else each rank that found something says it with its rank, and rank 0 names them all. Every
 * rank then stops alike. Returns 0 (nothing found anywhere), 2 or 1 (the exchange failed). */
static int _agree_on_problems(dltpmix_ctx *px, const char *problem)
{
    dlt_agreement a = dlt_agreement_of_pmix(px);
    dlt_agree_verdict v;
    dlt_err err = DLT_ERR_INIT;
    if (a.size < 2) {
        if (problem)
            fprintf(stderr, "dltrain: %s\n", problem);
        return problem ? DLT_EXIT_USAGE : 0;
    }
    if (dlt_agree_verdict_of(&a, problem != NULL, problem, &v, &err) != 0) {
        dlt_rank_say(a.rank, "%s", err.msg);
        if (problem)
            dlt_rank_say(a.rank, "%s", problem);
        return 1;
    }
    if (v.f.failed == 0)
        return 0;
    if (v.all_alike && a.rank == 0)
        fprintf(stderr, "dltrain: %s (every rank)\n", problem);
    if (v.say_own)
        dlt_rank_say(a.rank, "%s", problem);
    if (v.name_ranks)
        fprintf(stderr, "dltrain: %d of %d ranks cannot start (rank%s %s, each said why): no rank starts\n", v.f.failed,
                a.size, v.f.failed == 1 ? "" : "s", v.f.ranks);
    return DLT_EXIT_USAGE;
}

int dlt_cli_launch(dlt_comm_request *req, dlt_backend_config *backend, double timeout_s, const char *problem,
                   dltpmix_ctx **px, dlt_comm **comm, dlt_err *err)
{
    int rc;
    dlt_err shape = DLT_ERR_INIT;
    dltpmix_options popts = {.timeout_s = timeout_s, .allow_singleton = 1};
    *px = NULL;
    *comm = NULL;
    if (dltpmix_init(px, &popts, shape.msg, sizeof(shape.msg)) != 0) {
        dlt_fail(err, -EIO, "%s", shape.msg);
        fprintf(stderr, "dltrain: %s\n", shape.msg);
        if (problem)
            fprintf(stderr, "dltrain: %s\n", problem);
        return 1;
    }
    /* The rank count is known now: a communicator that cannot serve it (--comm single on several
     * ranks) is found alike by every rank, so it is agreed on and said once like a local problem. */
    if (!problem && !dlt_comm_resolve(req, dltpmix_get_info(*px)->size, &shape))
        problem = shape.msg;
    if ((rc = _agree_on_problems(*px, problem)) != 0) {
        dltpmix_finalize(*px);
        *px = NULL;
        return rc;
    }
    if (req->gpu && dltpmix_get_info(*px)->local_rank == 0) {
        /* Said once per node: NCCL itself would only say it under NCCL_DEBUG=INFO. */
        char why[1024];
        if (dlt_topo_file_check(getenv(DLT_ENV_NCCL_TOPO_FILE), why, sizeof(why)) != 0)
            fprintf(stderr, "dltrain: rank %d: warning: %s\n", dltpmix_get_info(*px)->rank, why);
    }
    if ((req->gpu && _choose_gpu(*px, req, backend, err) != 0) || dlt_comm_open(comm, req, *px, err) != 0) {
        dlt_rank_say(dltpmix_get_info(*px)->rank, "%s", err->msg);
        dltpmix_finalize(*px);
        *px = NULL;
        return 1;
    }
    return 0;
}

int dlt_cli_exit_status(int run_status)
{
    switch (run_status) {
    case DLT_RUN_DONE: return DLT_EXIT_OK;
    case DLT_RUN_PREEMPTED: return DLT_EXIT_PREEMPTED;
    case DLT_RUN_STOPPED_UNSAVED: return DLT_EXIT_STOPPED_UNSAVED;
    case DLT_RUN_REFUSED_USAGE: return DLT_EXIT_USAGE;
    case DLT_RUN_REFUSED:            /* said why already */
    default: return DLT_EXIT_FAILED; /* a negative status: err said why */
    }
}

void dlt_cli_finish(dltpmix_ctx *px, dlt_comm *comm)
{
    dlt_comm_destroy(comm);
    dltpmix_finalize(px);
}
