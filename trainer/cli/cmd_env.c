/* SPDX-License-Identifier: Apache-2.0 */
/* cmd_env: `dltrain env`: what each rank of the step is and sees, gathered on rank 0, plus a
 * check that the host communicator sums correctly across ranks. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/affinity.h"
#include "common/env_contract.h"
#include "common/exit_status.h"
#include "common/node_name.h"
#include "common/topo_file.h"
#include "pmix/dltpmix.h"
#include "trainer/backend/backend.h"
#include "trainer/backend/device_choice.h"
#include "trainer/cli/commands.h"
#include "trainer/cli/opt_table.h"
#include "trainer/comm/agree.h"
#include "trainer/comm/comm.h"

/* One rank's report, fixed size so it can be all-gathered. */
typedef struct {
    int rank, local_rank, node_rank;
    int ncpus;
    char host[64];
    char cuda_visible[64];
    char dlt_local_gpu[16];
    char cpus[128];
    char nccl_topo[128];
    int device;    /* the CUDA device index dltrain train would use (-1: no GPU visible) */
    char gpu[64];  /* which GPU that is: its CUDA_VISIBLE_DEVICES entry, or its PCI bus id */
    int pci_rc;    /* dlt_device_pci_check of DLT_GPU_PCI against that bus id (1: not compared) */
    char pci[320]; /* what it said */
    /* The torch.distributed contract the task was given (spank_dltrain(8)): "-" where unset. */
    char c_rank[12], c_world[12], c_local[12], c_local_world[12], c_group[12], c_port[8], c_port_from[12];
    char c_addr[128];
    char topo_why[768]; /* NCCL_TOPO_FILE set but not readable here (a container without the bind), "" fine */
} _rank_report;

/* Per-rank lines a check says before it only counts (rank 0 says them: at 1,024 ranks a line per
 * rank buried the one that mattered). */
#define SAY_RANKS_MAX 8

/* The contract against what PMIx says of the same rank, and MASTER_ADDR:PORT the same everywhere:
 * the number of disagreements, the first SAY_RANKS_MAX said on stderr. */
static int _contract_check(const _rank_report *all, int n, int say)
{
    int bad = 0;
    for (int r = 0; r < n; r++) {
        const _rank_report *a = &all[r];
        char want[4][12];
        const char *got[4] = {a->c_rank, a->c_local, a->c_group, a->c_world},
                   *name[4] = {DLT_ENV_RANK, DLT_ENV_LOCAL_RANK_TORCH, DLT_ENV_GROUP_RANK, DLT_ENV_WORLD_SIZE};
        snprintf(want[0], sizeof(want[0]), "%d", a->rank);
        snprintf(want[1], sizeof(want[1]), "%d", a->local_rank);
        snprintf(want[2], sizeof(want[2]), "%d", a->node_rank);
        snprintf(want[3], sizeof(want[3]), "%d", n);
        for (int k = 0; k < 4; k++)
            if (strcmp(got[k], "-") && strcmp(got[k], want[k])) {
                if (say && bad < SAY_RANKS_MAX)
                    fprintf(stderr, "dltrain: rank %d (host %s): %s=%s, but PMIx says %s\n", a->rank, a->host, name[k],
                            got[k], want[k]);
                bad++;
            }
        if (strcmp(a->c_addr, all[0].c_addr) || strcmp(a->c_port, all[0].c_port)) {
            if (say && bad < SAY_RANKS_MAX)
                fprintf(stderr, "dltrain: rank %d (host %s): MASTER_ADDR:PORT %s:%s, rank 0 has %s:%s\n", a->rank,
                        a->host, a->c_addr, a->c_port, all[0].c_addr, all[0].c_port);
            bad++;
        }
    }
    if (say && bad > SAY_RANKS_MAX)
        fprintf(stderr, "dltrain: ... and %d more disagreement(s)\n", bad - SAY_RANKS_MAX);
    return bad;
}

