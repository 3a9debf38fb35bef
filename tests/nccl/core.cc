/* SPDX-License-Identifier: Apache-2.0 */
/* core.cc: stands in for the parts of NCCL's core around its topology code that a CPU run needs:
 * - the bootstrap's intra-node all-gather (src/bootstrap.cc, bootstrapIntraNodeAllGather): the harness
 *   runs ncclTopoGetSystem once as each rank of the node (ranks are processes in NCCL); each call leaves
 *   its rank's XML here and receives those kept so far (its own in a slot not filled yet);
 * - the P2P and SHM transports' canConnect (src/transport/p2p.cc p2pCanConnect, shm.cc
 *   shmCanConnect), which ncclTopoComputePaths asks: their topology checks as NCCL makes them
 *   (ncclTopoCheckP2p, ncclTopoCheckNet, same host, same /dev/shm), CUDA's own P2P check taken to
 *   succeed (the fixture's NVML reports P2P OK);
 * - the env plugin (src/plugin/env.cc): the process environment only, no /etc/nccl.conf or
 *   ~/.nccl.conf, so the machine running the test does not change the result. */
#include <stdlib.h>
#include <string.h>

#include <map>
#include <vector>

#include "bootstrap.h"
#include "comm.h"
#include "env.h"
#include "graph.h"
#include "param.h"
#include "standins.h"
#include "transport.h"

namespace
{
std::map<int, std::vector<char>> gathered; /* local rank -> its XML, as topo.cc packed it */
} // namespace

void dltGatherReset(void)
{
    gathered.clear();
}

ncclResult_t bootstrapIntraNodeAllGather(void *commState, int *ranks, int rank, int nranks, void *allData, int size)
{
    (void)commState;
    (void)ranks;
    char *slots = (char *)allData;
    gathered[rank].assign(slots + (size_t)rank * size, slots + (size_t)(rank + 1) * size);
    for (int r = 0; r < nranks; r++) {
        if (r == rank)
            continue;
        const std::vector<char> &src = gathered.count(r) ? gathered[r] : gathered[rank];
        memcpy(slots + (size_t)r * size, src.data(), size);
    }
    return ncclSuccess;
}

NCCL_PARAM(ShmDisable, "SHM_DISABLE", 0);

static ncclResult_t p2pCanConnect(int *ret, struct ncclComm *comm, struct ncclTopoGraph *graph,
                                  struct ncclPeerInfo *info1, struct ncclPeerInfo *info2)
{
    (void)graph;
    int intermediateRank;
    NCCLCHECK(ncclTopoCheckP2p(comm, comm->topo, info1->rank, info2->rank, ret, NULL, &intermediateRank, NULL));
    if (*ret == 0 || intermediateRank != -1)
        return ncclSuccess;
    int useNet = 0;
    NCCLCHECK(ncclTopoCheckNet(comm->topo, info1->rank, info2->rank, &useNet));
    if (useNet)
        *ret = 0;
    return ncclSuccess;
}

static ncclResult_t shmCanConnect(int *ret, struct ncclComm *comm, struct ncclTopoGraph *graph,
                                  struct ncclPeerInfo *info1, struct ncclPeerInfo *info2)
{
    (void)graph;
    *ret = 0;
    if (ncclParamShmDisable() == 1)
        return ncclSuccess;
    int useNet = 0;
    NCCLCHECK(ncclTopoCheckNet(comm->topo, info1->rank, info2->rank, &useNet));
    if (useNet)
        return ncclSuccess;
    *ret = info1->hostHash == info2->hostHash && info1->shmDev == info2->shmDev;
    return ncclSuccess;
}

static struct ncclTransport p2pStandIn = {"P2P", p2pCanConnect, {}, {}};
static struct ncclTransport shmStandIn = {"SHM", shmCanConnect, {}, {}};
struct ncclTransport *ncclTransports[NTRANSPORTS] = {&p2pStandIn, &shmStandIn, NULL, NULL};

ncclResult_t ncclInitEnv(void)
{
    return ncclSuccess;
}

const char *ncclEnvPluginGetEnv(const char *name)
{
    return getenv(name);
}

bool ncclEnvPluginInitialized(void)
{
    return true;
}
