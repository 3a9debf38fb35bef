/* SPDX-License-Identifier: Apache-2.0 */
/* nvml.cc: stands in for NCCL's NVML wrapper (src/misc/nvmlwrap.cc, the ncclNvml* calls and tables of
 * src/include/nvmlwrap.h) on a fixture node: the GPUs, compute capabilities and NVLinks of the fixture's
 * nvml.txt (the file tests/fake_nvml serves to the plugin), P2P status OK between every pair (as the
 * fake NVML answers), and what the driver reads from the GPU's PCI function: its ids from the
 * fixture's sysfs, the current link generation and width as the link trains (the slower of the GPU's
 * and its upstream port's max_link_speed / max_link_width). No fabric (MNNVL), C2C or CC. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvmlwrap.h"
#include "standins.h"

int ncclNvmlDeviceCount = 0;
ncclNvmlDeviceInfo ncclNvmlDevices[ncclNvmlMaxDevices];
ncclNvmlDevicePairInfo ncclNvmlDevicePairs[ncclNvmlMaxDevices][ncclNvmlMaxDevices];

namespace
{
constexpr int kMaxLinks = 36;
struct Gpu {
    char busId[32]; /* 0000:05:00.0 */
    int sm;
    int nlinks;
    char remote[kMaxLinks][32];
};
Gpu gpus[ncclNvmlMaxDevices];
bool loaded = false;
ncclResult_t loadResult = ncclSuccess;

int index(nvmlDevice_t dev)
{
    for (int i = 0; i < ncclNvmlDeviceCount; i++)
        if (ncclNvmlDevices[i].handle == dev)
            return i;
    return -1;
}

/* Bus ids compare as their last 12 characters, in any case ("00000000:05:00.0" is "0000:05:00.0"). */
bool sameBusId(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la < 12 || lb < 12)
        return false;
    for (int i = 0; i < 12; i++)
        if (tolower((unsigned char)a[la - 12 + i]) != tolower((unsigned char)b[lb - 12 + i]))
            return false;
    return true;
}

/* NVML's busId, upper case (in the 16 bytes NCCL's nvmlPciInfo_t has: 4-digit domain). */
void nvmlBusId(char *out, const char *busId)
{
    snprintf(out, NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE, "%s", busId);
    for (char *c = out; *c; c++)
        *c = (char)toupper((unsigned char)*c);
}

/* A file of the GPU's PCI function (or, with up, of its upstream port) in the fixture's sysfs. */
bool readSys(const Gpu &g, bool up, const char *file, char *buf, size_t n)
{
    char link[512], dev[4096], path[4096 + 64];
    snprintf(link, sizeof(link), "/sys/bus/pci/devices/%s", g.busId);
    char full[4096 + 600];
    dltUnderRoot(full, sizeof(full), link);
    if (!realpath(full, dev))
        return false;
    snprintf(path, sizeof(path), "%s%s/%s", dev, up ? "/.." : "", file);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    bool ok = fgets(buf, (int)n, f) != NULL;
    fclose(f);
    return ok;
}

unsigned readHex(const Gpu &g, const char *file)
{
    char buf[64];
    return readSys(g, false, file, buf, sizeof(buf)) ? (unsigned)strtoul(buf, NULL, 16) : 0;
}
} // namespace

