/* SPDX-License-Identifier: Apache-2.0 */
/* nvml_loader: NVML loaded with dlopen, behind a small typed table; the rest of the plugin never
 * sees NVML. A node without the driver is not an error here: the caller decides. */
#ifndef DLT_NVML_LOADER_H
#define DLT_NVML_LOADER_H

#include "common/status.h"
#include <stddef.h>

/* The subset of NVML's ABI the plugin uses, declared here so the plugin builds without nvml.h.
 * tests/unit/test_nvml_loader.c checks these against nvml.h where it is installed. */
typedef struct dlt_nvmlDevice_st *dlt_nvmlDevice_t;
typedef int dlt_nvmlReturn_t;
#define DLT_NVML_SUCCESS 0
#define DLT_NVML_NVLINK_MAX_LINKS 36
#define DLT_NVML_NVLINK_DEVICE_TYPE_GPU 0x00
#define DLT_NVML_NVLINK_DEVICE_TYPE_IBMNPU 0x01
#define DLT_NVML_NVLINK_DEVICE_TYPE_SWITCH 0x02
#define DLT_NVML_P2P_CAPS_INDEX_READ 0
#define DLT_NVML_P2P_STATUS_OK 0

typedef struct {
    char busIdLegacy[16];
    unsigned int domain;
    unsigned int bus;
    unsigned int device;
    unsigned int pciDeviceId;
    unsigned int pciSubSystemId;
    char busId[32];
} dlt_nvmlPciInfo_t;

typedef struct {
    void *handle;
    dlt_nvmlReturn_t (*Init_v2)(void);
    dlt_nvmlReturn_t (*Shutdown)(void);
    const char *(*ErrorString)(dlt_nvmlReturn_t);
    dlt_nvmlReturn_t (*DeviceGetCount_v2)(unsigned int *);
    dlt_nvmlReturn_t (*DeviceGetHandleByIndex_v2)(unsigned int, dlt_nvmlDevice_t *);
    dlt_nvmlReturn_t (*DeviceGetPciInfo_v3)(dlt_nvmlDevice_t, dlt_nvmlPciInfo_t *);
    dlt_nvmlReturn_t (*DeviceGetMinorNumber)(dlt_nvmlDevice_t, unsigned int *);
    dlt_nvmlReturn_t (*DeviceGetName)(dlt_nvmlDevice_t, char *, unsigned int);
    dlt_nvmlReturn_t (*DeviceGetCudaComputeCapability)(dlt_nvmlDevice_t, int *, int *);
    dlt_nvmlReturn_t (*DeviceGetNvLinkState)(dlt_nvmlDevice_t, unsigned int, int *);
    dlt_nvmlReturn_t (*DeviceGetNvLinkRemotePciInfo_v2)(dlt_nvmlDevice_t, unsigned int, dlt_nvmlPciInfo_t *);
    /* Optional: older drivers lack these. */
    dlt_nvmlReturn_t (*DeviceGetNvLinkRemoteDeviceType)(dlt_nvmlDevice_t, unsigned int, int *);
    dlt_nvmlReturn_t (*DeviceGetP2PStatus)(dlt_nvmlDevice_t, dlt_nvmlDevice_t, int, int *);
} dlt_nvml;

/* Loads path (a library name or absolute path) and resolves the table, then nvmlInit.
 * Returns 0, -ENOENT when the library is absent (no driver), or -EIO with err filled. */
int dlt_nvml_open(dlt_nvml *nvml, const char *path, dlt_err *err);
void dlt_nvml_close(dlt_nvml *nvml);

#endif
