/* SPDX-License-Identifier: Apache-2.0 */
/* pmix_probe: a PMIx bootstrap exercise for the Slurm integration tests: broadcast from rank 0
 * and from the last rank, all-gather of Slurm's own view, each checked against Slurm's env.
 * --nccl-init DEVICE instead: only the NCCL bootstrap, printing what dltpmix_nccl_comm_init says
 * (with --nccl-refuse-rank R, rank R calls dltpmix_nccl_comm_refuse instead). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pmix/dltpmix.h"

typedef struct {
    int pmix_rank, pmix_local_rank, pmix_node_rank;
    int slurm_procid, slurm_localid, slurm_nodeid;
    char pmix_host[64];
    char slurmd_nodename[64];
} _record;

static int _env_int(const char *n)
{
    const char *v = getenv(n);
    return v ? atoi(v) : -1;
}

static void _hex(const unsigned char *b, size_t n, char *out)
{
    for (size_t i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", b[i]);
}

static int _random(unsigned char *b, size_t n)
{
    int fd = open("/dev/urandom", O_RDONLY);
    ssize_t got = fd >= 0 ? read(fd, b, n) : -1;
    if (fd >= 0)
        close(fd);
    return got == (ssize_t)n ? 0 : -1;
}

int main(int argc, char **argv)
{
    dltpmix_options opts = {.timeout_s = 0, .allow_singleton = 1};
    dltpmix_ctx *ctx = NULL;
    const dltpmix_info *in;
    unsigned char blob0[128], blobn[128];
    char hex0[257], hexn[257], err[1024];
    _record mine, *all;
    int exit_rank = -1, stall_rank = -1, stall_s = 0, bad = 0, nccl_device = -1, refuse_rank = -1;

    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--timeout") && i + 1 < argc)
            opts.timeout_s = atof(argv[++i]);
        else if (!strcmp(argv[i], "--exit-before-fence") && i + 1 < argc)
            exit_rank = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--stall-before-fence") && i + 2 < argc) {
            stall_rank = atoi(argv[++i]);
            stall_s = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--nccl-init") && i + 1 < argc)
            nccl_device = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--nccl-refuse-rank") && i + 1 < argc)
            refuse_rank = atoi(argv[++i]);
    }
    if (dltpmix_init(&ctx, &opts, err, sizeof(err)) != 0) {
        fprintf(stderr, "probe: init failed: %s\n", err);
        return 3;
    }
    in = dltpmix_get_info(ctx);
    if (nccl_device >= 0) { /* the NCCL bootstrap alone: what it says where NCCL cannot be loaded */
        struct ncclComm *comm = NULL;
        int rc = in->rank == refuse_rank ? dltpmix_nccl_comm_refuse(ctx, "probe: this rank's device set-up failed")
                                         : dltpmix_nccl_comm_init(ctx, nccl_device, &comm);
        printf("probe rank=%d nccl-init rc=%d: %s\n", in->rank, rc, rc ? dltpmix_error(ctx) : "ok");
        dltpmix_finalize(ctx);
        return rc ? 5 : 0;
    }
    if (in->rank == exit_rank) {
        printf("probe rank=%d leaving before the fence\n", in->rank);
        fflush(stdout);
        _exit(0);
    }
    if (in->rank == stall_rank) {
        /* Alive but never joining: the others must time out and name this rank. */
        printf("probe rank=%d stalling %d s before the fence\n", in->rank, stall_s);
        fflush(stdout);
        sleep((unsigned)stall_s);
        _exit(0);
    }
    memset(blob0, 0, sizeof(blob0));
    memset(blobn, 0, sizeof(blobn));
    if ((in->rank == 0 && _random(blob0, sizeof(blob0))) ||
        (in->rank == in->size - 1 && _random(blobn, sizeof(blobn)))) {
        fprintf(stderr, "probe: /dev/urandom failed\n");
        return 3;
    }
    if (dltpmix_bcast(ctx, 0, blob0, sizeof(blob0)) || dltpmix_bcast(ctx, in->size - 1, blobn, sizeof(blobn))) {
        fprintf(stderr, "probe rank=%d: %s\n", in->rank, dltpmix_error(ctx));
        dltpmix_finalize(ctx);
        return 4;
    }
    memset(&mine, 0, sizeof(mine));
    mine.pmix_rank = in->rank;
    mine.pmix_local_rank = in->local_rank;
    mine.pmix_node_rank = in->node_rank;
    mine.slurm_procid = _env_int("SLURM_PROCID");
    mine.slurm_localid = _env_int("SLURM_LOCALID");
    mine.slurm_nodeid = _env_int("SLURM_NODEID");
    snprintf(mine.pmix_host, sizeof(mine.pmix_host), "%.63s", in->hostname);
    snprintf(mine.slurmd_nodename, sizeof(mine.slurmd_nodename), "%s",
             getenv("SLURMD_NODENAME") ? getenv("SLURMD_NODENAME") : "?");
    all = calloc((size_t)in->size, sizeof(*all));
    if (!all || dltpmix_allgather(ctx, &mine, sizeof(mine), all)) {
        fprintf(stderr, "probe rank=%d: %s\n", in->rank, all ? dltpmix_error(ctx) : "oom");
        return 4;
    }
    for (int r = 0; r < in->size; r++) {
        const _record *x = &all[r];
        if (x->pmix_rank != r || x->slurm_procid != r || x->pmix_local_rank != x->slurm_localid ||
            x->pmix_node_rank != x->slurm_nodeid || strcmp(x->pmix_host, x->slurmd_nodename) != 0) {
            printf("probe rank=%d MISMATCH at %d: pmix(rank %d local %d node %d host %s) slurm(procid %d localid %d "
                   "nodeid %d node %s)\n",
                   in->rank, r, x->pmix_rank, x->pmix_local_rank, x->pmix_node_rank, x->pmix_host, x->slurm_procid,
                   x->slurm_localid, x->slurm_nodeid, x->slurmd_nodename);
            bad = 1;
        }
    }
    if (dltpmix_barrier(ctx)) {
        fprintf(stderr, "probe rank=%d: %s\n", in->rank, dltpmix_error(ctx));
        return 4;
    }
    _hex(blob0, sizeof(blob0), hex0);
    _hex(blobn, sizeof(blobn), hexn);
    printf("probe rank=%d size=%d local=%d/%d node=%d/%d host=%s blob0=%s blobN=%s %s\n", in->rank, in->size,
           in->local_rank, in->local_size, in->node_rank, in->node_count, in->hostname, hex0, hexn,
           bad ? "BAD" : "GOOD");
    free(all);
    dltpmix_finalize(ctx);
    return bad ? 5 : 0;
}