ncclResult_t ncclNvmlEnsureInitialized()
{
    if (loaded)
        return loadResult;
    loaded = true;
    FILE *f = fopen(dltNvmlFile, "r");
    if (!f) {
        fprintf(stderr, "nvml stand-in: cannot read %s\n", dltNvmlFile);
        return loadResult = ncclSystemError;
    }
    char line[256];
    while (fgets(line, sizeof(line), f)) {
        char a[32];
        unsigned minor;
        int sm, gi;
        if (sscanf(line, "gpu %31s %u %d", a, &minor, &sm) == 3 && ncclNvmlDeviceCount < ncclNvmlMaxDevices) {
            int i = ncclNvmlDeviceCount++;
            memset(&gpus[i], 0, sizeof(gpus[i]));
            snprintf(gpus[i].busId, sizeof(gpus[i].busId), "%s", a);
            gpus[i].sm = sm;
            ncclNvmlDevices[i].handle = (nvmlDevice_t)&gpus[i];
            ncclNvmlDevices[i].computeCapabilityMajor = sm / 10;
            ncclNvmlDevices[i].computeCapabilityMinor = sm % 10;
        } else if (sscanf(line, "link %d %31s", &gi, a) == 2 && gi >= 0 && gi < ncclNvmlDeviceCount &&
                   gpus[gi].nlinks < kMaxLinks) {
            snprintf(gpus[gi].remote[gpus[gi].nlinks++], 32, "%s", a);
        }
    }
    fclose(f);
    for (int a = 0; a < ncclNvmlDeviceCount; a++)
        for (int b = 0; b < ncclNvmlDeviceCount; b++)
            ncclNvmlDevicePairs[a][b].p2pStatusRead = ncclNvmlDevicePairs[a][b].p2pStatusWrite = NVML_P2P_STATUS_OK;
    return loadResult = ncclSuccess;
}

ncclResult_t ncclNvmlDeviceGetHandleByPciBusId(const char *pciBusId, nvmlDevice_t *device)
{
    NCCLCHECK(ncclNvmlEnsureInitialized());
    for (int i = 0; i < ncclNvmlDeviceCount; i++)
        if (sameBusId(gpus[i].busId, pciBusId)) {
            *device = ncclNvmlDevices[i].handle;
            return ncclSuccess;
        }
    return ncclSystemError; /* NVML_ERROR_NOT_FOUND */
}

ncclResult_t ncclNvmlDeviceGetIndex(nvmlDevice_t device, unsigned *idx)
{
    NCCLCHECK(ncclNvmlEnsureInitialized());
    int i = index(device);
    if (i < 0)
        return ncclInvalidArgument;
    *idx = (unsigned)i;
    return ncclSuccess;
}

ncclResult_t ncclNvmlDeviceGetHandleByIndex(unsigned int i, nvmlDevice_t *device)
{
    NCCLCHECK(ncclNvmlEnsureInitialized());
    *device = ncclNvmlDevices[i].handle;
    return ncclSuccess;
}

ncclResult_t ncclNvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link, nvmlEnableState_t *isActive)
{
    NCCLCHECK(ncclNvmlEnsureInitialized());
    int i = index(device);
    if (i < 0 || (int)link >= gpus[i].nlinks)
        return ncclSystemError; /* NVML_ERROR_NOT_SUPPORTED: no such link */
    *isActive = NVML_FEATURE_ENABLED;
    return ncclSuccess;
}

ncclResult_t ncclNvmlDeviceGetNvLinkRemotePciInfo(nvmlDevice_t device, unsigned int link, nvmlPciInfo_t *pci)
{
    NCCLCHECK(ncclNvmlEnsureInitialized());
    int i = index(device);
    if (i < 0 || (int)link >= gpus[i].nlinks)
        return ncclSystemError;
    memset(pci, 0, sizeof(*pci));
    nvmlBusId(pci->busId, gpus[i].remote[link]);
    return ncclSuccess;
}

ncclResult_t ncclNvmlDeviceGetNvLinkCapability(nvmlDevice_t device, unsigned int link,
                                               nvmlNvLinkCapability_t capability, unsigned int *capResult)
{
    (void)capability;
    NCCLCHECK(ncclNvmlEnsureInitialized());
    int i = index(device);
    if (i < 0 || (int)link >= gpus[i].nlinks)
        return ncclSystemError;
    *capResult = 1;
    return ncclSuccess;
}

ncclResult_t ncclNvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor)
{
    NCCLCHECK(ncclNvmlEnsureInitialized());
    int i = index(device);
    if (i < 0)
        return ncclInvalidArgument;
    *major = gpus[i].sm / 10;
    *minor = gpus[i].sm % 10;
    return ncclSuccess;
}

ncclResult_t ncclNvmlDeviceGetP2PStatus(nvmlDevice_t device1, nvmlDevice_t device2, nvmlGpuP2PCapsIndex_t p2pIndex,
                                        nvmlGpuP2PStatus_t *p2pStatus)
{
    (void)p2pIndex;
    NCCLCHECK(ncclNvmlEnsureInitialized());
    if (index(device1) < 0 || index(device2) < 0)
        return ncclInvalidArgument;
    *p2pStatus = NVML_P2P_STATUS_OK;
    return ncclSuccess;
}

