/* SPDX-License-Identifier: Apache-2.0 */
/* pci_busid: PCI bus ids in one spelling. */
#include "common/pci_busid.h"

#include <stdio.h>
#include <string.h>

int dlt_pci_busid_normalize(const char *in, char *out, size_t outlen)
{
    unsigned dom, bus, dev, fn;
    int used = -1;
    if (!in || strlen(in) > 20 || strspn(in, "0123456789abcdefABCDEF:.") != strlen(in))
        return -1;
    /* The domain is 4 (sysfs, the runtime) or 8 (NVML) hex digits by source. */
    if (sscanf(in, "%8x:%2x:%2x.%1x%n", &dom, &bus, &dev, &fn, &used) != 4 || used < 0 || in[used] != '\0')
        return -1;
    if (dom > 0xffff || bus > 0xff || dev > 0x1f || fn > 7)
        return -1;
    if ((size_t)snprintf(out, outlen, "%04x:%02x:%02x.%x", dom, bus, dev, fn) >= outlen)
        return -1;
    return 0;
}
