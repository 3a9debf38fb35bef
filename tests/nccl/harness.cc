/* SPDX-License-Identifier: Apache-2.0 */
/* harness.cc: NCCL's own topology code (src/graph of the NCCL source, built by tests/nccl/build.sh) run
 * on a fixture node of tests/fixtures/mktopo.py, as src/init.cc runs it: ncclTopoGetSystem ->
 * ncclTopoComputePaths -> ncclTopoTrimSystem -> ncclTopoComputePaths -> ncclTopoSearchInit ->
 * ncclTopoCompute (ring, then tree with the ring's channel count). With --xml FILE the node is
 * NCCL_TOPO_FILE=FILE (the plugin's file); without, NCCL detects it (sysfs, NVML, net plugin: the
 * stand-ins of this directory). Writes "KEY<TAB>VALUE" lines to --out: per GPU the path type and
 * bandwidth to every GPU and NIC, the ring's and tree's channels, bandwidths and path types, for a
 * job of this node alone ("1node": every GPU one rank) and of two such nodes ("2nodes": the other
 * node's ranks exist only as peers on another host, so the search goes through the NICs).
 *
 * Ranks: NCCL's ranks are processes, and ncclTopoGetSystem detects only the caller's GPU; the others
 * come from the intra-node all-gather of each rank's XML (ncclTopoFuseXml). So this one process is
 * each rank of the node in turn (the bootstrap stand-in keeps each rank's XML) and rank 0 last, whose
 * fused system the rest of the sequence uses; rank 0 alone with nRanks = GPUs would see one GPU.
 *
 * usage: harness --sysroot DIR --nvml FILE --out FILE [--xml FILE] */
#include <ctype.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "graph.h"
#include "graph/topo.h"
#include "nvmlwrap.h"
#include "standins.h"
#include "transport.h"

char dltNvmlFile[4096];

static const char *resultName(ncclResult_t r)
{
    static const char *names[] = {"ncclSuccess",       "ncclUnhandledCudaError", "ncclSystemError",
                                  "ncclInternalError", "ncclInvalidArgument",    "ncclInvalidUsage",
                                  "ncclRemoteError",   "ncclInProgress"};
    return (unsigned)r < sizeof(names) / sizeof(names[0]) ? names[r] : "ncclResult ?";
}

