/* SPDX-License-Identifier: Apache-2.0 */
/* fake_nvml: a stand-in libnvidia-ml.so for tests, serving the GPUs and NVLinks of a fixture
 * file named by $DLT_FAKE_NVML (lines: "gpu BUSID MINOR SM NAME" and "link GPU REMOTE_BUSID
 * gpu|switch|npu"). Only the calls spank_dltrain uses, with NVML's return codes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXG 16
#define MAXL 36

typedef struct {
    char busid[32];
    unsigned minor;
    int sm;
    char name[64];
    int nlinks;
    char remote[MAXL][32];
    int rtype[MAXL];
} fake_gpu;

typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} fake_pci;

static fake_gpu g_gpus[MAXG];
static int g_n = -1;

static int _load(void)
{
    const char *path = getenv("DLT_FAKE_NVML");
    char line[256];
    FILE *f;
    g_n = 0;
    if (!path || !(f = fopen(path, "r")))
        return 9; /* NVML_ERROR_DRIVER_NOT_LOADED */
    while (fgets(line, sizeof(line), f)) {
        char a[32], b[64];
        unsigned minor;
        int sm, gi;
        if (sscanf(line, "gpu %31s %u %d %63[^\n]", a, &minor, &sm, b) == 4 && g_n < MAXG) {
            fake_gpu *g = &g_gpus[g_n++];
            memset(g, 0, sizeof(*g));
            snprintf(g->busid, sizeof(g->busid), "%s", a);
            g->minor = minor;
            g->sm = sm;
            snprintf(g->name, sizeof(g->name), "%s", b);
        } else if (sscanf(line, "link %d %31s %63s", &gi, a, b) == 3 && gi >= 0 && gi < g_n &&
                   g_gpus[gi].nlinks < MAXL) {
            fake_gpu *g = &g_gpus[gi];
            snprintf(g->remote[g->nlinks], 32, "%s", a);
            g->rtype[g->nlinks++] = !strcmp(b, "switch") ? 2 : !strcmp(b, "npu") ? 1 : 0;
        }
    }
    fclose(f);
    return 0;
}

int nvmlInit_v2(void)
{
    return _load();
}
int nvmlShutdown(void)
{
    return 0;
}
const char *nvmlErrorString(int rc)
{
    return rc == 0 ? "Success" : rc == 2 ? "Invalid Argument" : rc == 9 ? "Driver Not Loaded" : "Unknown Error";
}
int nvmlDeviceGetCount_v2(unsigned *n)
{
    *n = (unsigned)g_n;
    return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned i, void **dev)
{
    if ((int)i >= g_n)
        return 2;
    *dev = &g_gpus[i];
    return 0;
}
static void _fill_pci(fake_pci *p, const char *busid)
{
    memset(p, 0, sizeof(*p));
    /* NVML's own form: 8-digit domain, upper case. */
    snprintf(p->busId, sizeof(p->busId), "0000%s", busid);
    for (char *c = p->busId; *c; c++)
        if (*c >= 'a' && *c <= 'f')
            *c = (char)(*c - 'a' + 'A');
}
int nvmlDeviceGetPciInfo_v3(void *dev, fake_pci *p)
{
    _fill_pci(p, ((fake_gpu *)dev)->busid);
    return 0;
}
int nvmlDeviceGetMinorNumber(void *dev, unsigned *m)
{
    *m = ((fake_gpu *)dev)->minor;
    return 0;
}
int nvmlDeviceGetName(void *dev, char *name, unsigned len)
{
    snprintf(name, len, "%s", ((fake_gpu *)dev)->name);
    return 0;
}
int nvmlDeviceGetCudaComputeCapability(void *dev, int *major, int *minor)
{
    *major = ((fake_gpu *)dev)->sm / 10;
    *minor = ((fake_gpu *)dev)->sm % 10;
    return 0;
}
int nvmlDeviceGetNvLinkState(void *dev, unsigned link, int *active)
{
    fake_gpu *g = dev;
    if (link >= MAXL)
        return 2;
    if ((int)link >= g->nlinks)
        return 3; /* NVML_ERROR_NOT_SUPPORTED, as for absent links */
    *active = 1;
    return 0;
}
int nvmlDeviceGetNvLinkRemotePciInfo_v2(void *dev, unsigned link, fake_pci *p)
{
    fake_gpu *g = dev;
    if ((int)link >= g->nlinks)
        return 3;
    _fill_pci(p, g->remote[link]);
    return 0;
}
int nvmlDeviceGetNvLinkRemoteDeviceType(void *dev, unsigned link, int *type)
{
    fake_gpu *g = dev;
    if ((int)link >= g->nlinks)
        return 3;
    *type = g->rtype[link];
    return 0;
}
int nvmlDeviceGetP2PStatus(void *a, void *b, int idx, int *status)
{
    (void)a;
    (void)b;
    (void)idx;
    *status = 0;
    return 0;
}