static int _by_host(const void *a, const void *b)
{
    const _rank_report *x = *(const _rank_report *const *)a, *y = *(const _rank_report *const *)b;
    int c = strcmp(x->host, y->host);
    return c ? c : (x > y) - (x < y);
}

/* Each rank's NCCL_TOPO_FILE readable where it runs: the number of ranks that cannot read it. The
 * ranks of a node share its mount namespace: each node's first such rank is said in full, then the
 * others, SAY_RANKS_MAX lines in all, then counted (each node's first found by sorting the
 * ranks by host: n log n, where a scan of the earlier ranks for each was n^2). */
static int _topo_check(const _rank_report *all, int n, int say)
{
    const _rank_report **by;
    unsigned char *first;
    int bad = 0, nodes = 0, said = 0;
    for (int r = 0; r < n; r++)
        bad += all[r].topo_why[0] != '\0';
    if (!say || !bad)
        return bad;
    by = malloc((size_t)bad * sizeof(*by));
    first = calloc((size_t)n, 1);
    if (!by || !first) {
        free(by);
        free(first);
        fprintf(stderr, "dltrain: %d rank(s) cannot read their NCCL_TOPO_FILE (out of memory naming them)\n", bad);
        return bad;
    }
    for (int r = 0, k = 0; r < n; r++)
        if (all[r].topo_why[0])
            by[k++] = &all[r];
    qsort(by, (size_t)bad, sizeof(*by), _by_host);
    for (int k = 0; k < bad; k++)
        if (k == 0 || strcmp(by[k]->host, by[k - 1]->host)) {
            first[by[k] - all] = 1;
            nodes++;
        }
    /* the nodes first (each one's file and bind differ), then the other ranks */
    for (int pass = 1; pass >= 0; pass--)
        for (int r = 0; r < n && said < SAY_RANKS_MAX; r++) {
            if (!all[r].topo_why[0] || first[r] != pass)
                continue;
            said++;
            if (pass)
                fprintf(stderr, "dltrain: rank %d (host %s): %s\n", all[r].rank, all[r].host, all[r].topo_why);
            else
                fprintf(stderr, "dltrain: rank %d (host %s): cannot read its NCCL_TOPO_FILE either\n", all[r].rank,
                        all[r].host);
        }
    if (bad > SAY_RANKS_MAX)
        fprintf(stderr, "dltrain: ... and %d more rank(s); %d node(s) in all\n", bad - SAY_RANKS_MAX, nodes);
    free(by);
    free(first);
    return bad;
}

/* The device dltrain train would pick (device_choice.h) and which GPU that is, from the task's
 * CUDA_VISIBLE_DEVICES (no driver is needed to report it) or the CUDA runtime. */
static void _device_report(_rank_report *r)
{
    const char *cvd = getenv(DLT_ENV_CUDA_VISIBLE_DEVICES);
    int visible = cvd ? dlt_device_visible_count(cvd) : dlt_backend_gpu_count();
    dlt_err err = DLT_ERR_INIT;
    const char *bound = getenv(DLT_ENV_GPU_PCI);
    r->device = -1;
    r->pci_rc = 1;
    snprintf(r->gpu, sizeof(r->gpu), "-");
    if (visible <= 0 ||
        dlt_device_choose(-1, getenv(DLT_ENV_LOCAL_GPU) != NULL, r->local_rank, visible, &r->device, &err) != 0)
        return;
    if (dlt_backend_gpu_id(r->device, r->gpu, sizeof(r->gpu)) == 0) {
        /* The plugin's GPU against the one dltrain train would open (it refuses a mismatch). */
        r->pci_rc = dlt_device_pci_check(bound, r->gpu, r->device, dlt_err_fresh(&err));
        snprintf(r->pci, sizeof(r->pci), "%.319s", err.msg);
        if (r->pci_rc == 0)
            snprintf(r->pci, sizeof(r->pci), "DLT_GPU_PCI %s is device %d (%s): the same GPU", bound, r->device,
                     r->gpu);
    } else if (cvd) {
        dlt_device_visible_entry(cvd, r->device, r->gpu, sizeof(r->gpu));
    }
    if (r->pci_rc == 1)
        snprintf(r->pci, sizeof(r->pci), "DLT_GPU_PCI %s: not compared (%s)", bound && *bound ? bound : "unset",
                 bound && *bound ? "the CUDA runtime gave no bus id" : "no plugin binding");
}

