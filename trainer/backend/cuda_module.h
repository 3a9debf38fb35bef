/* SPDX-License-Identifier: Apache-2.0 */
/* cuda_module: the CUDA backend seen from the rest of the trainer, as one table of entry points.
 * The CUDA code (cuDNN, cuBLAS, NCCL, our kernels) is a module of its own, dltrain_cuda.so, that
 * dltrain opens only when a run asks for the GPU (or --backend auto looks for one): the same
 * installed binary then starts on nodes without the CUDA libraries, and a missing or unloadable
 * library is one message naming it and its package instead of the loader's exit 127. This header
 * needs no CUDA header. */
#ifndef DLT_CUDA_MODULE_H
#define DLT_CUDA_MODULE_H

#include <stddef.h>

#include "common/status.h"
#include "trainer/backend/backend.h"

struct dlt_comm;
struct dlt_grad_reducer;
struct dlt_grad_reducer_config;
struct dltpmix_ctx;
struct dlt_gemm_timing;

/* Raised whenever the table or a type it passes changes layout: a module of another build is
 * refused instead of called. */
#define DLT_CUDA_MODULE_ABI 1

typedef struct dlt_cuda_module {
    int abi;             /* DLT_CUDA_MODULE_ABI of the module's build */
    const char *version; /* PACKAGE_VERSION of the module's build */
    /* GPUs the CUDA runtime sees (0 without a driver or device). */
    int (*device_count)(void);
    /* The PCI bus id of CUDA device `device` into out; non-zero when the runtime cannot say. */
    int (*pci_bus_id)(int device, char *out, size_t outlen);
    int (*backend_create)(dlt_backend **out, const dlt_backend_config *cfg, dlt_err *err);
    /* NCCL between the ranks of px's namespace on CUDA device cuda_device (-1: the first visible). */
    int (*comm_create)(struct dlt_comm **out, struct dltpmix_ctx *px, int cuda_device, dlt_err *err);
    /* The reducer's NCCL path (trainer/comm/grad_reducer.h: dlt_grad_reducer_nccl_create). */
    int (*grad_reducer_create)(struct dlt_grad_reducer *r, const struct dlt_grad_reducer_config *cfg, dlt_err *err);
    /* dltrain check's device all-reduce sweep (trainer/check/allreduce_check.h: dlt_ar_nccl_run). */
    int (*allreduce_run)(struct dlt_comm *c, const float *src, float *dst, size_t count, int iters, double *seconds);
    /* dltrain check's cuBLAS GEMM (trainer/check/gemm_check.h: dlt_gemm_run_cuda). */
    int (*gemm_run)(int device, dlt_precision p, int n, double budget_s, float *c, struct dlt_gemm_timing *t,
                    dlt_err *err);
} dlt_cuda_module;

/* The module's one exported symbol (trainer/cuda/cuda_module.c). */
extern const dlt_cuda_module dlt_cuda_module_table;
#define DLT_CUDA_MODULE_SYMBOL "dlt_cuda_module_table"

/* The CUDA backend's table, the module opened on first use (trainer/backend/cuda_loader.c): NULL
 * with err saying why (which library is missing and which package has it, or that this build has
 * no CUDA backend). Later calls return the first answer. */
const dlt_cuda_module *dlt_cuda_module_get(dlt_err *err);

/* Where dlt_cuda_module_get looks, first found wins: $DLTRAIN_CUDA_MODULE when set, the folder of
 * the running program (a build tree), then the install's module folder. Writes the chosen path
 * into out; 0, or -ENOENT with out holding the last path tried. */
int dlt_cuda_module_path(char *out, size_t outlen);

/* The package that holds library `lib` (a soname such as libcudnn.so.9) on Debian/Ubuntu with
 * NVIDIA's repository, for the message of a library that cannot be loaded; NULL when unknown. */
const char *dlt_cuda_lib_package(const char *lib);

#endif
