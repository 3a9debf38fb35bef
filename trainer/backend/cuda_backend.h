/* SPDX-License-Identifier: Apache-2.0 */
/* cuda_backend: the ops table on an NVIDIA GPU (cuDNN convolutions, batch norm and pooling,
 * cuBLAS for the FC layer, a few kernels of ours). Built when configure finds CUDA, cuDNN, cuBLAS
 * and NCCL; device helpers are in trainer/common/cuda_check.h. */
#ifndef DLT_CUDA_BACKEND_H
#define DLT_CUDA_BACKEND_H

#include <stddef.h>

#include "trainer/backend/backend.h"

int dlt_backend_cuda_create(dlt_backend **out, const dlt_backend_config *cfg, char *err, size_t errlen);

#endif