/* Only the NVLink state (read this way from sm_90 on); C2C and the rest: not supported. */
ncclResult_t ncclNvmlDeviceGetFieldValues(nvmlDevice_t device, int valuesCount, nvmlFieldValue_t *values)
{
    NCCLCHECK(ncclNvmlEnsureInitialized());
    int i = index(device);
    if (i < 0)
        return ncclInvalidArgument;
    for (int v = 0; v < valuesCount; v++) {
        values[v].nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
        if (values[v].fieldId == NVML_FI_DEV_NVLINK_GET_STATE) {
            values[v].nvmlReturn = NVML_SUCCESS;
            values[v].value.uiVal =
                (int)values[v].scopeId < gpus[i].nlinks ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
        }
    }
    return ncclSuccess;
}

ncclResult_t ncclNvmlDeviceGetGpuFabricInfoV(nvmlDevice_t device, nvmlGpuFabricInfoV_t *gpuFabricInfo)
{
    (void)device;
    gpuFabricInfo->state = NVML_GPU_FABRIC_STATE_NOT_SUPPORTED;
    return ncclSystemError;
}

ncclResult_t ncclNvmlDeviceGetPlatformInfo(nvmlDevice_t device, nvmlPlatformInfo_t *platformInfo)
{
    (void)device;
    (void)platformInfo;
    return ncclSystemError;
}

ncclResult_t ncclNvmlGetCCStatus(struct ncclNvmlCCStatus *status)
{
    memset(status, 0, sizeof(*status));
    return ncclSuccess;
}

ncclResult_t ncclNvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    NCCLCHECK(ncclNvmlEnsureInitialized());
    int i = index(device);
    if (i < 0)
        return ncclInvalidArgument;
    memset(pci, 0, sizeof(*pci));
    nvmlBusId(pci->busId, gpus[i].busId);
    pci->pciDeviceId = readHex(gpus[i], "device") << 16 | readHex(gpus[i], "vendor");
    pci->pciSubSystemId = readHex(gpus[i], "subsystem_device") << 16 | readHex(gpus[i], "subsystem_vendor");
    return ncclSuccess;
}

ncclResult_t ncclNvmlDeviceGetPciInfoExt(nvmlDevice_t device, nvmlPciInfoExt_t *pciInfoExt)
{
    (void)device;
    (void)pciInfoExt;
    return ncclSystemError;
}

ncclResult_t ncclNvmlDeviceGetPcieLinkMaxSpeed(nvmlDevice_t device, int *maxSpeed)
{
    (void)device;
    (void)maxSpeed;
    return ncclSystemError;
}

ncclResult_t ncclNvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t device, unsigned int *currLinkGen)
{
    NCCLCHECK(ncclNvmlEnsureInitialized());
    int i = index(device);
    char dev[64], port[64];
    if (i < 0 || !readSys(gpus[i], false, "max_link_speed", dev, sizeof(dev)))
        return ncclSystemError;
    double gts = atof(dev);
    if (readSys(gpus[i], true, "max_link_speed", port, sizeof(port)) && atof(port) > 0 && atof(port) < gts)
        gts = atof(port);
    *currLinkGen = gts >= 64 ? 6 : gts >= 32 ? 5 : gts >= 16 ? 4 : gts >= 8 ? 3 : gts >= 5 ? 2 : 1;
    return ncclSuccess;
}

ncclResult_t ncclNvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t device, unsigned int *currLinkWidth)
{
    NCCLCHECK(ncclNvmlEnsureInitialized());
    int i = index(device);
    char dev[64], port[64];
    if (i < 0 || !readSys(gpus[i], false, "max_link_width", dev, sizeof(dev)))
        return ncclSystemError;
    int w = atoi(dev);
    if (readSys(gpus[i], true, "max_link_width", port, sizeof(port)) && atoi(port) > 0 && atoi(port) < w)
        w = atoi(port);
    *currLinkWidth = (unsigned)w;
    return ncclSuccess;
}
