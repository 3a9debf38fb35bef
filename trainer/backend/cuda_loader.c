/* SPDX-License-Identifier: Apache-2.0 */
/* cuda_loader: opens dltrain_cuda.so on first use and hands out its table
 * (trainer/backend/cuda_module.h). */
#include "config.h"

#include "trainer/backend/cuda_module.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef DLT_HAVE_CUDA_BACKEND
#include <dlfcn.h>
#endif

#ifndef DLT_MODULE_DIR
#define DLT_MODULE_DIR "/usr/local/lib/dltrain"
#endif
#define MODULE_FILE "dltrain_cuda.so"

int dlt_cuda_module_path(char *out, size_t outlen)
{
    const char *env = getenv("DLTRAIN_CUDA_MODULE");
    char exe[PATH_MAX];
    ssize_t n;
    if (env && *env) { /* the user's own choice: dltrain never runs with more rights than its user */
        snprintf(out, outlen, "%s", env);
        return access(out, R_OK) == 0 ? 0 : -ENOENT;
    }
    /* The folder of the running program: in a build tree, libtool keeps the program and the
     * module side by side in trainer/.libs. */
    n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n > 0) {
        char *slash;
        exe[n] = '\0';
        slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            snprintf(out, outlen, "%s/%s", exe, MODULE_FILE);
            if (access(out, R_OK) == 0)
                return 0;
        }
    }
    snprintf(out, outlen, "%s/%s", DLT_MODULE_DIR, MODULE_FILE);
    return access(out, R_OK) == 0 ? 0 : -ENOENT;
}

const char *dlt_cuda_lib_package(const char *lib)
{
#ifdef DLT_CUDA_MAJOR
#define MAJ DLT_CUDA_MAJOR
#else
#define MAJ "N"
#endif
    static const struct {
        const char *prefix, *package;
    } known[] = {
        {"libcudnn", "libcudnn9-cuda-" MAJ},    {"libcublasLt", "libcublas-" MAJ "-0"},
        {"libcublas", "libcublas-" MAJ "-0"},   {"libnccl", "libnccl2"},
        {"libcudart", "cuda-cudart-" MAJ "-0"}, {"libcuda.so", "the NVIDIA driver (libcuda1, nvidia-driver)"},
        {"libnvrtc", "cuda-nvrtc-" MAJ "-0"},   {"libdltpmix", "libdltpmix0"},
    };
#undef MAJ
    for (size_t i = 0; lib && i < sizeof(known) / sizeof(known[0]); i++)
        if (!strncmp(lib, known[i].prefix, strlen(known[i].prefix)))
            return known[i].package;
    return NULL;
}

#ifdef DLT_HAVE_CUDA_BACKEND
/* dlerror's text starts with the object that failed, "libcudnn.so.9: cannot open ...", or with
 * the module's own path when the module itself is the problem. */
static void _say_load_failure(const char *path, const char *why, dlt_err *err)
{
    char obj[PATH_MAX] = "";
    const char *colon = strchr(why, ':'), *lib, *pkg;
    if (colon && (size_t)(colon - why) < sizeof(obj)) {
        memcpy(obj, why, (size_t)(colon - why));
        obj[colon - why] = '\0';
    }
    lib = strrchr(obj, '/') ? strrchr(obj, '/') + 1 : obj; /* "/opt/x/libcudnn.so.9: file too short" */
    pkg = strcmp(obj, path) ? dlt_cuda_lib_package(lib) : NULL;
    if (pkg)
        dlt_fail(err, -EIO,
                 "the CUDA backend cannot be loaded: %.240s (the package %s holds %.64s; or run "
                 "with --backend cpu)",
                 why, pkg, lib);
    else
        dlt_fail(err, -EIO,
                 "the CUDA backend cannot be loaded: %.200s (module %.120s; check the CUDA "
                 "libraries with `ldd %.120s`, or run with --backend cpu)",
                 why, path, path);
}

static const dlt_cuda_module *_open(dlt_err *err)
{
    char path[PATH_MAX + 32];
    void *handle;
    const dlt_cuda_module *m;
    if (dlt_cuda_module_path(path, sizeof(path)) != 0) {
        dlt_fail(err, -EINVAL,
                 "the CUDA backend module %.200s is missing (install dltrain-cuda's files completely, "
                 "set DLTRAIN_CUDA_MODULE to its path, or run with --backend cpu)",
                 path);
        return NULL;
    }
    /* RTLD_LOCAL: nothing of CUDA leaks into the program's namespace; RTLD_NOW: a missing symbol
     * is found here, not in the middle of a step. */
    handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        const char *why = dlerror();
        _say_load_failure(path, why ? why : "unknown loader error", err);
        return NULL;
    }
    m = dlsym(handle, DLT_CUDA_MODULE_SYMBOL);
    if (!m || m->abi != DLT_CUDA_MODULE_ABI || !m->version || strcmp(m->version, PACKAGE_VERSION)) {
        dlt_fail(err, -EIO,
                 "the CUDA backend module %.200s belongs to another dltrain build (%s %s, this "
                 "program %s): install both from the same build, or set DLTRAIN_CUDA_MODULE",
                 path, m ? "version" : "no table", m && m->version ? m->version : "?", PACKAGE_VERSION);
        dlclose(handle);
        return NULL;
    }
    return m; /* kept open for the life of the process */
}
#endif

const dlt_cuda_module *dlt_cuda_module_get(dlt_err *err)
{
#ifdef DLT_HAVE_CUDA_BACKEND
    /* One answer per process: the first caller (the main thread, before any worker starts) opens
     * the module, and a failure is not retried with a different outcome later. */
    static int tried;
    static const dlt_cuda_module *module;
    static dlt_err why = DLT_ERR_INIT;
    if (!tried) {
        module = _open(&why);
        tried = 1;
    }
    if (!module)
        dlt_fail(err, -ENOENT, "%.500s", why.msg);
    return module;
#else
    dlt_fail(err, -ENOTSUP,
             "this dltrain was built without the CUDA backend (configure found no CUDA toolkit with "
             "cuDNN, cuBLAS and NCCL; see ./configure's summary): use --backend cpu");
    return NULL;
#endif
}
