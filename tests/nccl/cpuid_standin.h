/* SPDX-License-Identifier: Apache-2.0 */
/* cpuid_standin.h: included before NCCL's src/graph/xml.cc (g++ -include): its __cpuid (the CPU vendor, family
 * and model of ncclTopoGetXmlFromCpu) asks the fixture node's CPU (sysfs.cc) instead of this machine's. */
#include <cpuid.h>
#undef __cpuid
#define __cpuid(level, a, b, c, d) dltCpuid((level), &(a), &(b), &(c), &(d))
void dltCpuid(unsigned level, unsigned *a, unsigned *b, unsigned *c, unsigned *d);