#define CHECK(call)                                                                                                    \
    do {                                                                                                               \
        ncclResult_t r_ = (call);                                                                                      \
        if (r_ != ncclSuccess) {                                                                                       \
            fprintf(stderr, "harness: %s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, resultName(r_));             \
            exit(1);                                                                                                   \
        }                                                                                                              \
    } while (0)

static const char *pathType(int t)
{
    return t >= 0 && t <= PATH_DIS ? topoPathTypeStr[t] : "?";
}

/* The GPU's bus id: the rank's, as its peer info says. */
static const char *gpuBusId(struct ncclComm *comm, struct ncclTopoNode *gpu, char *buf)
{
    if (int64ToBusId(comm->peerInfo[gpu->gpu.rank].busId, buf) != ncclSuccess)
        snprintf(buf, 32, "rank%d", gpu->gpu.rank);
    return buf;
}

static void printGraph(FILE *out, const char *job, const char *name, struct ncclTopoGraph *g)
{
    fprintf(out, "%s %s nChannels\t%d\n", job, name, g->nChannels);
    fprintf(out, "%s %s bwIntra\t%.1f\n", job, name, g->bwIntra);
    fprintf(out, "%s %s bwInter\t%.1f\n", job, name, g->bwInter);
    fprintf(out, "%s %s typeIntra\t%s\n", job, name, pathType(g->typeIntra));
    fprintf(out, "%s %s typeInter\t%s\n", job, name, pathType(g->typeInter));
}

static void run(FILE *out, int nodes)
{
    CHECK(ncclNvmlEnsureInitialized());
    int ngpus = ncclNvmlDeviceCount, nranks = ngpus * nodes;
    const char *job = nodes == 1 ? "1node" : "2nodes";
    struct ncclComm *comm = (struct ncclComm *)calloc(1, sizeof(*comm));
    comm->sharedRes = (struct ncclSharedResources *)calloc(1, sizeof(*comm->sharedRes));
    comm->peerInfo = (struct ncclPeerInfo *)calloc(nranks + 1, sizeof(*comm->peerInfo));
    comm->nRanks = nranks;
    comm->ncclNet = &dltNet;
    comm->ncclNetVer = 12;
    for (int r = 0; r < nranks; r++) {
        struct ncclPeerInfo *p = comm->peerInfo + r;
        char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
        nvmlPciInfo_t pci;
        nvmlDevice_t dev;
        int major, minor;
        CHECK(ncclNvmlDeviceGetHandleByIndex(r % ngpus, &dev));
        CHECK(ncclNvmlDeviceGetPciInfo(dev, &pci));
        CHECK(ncclNvmlDeviceGetCudaComputeCapability(dev, &major, &minor));
        snprintf(busId, sizeof(busId), "%s", pci.busId);
        for (char *c = busId; *c; c++)
            *c = (char)tolower((unsigned char)*c);
        p->rank = r;
        p->cudaDev = p->nvmlDev = r % ngpus;
        p->hostHash = getHostHash() + r / ngpus; /* another node: another host */
        p->pidHash = getPidHash() + r;           /* a process per rank */
        p->shmDev = 1;
        CHECK(busIdToInt64(busId, &p->busId));
        p->gdrSupport = dltNetGdr();
        p->cudaCompCap = major * 10 + minor;
        p->mloPart = NCCL_TOPO_UNDEF;
    }
    /* Each rank of this node detects its own GPU; rank 0, last, fuses them all. The second job's node
     * is the first's: its ranks' XMLs are those kept, and only rank 0 runs again. */
    if (nodes == 1)
        dltGatherReset();
    struct ncclTopoSystem *system = NULL;
    for (int r = nodes == 1 ? ngpus - 1 : 0; r >= 0; r--) {
        comm->rank = r;
        comm->cudaDev = comm->nvmlDev = r;
        comm->busId = comm->peerInfo[r].busId;
        if (system)
            ncclTopoFree(system);
        system = NULL;
        CHECK(ncclTopoGetSystem(comm, &system));
    }
    comm->topo = system;
    fprintf(out, "%s GPUs detected\t%d\n", job, system->nodes[GPU].count);
    CHECK(ncclTopoComputePaths(comm->topo, comm));
    CHECK(ncclTopoTrimSystem(comm->topo, comm));
    CHECK(ncclTopoComputePaths(comm->topo, comm));
    CHECK(ncclTopoSearchInit(comm->topo));

    struct ncclTopoNodeSet *gpus = system->nodes + GPU, *nets = system->nodes + NET;
    /* GPUs NCCL would reach through the network rather than P2P or SHM are trimmed (ncclTopoCheckNet). */
    fprintf(out, "%s GPUs kept\t%d\n", job, gpus->count);
    fprintf(out, "%s NICs\t%d\n", job, nets->count);
    for (int g = 0; g < gpus->count; g++) {
        char a[32], b[32];
        struct ncclTopoNode *gpu = gpus->nodes + g;
        for (int h = 0; h < gpus->count; h++)
            if (h != g)
                fprintf(out, "%s path GPU %s -> GPU %s\t%s %.1f\n", job, gpuBusId(comm, gpu, a),
                        gpuBusId(comm, gpus->nodes + h, b), pathType(gpu->paths[GPU][h].type), gpu->paths[GPU][h].bw);
        for (int n = 0; n < nets->count; n++)
            fprintf(out, "%s path GPU %s -> NIC %s\t%s %.1f\n", job, gpuBusId(comm, gpu, a),
                    dltNetDevName(nets->nodes[n].net.dev), pathType(gpu->paths[NET][n].type), gpu->paths[NET][n].bw);
    }

    /* As src/init.cc sets them up. */
    struct ncclTopoGraph *ring = (struct ncclTopoGraph *)calloc(1, sizeof(*ring));
    struct ncclTopoGraph *tree = (struct ncclTopoGraph *)calloc(1, sizeof(*tree));
    ring->id = 0;
    ring->pattern = NCCL_TOPO_PATTERN_RING;
    ring->minChannels = 1;
    ring->maxChannels = MAXCHANNELS / 2;
    CHECK(ncclTopoCompute(comm->topo, ring));
    tree->id = 1;
    tree->pattern = NCCL_TOPO_PATTERN_BALANCED_TREE;
    tree->minChannels = ring->nChannels;
    tree->maxChannels = ring->nChannels;
    CHECK(ncclTopoCompute(comm->topo, tree));
    printGraph(out, job, "ring", ring);
    printGraph(out, job, "tree", tree);
    free(ring);
    free(tree);
    ncclTopoFree(system);
    free(comm->peerInfo);
    free(comm->sharedRes);
    free(comm);
}

int main(int argc, char **argv)
{
    const char *sysroot = NULL, *nvml = NULL, *xml = NULL, *outPath = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--sysroot"))
            sysroot = argv[i + 1];
        else if (!strcmp(argv[i], "--nvml"))
            nvml = argv[i + 1];
        else if (!strcmp(argv[i], "--xml"))
            xml = argv[i + 1];
        else if (!strcmp(argv[i], "--out"))
            outPath = argv[i + 1];
    }
    if (!sysroot || !nvml || !outPath) {
        fprintf(stderr, "usage: harness --sysroot DIR --nvml FILE --out FILE [--xml FILE]\n");
        return 2;
    }
    /* NCCL zeroes a fresh XML buffer per rank for every ncclTopoGetSystem (tens of MB): kept in the
     * heap, freed buffers are reused instead of being mapped and faulted in again (half the run time). */
    mallopt(M_MMAP_MAX, 0);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    /* Resolved before the /sys redirection is on (sysfs.cc). */
    char *root = realpath(sysroot, NULL);
    if (!root || strlen(root) >= sizeof(dltSysroot)) {
        fprintf(stderr, "harness: no such fixture root: %s\n", sysroot);
        return 2;
    }
    snprintf(dltSysroot, sizeof(dltSysroot), "%s", root);
    free(root);
    snprintf(dltNvmlFile, sizeof(dltNvmlFile), "%s", nvml);
    if (xml)
        setenv("NCCL_TOPO_FILE", xml, 1);
    else
        unsetenv("NCCL_TOPO_FILE");
    CHECK(dltNetInit());
    FILE *out = fopen(outPath, "w");
    if (!out) {
        fprintf(stderr, "harness: cannot write %s\n", outPath);
        return 2;
    }
    run(out, 1);
    run(out, 2);
    return fclose(out) == 0 ? 0 : 1;
}
