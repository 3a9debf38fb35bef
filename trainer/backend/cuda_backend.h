/* SPDX-License-Identifier: Apache-2.0 */
/* cuda_backend: the ops table on an NVIDIA GPU (cuDNN convolutions, batch norm and pooling,
 * cuBLAS for the FC layer, a few kernels of ours). Built when configure finds CUDA, cuDNN, cuBLAS
 * and NCCL; device helpers are in common/cuda_check.h. */
#ifndef DLT_CUDA_BACKEND_H
#define DLT_CUDA_BACKEND_H

#include <stddef.h>

#include "common/status.h"
#include "trainer/backend/backend.h"

int dlt_backend_cuda_create(dlt_backend **out, const dlt_backend_config *cfg, dlt_err *err);

/* 1 when convolution op (planned by be) writes its filter gradient in fp32 through cuDNN's graph
 * API (--wgrad-fp32), 0 when it runs the legacy call (and, in fp16/bf16, its cast). */
int dlt_backend_cuda_wgrad_fp32(const dlt_backend *be, const dlt_op *op);

/* The low-precision gradient copy of the NCCL reduction (--allreduce-lowp), in be's 16-bit type
 * (dlt_backend_lowp): src times mul cast into dst, and back to float, queued on stream (a
 * cudaStream_t). Return the launch's cudaError_t (0: queued). */
int dlt_cuda_grads_to_lowp(const dlt_backend *be, const float *src, void *dst, size_t n, float mul, void *stream);
int dlt_cuda_grads_from_lowp(const dlt_backend *be, const void *src, float *dst, size_t n, void *stream);

#endif
