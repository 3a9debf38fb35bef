/* cuda_backend: the ops table on an NVIDIA GPU (cuDNN convolutions, batch norm and pooling,
 * cuBLAS for the FC layer, a few kernels of ours), and NCCL gradient all-reduce in buckets that
 * overlap backward. Built when configure finds CUDA, cuDNN, cuBLAS and NCCL. */
#ifndef DLT_CUDA_BACKEND_H
#define DLT_CUDA_BACKEND_H

#include <stddef.h>

#include "trainer/backend/backend.h"

/* GPUs the CUDA runtime sees (0 without a driver or device). */
int dlt_cuda_device_count(void);
/* Makes `requested` (-1: 0) the calling thread's device; *device gets it. */
int dlt_cuda_select_device(int requested, int *device, char *err, size_t errlen);

int dlt_backend_cuda_create(dlt_backend **out, const dlt_backend_config *cfg, char *err, size_t errlen);

struct ncclComm;
/* Waits for a CUDA stream (cudaStream_t) by polling, so that between polls NCCL's asynchronous
 * error state (nccl may be NULL) can end the wait with an error instead of a hang. */
int dlt_cuda_stream_wait(void *stream, struct ncclComm *nccl, char *err, size_t errlen);

/* From now on backward reduces the n gradients at `grads` (backend memory) over comm, bucket by
 * bucket as they are produced (cfg's bucket_mib and reduce_lowp), on a communication stream. */
int dlt_backend_cuda_attach_nccl(dlt_backend *be, struct ncclComm *comm, float *grads, size_t n, char *err,
                                 size_t errlen);

#endif