/* Rank 0 says its own comparison of the plugin's GPU with the one it opens, every rank's that
 * differs (SAY_RANKS_MAX of them, then counted), and with several ranks one line of counts;
 * nonzero when one differs (dltrain train refuses that). */
static int _pci_report(const _rank_report *all, int n, int me)
{
    int bad = 0, same = 0, uncompared = 0, ranks = 0, said = 0, first_unc = -1;
    for (int r = 0; r < n; r++) {
        if (all[r].device < 0)
            continue;
        ranks++;
        same += all[r].pci_rc == 0;
        if (all[r].pci_rc == 1 && first_unc < 0)
            first_unc = r;
        uncompared += all[r].pci_rc == 1;
        if (me == 0 && (r == 0 || (all[r].pci_rc < 0 && said < SAY_RANKS_MAX))) {
            dlt_rank_say_to(all[r].pci_rc < 0 ? stderr : stdout, all[r].rank, "%s", all[r].pci);
            said += all[r].pci_rc < 0;
        }
        bad += all[r].pci_rc < 0;
    }
    if (me == 0 && bad > said)
        fprintf(stderr, "dltrain: ... and %d more rank(s) on another GPU than the plugin's\n", bad - said);
    if (me == 0 && ranks > 1) {
        char why[400] = "";
        if (first_unc >= 0) /* the first such rank's words: "DLT_GPU_PCI BUSID: not compared (WHY)" */
            snprintf(why, sizeof(why), " (rank %d: %s)", all[first_unc].rank, all[first_unc].pci);
        fprintf(bad ? stderr : stdout,
                "dltrain: DLT_GPU_PCI over %d rank(s): %d on the plugin's GPU, %d on another, "
                "%d not compared%s\n",
                ranks, same, bad, uncompared, why);
    }
    return bad != 0;
}

/* TEST ONLY: DLT_TEST_ENV_ALLOC_FAIL_RANK=R makes rank R's allocation of the reports fail, so the
 * tests see every rank stop alike, promptly. Off when unset. */
static int _test_alloc_fails(int rank)
{
#ifdef DLT_TEST_HOOKS
    const char *v = getenv("DLT_TEST_ENV_ALLOC_FAIL_RANK");
    return v && *v && atoi(v) == rank;
#else
    (void)rank;
    return 0;
#endif
}

static void _env_copy(char *dst, size_t len, const char *name)
{
    const char *v = getenv(name);
    snprintf(dst, len, "%s", v ? v : "-");
}

