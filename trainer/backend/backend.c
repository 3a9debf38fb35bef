/* SPDX-License-Identifier: Apache-2.0 */
/* backend: precision names and the choice between the CPU and CUDA backends. */
#include "config.h"

#include "trainer/backend/backend.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#ifdef DLT_HAVE_CUDA_BACKEND
#include "trainer/backend/cuda_backend.h"
#include "trainer/backend/cuda_kernels.h"
#include "trainer/common/cuda_check.h"
#endif

static const char *const g_prec_names[] = {"fp32", "bf16", "fp16", "tf32"};

const char *dlt_precision_name(dlt_precision p)
{
    return (unsigned)p < sizeof(g_prec_names) / sizeof(g_prec_names[0]) ? g_prec_names[p] : "?";
}

int dlt_precision_parse(const char *s)
{
    for (size_t i = 0; s && i < sizeof(g_prec_names) / sizeof(g_prec_names[0]); i++)
        if (!strcmp(s, g_prec_names[i]))
            return (int)i;
    return -1;
}

int dlt_results_slot_check(int slot, char *err, size_t errlen)
{
    if (slot >= 0 && slot < DLT_RES_COUNT)
        return 0;
    snprintf(err, errlen, "result slot %d outside 0..%d", slot, DLT_RES_COUNT - 1);
    return -EINVAL;
}

int dlt_param_segments_check(const dlt_param_segment *segs, int nsegs, size_t n, char *err, size_t errlen)
{
    size_t covered = 0;
    for (int i = 0; i < nsegs; i++) {
        if (segs[i].off != covered || segs[i].len == 0) {
            snprintf(err, errlen, "optimizer segment %d [%zu, +%zu) leaves a gap or overlaps", i, segs[i].off,
                     segs[i].len);
            return -EINVAL;
        }
        covered += segs[i].len;
    }
    if (covered != n) {
        snprintf(err, errlen, "optimizer segments cover %zu of %zu parameters", covered, n);
        return -EINVAL;
    }
    return 0;
}

dlt_precision dlt_backend_lowp(const dlt_backend *be)
{
    if (be->act_size == 2 && (be->precision == DLT_PREC_FP16 || be->precision == DLT_PREC_BF16))
        return be->precision;
    return DLT_PREC_FP32;
}

#ifdef DLT_HAVE_CUDA_BACKEND
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
#endif

int dlt_backend_cuda_available(void)
{
#ifdef DLT_HAVE_CUDA_BACKEND
    return dlt_cuda_device_count() > 0;
#else
    return 0;
#endif
}

int dlt_backend_gpu_count(void)
{
#ifdef DLT_HAVE_CUDA_BACKEND
    return dlt_cuda_device_count();
#else
    return 0;
#endif
}

int dlt_backend_gpu_id(int device, char *out, size_t outlen)
{
#ifdef DLT_HAVE_CUDA_BACKEND
    char bus[64];
    if (cudaDeviceGetPCIBusId(bus, sizeof(bus), device) == cudaSuccess) {
        snprintf(out, outlen, "%s", bus);
        return 0;
    }
    cudaGetLastError();
#endif
    snprintf(out, outlen, "device %d", device);
    return -1;
}

int dlt_backend_is_gpu(const dlt_backend_config *cfg)
{
    const char *kind = cfg->kind ? cfg->kind : "auto";
    return !strcmp(kind, "cuda") || (!strcmp(kind, "auto") && dlt_backend_cuda_available());
}

void dlt_backend_config_defaults(dlt_backend_config *c)
{
    memset(c, 0, sizeof(*c));
    c->kind = "auto";
    c->precision = DLT_PREC_FP32;
    c->device = -1;
    c->stem_pad = -1;
}

int dlt_backend_create(dlt_backend **out, const dlt_backend_config *cfg, char *err, size_t errlen)
{
    const char *kind = cfg->kind;
    dlt_precision prec = cfg->precision;
    *out = NULL;
    if (!kind || !strcmp(kind, "auto"))
        kind = dlt_backend_cuda_available() ? "cuda" : "cpu";
    if (!strcmp(kind, "cpu"))
        return dlt_backend_cpu_create(out, prec, err, errlen);
    if (!strcmp(kind, "cuda")) {
#ifdef DLT_HAVE_CUDA_BACKEND
        return dlt_backend_cuda_create(out, cfg, err, errlen);
#else
        snprintf(err, errlen, "this dltrain was built without the CUDA backend (configure found no CUDA toolkit "
                              "with cuDNN, cuBLAS and NCCL; see ./configure's summary): use --backend cpu");
        return -ENOTSUP;
#endif
    }
    snprintf(err, errlen, "unknown backend '%s' (auto, cpu, cuda)", kind);
    return -EINVAL;
}
