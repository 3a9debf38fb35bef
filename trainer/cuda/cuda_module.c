/* SPDX-License-Identifier: Apache-2.0 */
/* cuda_module: the table dltrain_cuda.so exports (trainer/backend/cuda_module.h), and the few
 * CUDA calls the rest of the trainer reaches through it. */
#include "config.h"

#include "trainer/backend/cuda_module.h"

#include <stdio.h>

#include "common/cuda_check.h"
#include "trainer/backend/cuda_backend.h"
#include "trainer/backend/cuda_kernels.h"
#include "trainer/check/allreduce_check.h"
#include "trainer/check/gemm_check.h"
#include "trainer/comm/comm.h"
#include "trainer/comm/grad_reducer.h"

static dlt_dt _lowp_dt(const dlt_backend *be)
{
    return dlt_backend_lowp(be) == DLT_PREC_BF16 ? DLT_DT_BF16 : DLT_DT_F16;
}

int dlt_cuda_grads_to_lowp(const dlt_backend *be, const float *src, void *dst, size_t n, float mul, void *stream)
{
    return dlt_k_cast_scaled_from_f32(src, dst, _lowp_dt(be), n, mul, (dlt_stream)stream);
}

int dlt_cuda_grads_from_lowp(const dlt_backend *be, const void *src, float *dst, size_t n, void *stream)
{
    return dlt_k_cast_to_f32(src, _lowp_dt(be), dst, n, (dlt_stream)stream);
}

static int _pci_bus_id(int device, char *out, size_t outlen)
{
    char bus[64];
    if (cudaDeviceGetPCIBusId(bus, sizeof(bus), device) == cudaSuccess) {
        snprintf(out, outlen, "%s", bus);
        return 0;
    }
    cudaGetLastError(); /* not sticky: clear it */
    return -1;
}

/* The module is built with hidden visibility: this table is the one name it exports. */
__attribute__((visibility("default"))) const dlt_cuda_module dlt_cuda_module_table = {
    .abi = DLT_CUDA_MODULE_ABI,
    .version = PACKAGE_VERSION,
    .device_count = dlt_cuda_device_count,
    .pci_bus_id = _pci_bus_id,
    .backend_create = dlt_backend_cuda_create,
    .comm_create = dlt_comm_nccl_create,
    .grad_reducer_create = dlt_grad_reducer_nccl_create,
    .allreduce_run = dlt_ar_nccl_run,
    .gemm_run = dlt_gemm_run_cuda,
};
