/* SPDX-License-Identifier: Apache-2.0 */
/* backend: precision names and the choice between the CPU and CUDA backends. */
#include "config.h"

#include "trainer/backend/backend.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <unistd.h>

#include "trainer/backend/cuda_module.h"

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

int dlt_results_slot_check(int slot, dlt_err *err)
{
    if (slot >= 0 && slot < DLT_RES_COUNT)
        return 0;
    return dlt_fail(err, -EINVAL, "result slot %d outside 0..%d", slot, DLT_RES_COUNT - 1);
}

int dlt_param_segments_check(const dlt_param_segment *segs, int nsegs, size_t n, dlt_err *err)
{
    size_t covered = 0;
    for (int i = 0; i < nsegs; i++) {
        if (segs[i].off != covered || segs[i].len == 0) {
            return dlt_fail(err, -EINVAL, "optimizer segment %d [%zu, +%zu) leaves a gap or overlaps", i, segs[i].off,
                            segs[i].len);
        }
        covered += segs[i].len;
    }
    if (covered != n) {
        return dlt_fail(err, -EINVAL, "optimizer segments cover %zu of %zu parameters", covered, n);
    }
    return 0;
}

dlt_precision dlt_backend_lowp(const dlt_backend *be)
{
    if (be->act_size == 2 && (be->precision == DLT_PREC_FP16 || be->precision == DLT_PREC_BF16))
        return be->precision;
    return DLT_PREC_FP32;
}

/* The CUDA module when it loads; NULL otherwise. Looking for a GPU (--backend auto) on a node
 * without the CUDA libraries is not an error, but a node with NVIDIA devices whose libraries do
 * not load is worth one line. */
static const dlt_cuda_module *_cuda_probe(void)
{
    dlt_err why = DLT_ERR_INIT;
    const dlt_cuda_module *m;
    /* No NVIDIA driver on this node (its control device; WSL's /dev/dxg): no GPU to find, and the
     * CUDA libraries (a gigabyte and more of address space) stay unmapped for a CPU run. */
    if (access("/dev/nvidiactl", F_OK) != 0 && access("/dev/nvidia0", F_OK) != 0 && access("/dev/dxg", F_OK) != 0)
        return NULL;
    m = dlt_cuda_module_get(&why);
#ifdef DLT_HAVE_CUDA_BACKEND
    {
        static int warned;
        if (!m && !warned) {
            fprintf(stderr, "dltrain: warning: this node has an NVIDIA device but %s\n", why.msg);
            warned = 1;
        }
    }
#endif
    return m;
}

int dlt_backend_cuda_available(void)
{
    return dlt_backend_gpu_count() > 0;
}

int dlt_backend_gpu_count(void)
{
    const dlt_cuda_module *m = _cuda_probe();
    return m ? m->device_count() : 0;
}

int dlt_backend_gpu_id(int device, char *out, size_t outlen)
{
    const dlt_cuda_module *m = _cuda_probe();
    if (m && m->pci_bus_id(device, out, outlen) == 0)
        return 0;
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
    c->wgrad_fp32 = -1;
}

int dlt_backend_create(dlt_backend **out, const dlt_backend_config *cfg, dlt_err *err)
{
    const char *kind = cfg->kind;
    dlt_precision prec = cfg->precision;
    *out = NULL;
    if (!kind || !strcmp(kind, "auto"))
        kind = dlt_backend_cuda_available() ? "cuda" : "cpu";
    if (!strcmp(kind, "cpu"))
        return dlt_backend_cpu_create(out, prec, err);
    if (!strcmp(kind, "cuda")) {
        const dlt_cuda_module *m = dlt_cuda_module_get(err);
        return m ? m->backend_create(out, cfg, err) : -ENOTSUP;
    }
    return dlt_fail(err, -EINVAL, "unknown backend '%s' (auto, cpu, cuda)", kind);
}
