/* SPDX-License-Identifier: Apache-2.0 */
/* sysfs.cc: stands in for the machine under NCCL's detection. /sys: every realpath, fopen and opendir
 * of NCCL's objects (linked with -Wl,--wrap) of a path under /sys/ reads the fixture's tree instead,
 * and a realpath answers "/sys/..." as the kernel would, so NCCL builds its paths as on the real node.
 * NCCL's default topology file (/var/run/nvidia-topologyd/, read when NCCL_TOPO_FILE is unset) is
 * looked for under the fixture too, which has none. The CPU: CPUID leaves 0 and 1 (vendor, family,
 * model; cpuid_standin.h routes xml.cc's __cpuid here) as the fixture's /proc/cpuinfo says. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "standins.h"

char dltSysroot[4096];

extern "C" {
char *__real_realpath(const char *path, char *resolved);
FILE *__real_fopen(const char *path, const char *mode);
DIR *__real_opendir(const char *path);
}

/* /sys, and the topology file NCCL reads by default when NCCL_TOPO_FILE is unset (topo.cc,
 * ncclTopoGetSystem: /var/run/nvidia-topologyd/virtualTopology.xml), which a fixture node has not. */
static bool redirected(const char *path)
{
    return dltSysroot[0] && path &&
           (strncmp(path, "/sys/", 5) == 0 || strncmp(path, "/var/run/nvidia-topologyd/", 26) == 0);
}

void dltUnderRoot(char *out, size_t n, const char *path)
{
    snprintf(out, n, "%s%s", dltSysroot, path);
}

extern "C" char *__wrap_realpath(const char *path, char *resolved)
{
    if (!redirected(path))
        return __real_realpath(path, resolved);
    char full[8192];
    dltUnderRoot(full, sizeof(full), path);
    char *real = __real_realpath(full, NULL);
    if (!real)
        return NULL;
    size_t n = strlen(dltSysroot);
    const char *shown = strncmp(real, dltSysroot, n) == 0 && real[n] == '/' ? real + n : real;
    char *out = resolved ? resolved : (char *)malloc(strlen(shown) + 1);
    if (out)
        memmove(out, shown, strlen(shown) + 1);
    free(real);
    return out;
}

extern "C" FILE *__wrap_fopen(const char *path, const char *mode)
{
    if (!redirected(path))
        return __real_fopen(path, mode);
    char full[8192];
    dltUnderRoot(full, sizeof(full), path);
    return __real_fopen(full, mode);
}

extern "C" DIR *__wrap_opendir(const char *path)
{
    if (!redirected(path))
        return __real_opendir(path);
    char full[8192];
    dltUnderRoot(full, sizeof(full), path);
    return __real_opendir(full);
}

/* "vendor_id : GenuineIntel", "cpu family : 6", "model : 85" of the fixture's first CPU. */
static void cpuinfo(char vendor[13], unsigned *family, unsigned *model)
{
    char path[8192], line[256];
    snprintf(vendor, 13, "%s", "");
    *family = *model = 0;
    snprintf(path, sizeof(path), "%s/proc/cpuinfo", dltSysroot);
    FILE *f = __real_fopen(path, "r");
    if (!f)
        return;
    while (fgets(line, sizeof(line), f)) {
        char *v = strchr(line, ':');
        if (!v)
            continue;
        char *k = v;
        while (k > line && (k[-1] == ' ' || k[-1] == '\t'))
            k--;
        *k = '\0'; /* the key, without its padding */
        v++;
        while (*v == ' ' || *v == '\t')
            v++;
        v[strcspn(v, "\n")] = '\0';
        if (!strcmp(line, "processor") && *vendor)
            break; /* the second CPU's block */
        if (!strcmp(line, "vendor_id"))
            snprintf(vendor, 13, "%s", v);
        else if (!strcmp(line, "cpu family"))
            *family = (unsigned)atoi(v);
        else if (!strcmp(line, "model"))
            *model = (unsigned)atoi(v);
    }
    fclose(f);
}

/* Linux's "cpu family" is the base family plus, from 15 on, the extended family; the model holds the
 * extended model in its high nibble. */
void dltCpuid(unsigned level, unsigned *a, unsigned *b, unsigned *c, unsigned *d)
{
    char vendor[13];
    unsigned family, model;
    cpuinfo(vendor, &family, &model);
    *a = *b = *c = *d = 0;
    if (level == 0) {
        char v[12] = {0};
        memcpy(v, vendor, strlen(vendor));
        memcpy(b, v, 4);     /* "Genu" */
        memcpy(d, v + 4, 4); /* "ineI" */
        memcpy(c, v + 8, 4); /* "ntel" */
        *a = 1;
    } else if (level == 1) {
        unsigned base = family >= 15 ? 15 : family, ext = family >= 15 ? family - 15 : 0;
        *a = (model & 0xf) << 4 | (base & 0xf) << 8 | ((model >> 4) & 0xf) << 16 | (ext & 0xff) << 20;
    }
}
