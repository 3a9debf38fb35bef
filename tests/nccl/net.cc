/* SPDX-License-Identifier: Apache-2.0 */
/* net.cc: stands in for NCCL's net plugin on a fixture node, with the properties NCCL's own plugins
 * give: as net_ib's ncclIbGetPhysProperties (src/transport/net_ib/init.cc) for each HCA of
 * /sys/class/infiniband with an active port 1 (name, speed from the port's rate, pciPath the HCA's
 * PCI function with the port's function digit set to 0, guid the node GUID, port 1, GPUDirect RDMA:
 * host and CUDA pointers, as with nvidia-peermem loaded); else as net_socket's
 * ncclNetSocketGetProperties (src/transport/net_socket.cc) for each interface of /sys/class/net its
 * default NCCL_SOCKET_IFNAME keeps (not lo, docker*, virbr*; "ib*" first when there are some): speed
 * from the interface's speed file, guid the device index, port 0, host pointers only. Devices in name
 * order. No virtual NICs (makeVDevice is NULL: NCCL then takes the physical devices as they are). Also
 * the plugin side of NCCL's net API that topo.cc calls (ncclNetGetDevCount, ...: src/plugin/net.cc). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <string>
#include <vector>

#include "standins.h"

namespace
{
struct Dev {
    std::string name;
    char *pciPath;
    uint64_t guid;
    int speed, port, ptrSupport;
};
std::vector<Dev> devs;
bool ib = false;

std::string readLine(const std::string &path)
{
    char buf[256] = "";
    FILE *f = fopen(path.c_str(), "r"); /* an absolute path: not redirected */
    if (f) {
        if (!fgets(buf, sizeof(buf), f))
            buf[0] = '\0';
        fclose(f);
    }
    buf[strcspn(buf, "\n")] = '\0';
    return buf;
}

std::vector<std::string> entries(const char *sysDir)
{
    std::vector<std::string> out;
    char dir[8192];
    dltUnderRoot(dir, sizeof(dir), sysDir);
    DIR *d = opendir(dir);
    if (!d)
        return out;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (e->d_name[0] != '.')
            out.push_back(e->d_name);
    closedir(d);
    std::sort(out.begin(), out.end());
    return out;
}

ncclResult_t devices(int *ndev)
{
    *ndev = (int)devs.size();
    return ncclSuccess;
}

ncclResult_t getProperties(int dev, ncclNetProperties_t *props)
{
    if (dev < 0 || dev >= (int)devs.size())
        return ncclInvalidUsage;
    const Dev &d = devs[dev];
    memset(props, 0, sizeof(*props));
    props->name = (char *)d.name.c_str();
    props->pciPath = d.pciPath;
    props->guid = d.guid;
    props->ptrSupport = d.ptrSupport;
    props->regIsGlobal = ib;
    props->speed = d.speed;
    props->port = d.port;
    props->latency = 0;
    props->maxComms = ib ? 131072 : 65536;
    props->maxRecvs = ib ? 8 : 1; /* NCCL_NET_IB_MAX_RECVS */
    props->netDeviceType = NCCL_NET_DEVICE_HOST;
    props->netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION;
    props->maxP2pBytes = NCCL_MAX_NET_SIZE_BYTES;
    props->maxCollBytes = MAX_COLLNET_SIZE;
    props->maxMultiRequestSize = 1;
    props->railId = NCCL_NET_ID_UNDEF;
    props->planeId = NCCL_NET_ID_UNDEF;
    props->vProps.ndevs = 1;
    props->vProps.devs[0] = dev;
    return ncclSuccess;
}

bool excluded(const std::string &ifname)
{
    return ifname == "lo" || ifname.rfind("docker", 0) == 0 || ifname.rfind("virbr", 0) == 0;
}
} // namespace

ncclNet_t dltNet;