int dlt_cmd_env(int argc, char **argv)
{
    dlt_cli_opts o;
    unsigned char seen[DLT_OPT_MAX] = {0};
    const char *comm_kind;
    dltpmix_options popts = {.timeout_s = 0, .allow_singleton = 1};
    dltpmix_ctx *px = NULL;
    dlt_comm *comm = NULL;
    const dltpmix_info *info;
    _rank_report mine, *all = NULL;
    dlt_device_claim *claims = NULL;
    dlt_agreement a;
    char node[64];
    dlt_err err = DLT_ERR_INIT;
    int opt, rc = 1, next, contract_bad, topo_bad;
    long long sum;

    memset(&o, 0, sizeof(o));
    o.comm = "auto";
    if ((opt = dlt_opt_parse_command(DLT_CMD_ENV, "env", argc, argv, 1, &o, seen, &next, 1)) >= 0)
        return opt;
    comm_kind = o.comm;
    popts.timeout_s = o.timeout;
    if (dltpmix_init(&px, &popts, err.msg, sizeof(err.msg)) != 0) {
        fprintf(stderr, "dltrain: %s\n", err.msg);
        return 1;
    }
    info = dltpmix_get_info(px);
    a = dlt_agreement_of_pmix(px);

    memset(&mine, 0, sizeof(mine));
    mine.rank = info->rank;
    mine.local_rank = info->local_rank;
    mine.node_rank = info->node_rank;
    snprintf(mine.host, sizeof(mine.host), "%.63s", info->hostname);
    _env_copy(mine.cuda_visible, sizeof(mine.cuda_visible), DLT_ENV_CUDA_VISIBLE_DEVICES);
    _env_copy(mine.dlt_local_gpu, sizeof(mine.dlt_local_gpu), DLT_ENV_LOCAL_GPU);
    _env_copy(mine.nccl_topo, sizeof(mine.nccl_topo), DLT_ENV_NCCL_TOPO_FILE);
    _env_copy(mine.c_rank, sizeof(mine.c_rank), DLT_ENV_RANK);
    _env_copy(mine.c_world, sizeof(mine.c_world), DLT_ENV_WORLD_SIZE);
    _env_copy(mine.c_local, sizeof(mine.c_local), DLT_ENV_LOCAL_RANK_TORCH);
    _env_copy(mine.c_local_world, sizeof(mine.c_local_world), DLT_ENV_LOCAL_WORLD_SIZE);
    _env_copy(mine.c_group, sizeof(mine.c_group), DLT_ENV_GROUP_RANK);
    _env_copy(mine.c_addr, sizeof(mine.c_addr), DLT_ENV_MASTER_ADDR);
    _env_copy(mine.c_port, sizeof(mine.c_port), DLT_ENV_MASTER_PORT);
    _env_copy(mine.c_port_from, sizeof(mine.c_port_from), DLT_ENV_MASTER_PORT_FROM);
    (void)dlt_topo_file_check(getenv(DLT_ENV_NCCL_TOPO_FILE), mine.topo_why, sizeof(mine.topo_why));
    mine.ncpus = dlt_affinity_list(mine.cpus, sizeof(mine.cpus));
    _device_report(&mine);

    /* Every rank's report and GPU claim: a rank without the memory says so in an agreement (its
     * record on the stack), so that every rank stops alike instead of waiting in the gather. */
    if (!_test_alloc_fails(info->rank)) {
        all = calloc((size_t)info->size, sizeof(*all));
        claims = calloc((size_t)info->size, sizeof(*claims));
    }
    if (!all || !claims)
        dlt_fail(&err, -ENOMEM, "out of memory for the reports of %d ranks (%zu bytes)", info->size,
                 (size_t)info->size * (sizeof(*all) + sizeof(*claims)));
    dlt_node_name(node, sizeof(node));
    if (dlt_agree_first_failure(&a, err.code, node, &err) != 0 ||
        dlt_agree_gather_into(&a, &mine, sizeof(mine), all, &err) != 0) {
        if (!err.agreed)
            dlt_rank_say(info->rank, "%s", err.msg);
        else if (info->rank == 0)
            fprintf(stderr, "dltrain: %s\n", err.msg);
        goto out;
    }
    if (dlt_comm_open(&comm, &(dlt_comm_request){comm_kind, 0, -1}, px, &err) != 0) {
        dlt_rank_say(info->rank, "%s", err.msg);
        goto out;
    }
    sum = info->rank;
    if (comm->ops->allreduce_sum(comm, &sum, 1, DLT_DTYPE_I64) != 0) {
        dlt_rank_say(info->rank, "%s", err.msg);
        goto out;
    }
    if (sum != (long long)info->size * (info->size - 1) / 2) {
        dlt_rank_say(info->rank, "%s all-reduce gave %lld, expected %lld", comm->ops->name, sum,
                     (long long)info->size * (info->size - 1) / 2);
        goto out;
    }
    if (info->rank == 0) {
        printf("dltrain: %d rank(s) on %d node(s), namespace %s, host communicator %s\n", info->size, info->node_count,
               info->nspace, comm->ops->name);
        printf("%-5s %-16s %-4s %-5s %-12s %-5s %-16s %s %s\n", "rank", "host", "node", "local", "CUDA_VISIBLE", "gpu",
               "cpus", DLT_ENV_NCCL_TOPO_FILE, "device(=GPU)");
        for (int r = 0; r < info->size; r++) {
            char dev[80] = "-";
            if (all[r].device >= 0)
                snprintf(dev, sizeof(dev), "%d=%s", all[r].device, all[r].gpu);
            printf("%-5d %-16s %-4d %-5d %-12s %-5s %-16s %s %s\n", all[r].rank, all[r].host, all[r].node_rank,
                   all[r].local_rank, all[r].cuda_visible, all[r].dlt_local_gpu, all[r].cpus, all[r].nccl_topo, dev);
        }
        printf("dltrain: all-reduce check passed (%s, sum of ranks %lld)\n", comm->ops->name, sum);
        printf("torch.distributed contract (env://):\n%-5s %-6s %-10s %-10s %-16s %-10s %s\n", "rank", DLT_ENV_RANK,
               DLT_ENV_WORLD_SIZE, DLT_ENV_LOCAL_RANK_TORCH, DLT_ENV_LOCAL_WORLD_SIZE, DLT_ENV_GROUP_RANK,
               "MASTER_ADDR:MASTER_PORT");
        for (int r = 0; r < info->size; r++) {
            char from[32] = ""; /* how the plugin chose the port, where it did */
            if (strcmp(all[r].c_port_from, "-"))
                snprintf(from, sizeof(from), " (%s port)", all[r].c_port_from);
            printf("%-5d %-6s %-10s %-10s %-16s %-10s %s:%s%s\n", all[r].rank, all[r].c_rank, all[r].c_world,
                   all[r].c_local, all[r].c_local_world, all[r].c_group, all[r].c_addr, all[r].c_port, from);
        }
    }
    /* Every rank holds every rank's report: each decides alike, rank 0 says why. */
    contract_bad = _contract_check(all, info->size, info->rank == 0);
    topo_bad = _topo_check(all, info->size, info->rank == 0);
    if (info->rank == 0 && contract_bad == 0)
        printf("dltrain: the contract agrees with PMIx's ranks and names one MASTER_ADDR:PORT%s\n",
               strcmp(all[0].c_rank, "-") ? "" : " (not set: a step without --dl-train)");
    else if (info->rank == 0)
        fprintf(stderr,
                "dltrain: the torch.distributed contract is wrong in %d place(s) (above): a program using "
                "env:// would join the wrong ranks; exit status %d\n",
                contract_bad, DLT_EXIT_FAILED);
    if (info->rank == 0 && topo_bad)
        fprintf(stderr,
                "dltrain: %d rank(s) cannot read their NCCL_TOPO_FILE (above): NCCL would run on a topology of its "
                "own guess; exit status %d\n",
                topo_bad, DLT_EXIT_FAILED);

    /* The GPU each rank would train on: no two ranks of a node on one (dltrain train refuses it). */
    {
        int n = 0;
        for (int r = 0; r < info->size; r++)
            if (all[r].device >= 0) {
                claims[n].rank = all[r].rank;
                snprintf(claims[n].host, sizeof(claims[n].host), "%s", all[r].host);
                snprintf(claims[n].gpu, sizeof(claims[n].gpu), "%s", all[r].gpu);
                n++;
            }
        rc = dlt_device_check_distinct(claims, n, &err);
        if (rc != 0) {
            if (info->rank == 0)
                fprintf(stderr, "dltrain: %s\n", err.msg);
            rc = 1;
            goto out;
        }
        if (info->rank == 0 && n > 0)
            printf("dltrain: GPU check passed (%d rank(s), one GPU each)\n", n);
    }
    if (_pci_report(all, info->size, info->rank) != 0) {
        rc = 1;
        goto out;
    }
    rc = contract_bad || topo_bad ? DLT_EXIT_FAILED : 0;
out:
    dlt_comm_destroy(comm);
    free(claims);
    free(all);
    if (dltpmix_finalize(px) != 0 && rc == 0)
        rc = 1;
    return rc;
}
