/* SPDX-License-Identifier: Apache-2.0 */
/* nvml_loader: NVML loaded with dlopen, behind a small typed table. */
#include "nvml_loader.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#define RESOLVE(field, sym, required)                                                                                  \
    do {                                                                                                               \
        *(void **)(&nvml->field) = dlsym(nvml->handle, sym);                                                           \
        if (!nvml->field && (required)) {                                                                              \
            dlt_fail(err, -EIO, "NVML library %s lacks %s (driver too old?)", path, sym);                              \
            goto fail;                                                                                                 \
        }                                                                                                              \
    } while (0)

int dlt_nvml_open(dlt_nvml *nvml, const char *path, dlt_err *err)
{
    dlt_nvmlReturn_t rc;
    memset(nvml, 0, sizeof(*nvml));
    nvml->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!nvml->handle) {
        const char *why = dlerror();
        return dlt_fail(err, -ENOENT, "cannot load NVML (%s): %s", path, why ? why : "unknown error");
    }
    RESOLVE(Init_v2, "nvmlInit_v2", 1);
    RESOLVE(Shutdown, "nvmlShutdown", 1);
    RESOLVE(ErrorString, "nvmlErrorString", 1);
    RESOLVE(DeviceGetCount_v2, "nvmlDeviceGetCount_v2", 1);
    RESOLVE(DeviceGetHandleByIndex_v2, "nvmlDeviceGetHandleByIndex_v2", 1);
    RESOLVE(DeviceGetPciInfo_v3, "nvmlDeviceGetPciInfo_v3", 1);
    RESOLVE(DeviceGetMinorNumber, "nvmlDeviceGetMinorNumber", 1);
    RESOLVE(DeviceGetName, "nvmlDeviceGetName", 1);
    RESOLVE(DeviceGetCudaComputeCapability, "nvmlDeviceGetCudaComputeCapability", 1);
    RESOLVE(DeviceGetNvLinkState, "nvmlDeviceGetNvLinkState", 1);
    RESOLVE(DeviceGetNvLinkRemotePciInfo_v2, "nvmlDeviceGetNvLinkRemotePciInfo_v2", 1);
    RESOLVE(DeviceGetNvLinkRemoteDeviceType, "nvmlDeviceGetNvLinkRemoteDeviceType", 0);
    RESOLVE(DeviceGetP2PStatus, "nvmlDeviceGetP2PStatus", 0);
    rc = nvml->Init_v2();
    if (rc != DLT_NVML_SUCCESS) {
        dlt_fail(err, -EIO, "nvmlInit failed: %s", nvml->ErrorString(rc));
        goto fail;
    }
    return 0;
fail:
    dlclose(nvml->handle);
    memset(nvml, 0, sizeof(*nvml));
    return -EIO;
}

void dlt_nvml_close(dlt_nvml *nvml)
{
    if (!nvml->handle)
        return;
    nvml->Shutdown();
    dlclose(nvml->handle);
    memset(nvml, 0, sizeof(*nvml));
}
