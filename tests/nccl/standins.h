/* SPDX-License-Identifier: Apache-2.0 */
/* standins.h: what the harness (harness.cc) shares with the stand-ins of tests/nccl/: the fixture
 * node it runs on (a tree written by tests/fixtures/mktopo.py) and the net stand-in's devices. */
#ifndef DLT_NCCL_STANDINS_H
#define DLT_NCCL_STANDINS_H

#include <stddef.h>

#include "nccl.h"
#include "net.h"

/* The fixture's root (a realpath, no trailing slash) and its NVML description (nvml.txt). */
extern char dltSysroot[4096];
extern char dltNvmlFile[4096];

/* path, an absolute host path ("/sys/..."), as it is under the fixture's root. */
void dltUnderRoot(char *out, size_t n, const char *path);

/* The net stand-in (net.cc): found from the fixture's sysfs, as NCCL's IB plugin would (HCAs), else as
 * its socket plugin would (interfaces). */
extern ncclNet_t dltNet;
ncclResult_t dltNetInit(void);
const char *dltNetDevName(int dev);
int dltNetGdr(void); /* whether a device takes CUDA pointers (GPUDirect RDMA) */

/* The bootstrap stand-in (core.cc): forgets the XML of every rank kept so far. */
void dltGatherReset(void);

#endif
