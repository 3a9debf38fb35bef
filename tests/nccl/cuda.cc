/* SPDX-License-Identifier: Apache-2.0 */
/* cuda.cc: stands in for the CUDA runtime calls left in NCCL's topology code once the linker drops
 * what the harness never reaches: there is no device here. cudaGetDevice (debug.cc's log prefix) and
 * cudaGetDeviceProperties (xml.cc, only for a GPU NVML does not know) say so; no error is pending. */
#include <cuda_runtime_api.h>

cudaError_t cudaGetDevice(int *device)
{
    *device = -1;
    return cudaErrorNoDevice;
}

cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device)
{
    (void)prop;
    (void)device;
    return cudaErrorNoDevice;
}

cudaError_t cudaGetLastError(void)
{
    return cudaSuccess;
}

const char *cudaGetErrorString(cudaError_t error)
{
    return error == cudaSuccess ? "no error" : "no CUDA device (tests/nccl stand-in)";
}
