/* SPDX-License-Identifier: Apache-2.0 */
/* pci_busid: one spelling of a PCI bus id for the plugin (NVML, sysfs) and the trainer (the CUDA
 * runtime, DLT_GPU_PCI), so that the same GPU compares equal whichever source named it. */
#ifndef DLT_PCI_BUSID_H
#define DLT_PCI_BUSID_H

#include <stddef.h>

/* NVML's "00000000:1A:00.0", the runtime's "0000:1A:00.0" and sysfs's "0000:1a:00.0" into
 * lowercase "dddd:bb:dd.f" (out: 13 bytes at least). Returns 0, or -1 for anything else (nothing
 * may follow the function digit). */
int dlt_pci_busid_normalize(const char *in, char *out, size_t outlen);

#endif