ncclResult_t dltNetInit(void)
{
    char base[8192];
    devs.clear();
    for (const std::string &hca : entries("/sys/class/infiniband")) {
        std::string sys = std::string("/sys/class/infiniband/") + hca;
        dltUnderRoot(base, sizeof(base), sys.c_str());
        if (readLine(std::string(base) + "/ports/1/state").find("ACTIVE") == std::string::npos)
            continue;
        Dev d;
        d.name = hca;
        d.pciPath = realpath((sys + "/device").c_str(), NULL); /* redirected: "/sys/devices/..." */
        if (d.pciPath)
            d.pciPath[strlen(d.pciPath) - 1] = '0'; /* multi-port NICs are one PCI device */
        std::string g = readLine(std::string(base) + "/node_guid");
        g.erase(std::remove(g.begin(), g.end(), ':'), g.end());
        d.guid = strtoull(g.c_str(), NULL, 16);
        d.speed = atoi(readLine(std::string(base) + "/ports/1/rate").c_str()) * 1000; /* "100 Gb/sec (4X EDR)" */
        d.port = 1;
        d.ptrSupport = NCCL_PTR_HOST | NCCL_PTR_CUDA;
        devs.push_back(d);
    }
    ib = !devs.empty();
    if (!ib) {
        std::vector<std::string> ifs = entries("/sys/class/net"), ibIfs;
        for (const std::string &i : ifs)
            if (i.rfind("ib", 0) == 0)
                ibIfs.push_back(i);
        if (!ibIfs.empty())
            ifs = ibIfs;
        for (const std::string &i : ifs) {
            if (excluded(i))
                continue;
            std::string sys = std::string("/sys/class/net/") + i;
            dltUnderRoot(base, sizeof(base), sys.c_str());
            Dev d;
            d.name = i;
            d.pciPath = realpath((sys + "/device").c_str(), NULL);
            d.guid = devs.size();
            d.speed = atoi(readLine(std::string(base) + "/speed").c_str());
            if (d.speed <= 0)
                d.speed = 10000;
            d.port = 0;
            d.ptrSupport = NCCL_PTR_HOST;
            devs.push_back(d);
        }
    }
    memset(&dltNet, 0, sizeof(dltNet));
    dltNet.name = ib ? "IB" : "Socket";
    dltNet.devices = devices;
    dltNet.getProperties = getProperties;
    dltNet.makeVDevice = NULL;
    return ncclSuccess;
}

const char *dltNetDevName(int dev)
{
    return dev >= 0 && dev < (int)devs.size() ? devs[dev].name.c_str() : "?";
}

int dltNetGdr(void)
{
    for (const Dev &d : devs)
        if (d.ptrSupport & NCCL_PTR_CUDA)
            return 1;
    return 0;
}

ncclResult_t ncclNetGetDevCount(int netPluginIndex, int *nPhysDev, int *nVirtDev)
{
    (void)netPluginIndex;
    *nPhysDev = (int)devs.size();
    *nVirtDev = 0;
    return ncclSuccess;
}

ncclResult_t ncclNetSetVirtDevCount(int netPluginIndex, int nVirtDev)
{
    (void)netPluginIndex;
    (void)nVirtDev;
    return ncclSuccess;
}

/* No CollNet, GIN or RMA plugin: ncclTopoGetSystem asks only when the communicator has one. */
ncclResult_t ncclCollNetGetDevCount(int netPluginIndex, int *nPhysDev, int *nVirtDev)
{
    (void)netPluginIndex;
    *nPhysDev = *nVirtDev = 0;
    return ncclSuccess;
}

ncclResult_t ncclCollNetSetVirtDevCount(int netPluginIndex, int nVirtDev)
{
    (void)netPluginIndex;
    (void)nVirtDev;
    return ncclSuccess;
}

ncclResult_t ncclGinGetDevCount(int ginPluginIndex, int *nPhysDev, int *nVirtDev)
{
    (void)ginPluginIndex;
    *nPhysDev = *nVirtDev = 0;
    return ncclSuccess;
}

ncclResult_t ncclRmaGetDevCount(int rmaPluginIndex, int *nPhysDev, int *nVirtDev)
{
    (void)rmaPluginIndex;
    *nPhysDev = *nVirtDev = 0;
    return ncclSuccess;
}
