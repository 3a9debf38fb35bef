/* SPDX-License-Identifier: Apache-2.0 */
/* options: the --dl-train=OPTS grammar and the plugstack.conf site arguments.
 * Every string here may come from a user and is read in slurmstepd as root: bounded, validated. */
#include "options.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int _fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int _fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    if (err && errlen) {
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -EINVAL;
}

void dlt_site_conf_defaults(dlt_site_conf *site)
{
    memset(site, 0, sizeof(*site));
    site->default_bind = DLT_BIND_CLOSEST;
    site->default_nccl = DLT_NCCL_AUTO;
    site->enable = DLT_ENABLE_OPTIN;
    site->allow_bind_none = 1;
    snprintf(site->topo_dir, sizeof(site->topo_dir), "%s", "/run/dltrain");
    snprintf(site->nvml_lib, sizeof(site->nvml_lib), "%s", "libnvidia-ml.so.1");
    snprintf(site->sysfs_root, sizeof(site->sysfs_root), "%s", "/");
}

int dlt_valid_name(const char *s, int allow_comma)
{
    size_t n = 0;
    if (!s || !*s)
        return 0;
    for (; s[n]; n++) {
        char c = s[n];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                 c == '.' || c == ':' || c == '-' || (allow_comma && c == ',');
        if (!ok || n >= DLT_NAME_MAX - 1)
            return 0;
    }
    return 1;
}

/* An absolute path without "..", control characters or excessive length. */
static int _valid_path(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n >= DLT_PATH_MAX)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return 0;
    return strstr(s, "/../") == NULL && !(n >= 3 && strcmp(s + n - 3, "/..") == 0);
}

static int _parse_bind(const char *v, dlt_bind_mode *out)
{
    if (strcmp(v, "closest") == 0)
        *out = DLT_BIND_CLOSEST;
    else if (strcmp(v, "none") == 0)
        *out = DLT_BIND_NONE;
    else
        return -1;
    return 0;
}

static int _parse_nccl(const char *v, dlt_nccl_mode *out)
{
    if (strcmp(v, "auto") == 0)
        *out = DLT_NCCL_AUTO;
    else if (strcmp(v, "off") == 0)
        *out = DLT_NCCL_OFF;
    else
        return -1;
    return 0;
}

static int _parse_bool(const char *v, int *out)
{
    if (!strcmp(v, "yes") || !strcmp(v, "1") || !strcmp(v, "true"))
        *out = 1;
    else if (!strcmp(v, "no") || !strcmp(v, "0") || !strcmp(v, "false"))
        *out = 0;
    else
        return -1;
    return 0;
}

#define SITE_KEYS                                                                                            \
    "default_bind, default_nccl, default_gpus, enable, allow_bind_none, topo_dir, nvml_lib, sysfs_root, "      \
    "nccl_socket_ifname, nccl_ib_hca"

static int _site_conf_parse_into(dlt_site_conf *site, int argc, char *const argv[], char *err, size_t errlen)
{
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        const char *eq = arg ? strchr(arg, '=') : NULL;
        char key[32];
        const char *val;
        if (!eq || eq == arg || (size_t)(eq - arg) >= sizeof(key))
            return _fail(err, errlen, "plugstack.conf argument '%.64s' is not key=value (keys: %s)", arg ? arg : "",
                         SITE_KEYS);
        memcpy(key, arg, (size_t)(eq - arg));
        key[eq - arg] = '\0';
        val = eq + 1;
        if (!strcmp(key, "default_bind")) {
            if (_parse_bind(val, &site->default_bind))
                return _fail(err, errlen, "plugstack.conf default_bind='%.64s' invalid (closest|none)", val);
        } else if (!strcmp(key, "default_nccl")) {
            if (_parse_nccl(val, &site->default_nccl))
                return _fail(err, errlen, "plugstack.conf default_nccl='%.64s' invalid (auto|off)", val);
        } else if (!strcmp(key, "enable")) {
            if (!strcmp(val, "optin"))
                site->enable = DLT_ENABLE_OPTIN;
            else if (!strcmp(val, "always"))
                site->enable = DLT_ENABLE_ALWAYS;
            else
                return _fail(err, errlen, "plugstack.conf enable='%.64s' invalid (optin|always)", val);
        } else if (!strcmp(key, "allow_bind_none")) {
            if (_parse_bool(val, &site->allow_bind_none))
                return _fail(err, errlen, "plugstack.conf allow_bind_none='%.64s' invalid (yes|no)", val);
        } else if (!strcmp(key, "topo_dir")) {
            if (!_valid_path(val) || val[0] != '/')
                return _fail(err, errlen, "plugstack.conf topo_dir='%.64s' must be an absolute path under %d bytes",
                             val, DLT_PATH_MAX);
            snprintf(site->topo_dir, sizeof(site->topo_dir), "%s", val);
        } else if (!strcmp(key, "nvml_lib")) {
            if (!_valid_path(val))
                return _fail(err, errlen, "plugstack.conf nvml_lib='%.64s' invalid", val);
            snprintf(site->nvml_lib, sizeof(site->nvml_lib), "%s", val);
        } else if (!strcmp(key, "sysfs_root")) {
            if (!_valid_path(val) || val[0] != '/')
                return _fail(err, errlen, "plugstack.conf sysfs_root='%.64s' must be an absolute path", val);
            snprintf(site->sysfs_root, sizeof(site->sysfs_root), "%s", val);
        } else if (!strcmp(key, "default_gpus")) {
            if (!strcmp(val, "task"))
                site->default_gpus = DLT_GPUS_TASK;
            else if (!strcmp(val, "step"))
                site->default_gpus = DLT_GPUS_STEP;
            else
                return _fail(err, errlen, "plugstack.conf default_gpus='%.64s' invalid (task|step)", val);
        } else if (!strcmp(key, "nccl_socket_ifname")) {
            if (!dlt_valid_name(val, 1))
                return _fail(err, errlen, "plugstack.conf nccl_socket_ifname='%.64s' invalid", val);
            snprintf(site->nccl_socket_ifname, sizeof(site->nccl_socket_ifname), "%s", val);
        } else if (!strcmp(key, "nccl_ib_hca")) {
            if (!dlt_valid_name(val, 1))
                return _fail(err, errlen, "plugstack.conf nccl_ib_hca='%.64s' invalid", val);
            snprintf(site->nccl_ib_hca, sizeof(site->nccl_ib_hca), "%s", val);
        } else {
            return _fail(err, errlen, "plugstack.conf: unknown argument '%.31s' (keys: %s)", key, SITE_KEYS);
        }
    }
    return 0;
}

int dlt_site_conf_parse(dlt_site_conf *site, int argc, char *const argv[], char *err, size_t errlen)
{
    dlt_site_conf parsed;
    int rc;
    /* All or nothing: a refused line leaves the defaults, never a half-applied configuration. */
    dlt_site_conf_defaults(&parsed);
    rc = _site_conf_parse_into(&parsed, argc, argv, err, errlen);
    if (rc == 0)
        *site = parsed;
    else
        dlt_site_conf_defaults(site);
    return rc;
}

#define USER_KEYS "bind=closest|none, gpus=task|step, nccl=auto|off, nic=auto|NAME, verbose"

int dlt_user_opts_parse(dlt_user_opts *opts, const dlt_site_conf *site, const char *optstr, char *err,
                        size_t errlen)
{
    char buf[DLT_OPTS_MAX];
    char *save = NULL;
    size_t len;

    memset(opts, 0, sizeof(*opts));
    opts->requested = 1;
    opts->bind = site->default_bind;
    opts->nccl = site->default_nccl;
    opts->gpus = site->default_gpus;
    if (!optstr || !*optstr)
        return 0;
    len = strlen(optstr);
    if (len >= sizeof(buf))
        return _fail(err, errlen, "--dl-train value is %zu bytes, longer than the %d allowed", len, DLT_OPTS_MAX - 1);
    memcpy(buf, optstr, len + 1);
    if (buf[0] == ',' || buf[len - 1] == ',' || strstr(buf, ",,"))
        return _fail(err, errlen, "--dl-train='%.64s': empty option in the comma list (valid: %s)", optstr,
                     USER_KEYS);

    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        const char *val = eq ? eq + 1 : NULL;
        if (eq)
            *eq = '\0';
        if (!strcmp(tok, "verbose") && !val) {
            opts->verbose = 1;
        } else if (!strcmp(tok, "bind") && val) {
            if (_parse_bind(val, &opts->bind))
                return _fail(err, errlen, "--dl-train: bad value 'bind=%.64s' (valid: bind=closest|none)", val);
            if (opts->bind == DLT_BIND_NONE && !site->allow_bind_none)
                return _fail(err, errlen, "--dl-train: 'bind=none' is disabled on this cluster (allow_bind_none=no)");
        } else if (!strcmp(tok, "gpus") && val) {
            if (!strcmp(val, "task"))
                opts->gpus = DLT_GPUS_TASK;
            else if (!strcmp(val, "step"))
                opts->gpus = DLT_GPUS_STEP;
            else
                return _fail(err, errlen, "--dl-train: bad value 'gpus=%.64s' (valid: gpus=task|step)", val);
        } else if (!strcmp(tok, "nccl") && val) {
            if (_parse_nccl(val, &opts->nccl))
                return _fail(err, errlen, "--dl-train: bad value 'nccl=%.64s' (valid: nccl=auto|off)", val);
        } else if (!strcmp(tok, "nic") && val) {
            if (!strcmp(val, "auto"))
                opts->nic[0] = '\0';
            else if (dlt_valid_name(val, 0))
                snprintf(opts->nic, sizeof(opts->nic), "%s", val);
            else
                return _fail(err, errlen,
                             "--dl-train: bad value 'nic=%.64s' (valid: nic=auto or an interface/HCA name of "
                             "[A-Za-z0-9_.:-], at most %d characters)",
                             val, DLT_NAME_MAX - 1);
        } else {
            return _fail(err, errlen, "--dl-train: unknown option '%.64s%s%.64s' (valid: %s)", tok, val ? "=" : "",
                         val ? val : "", USER_KEYS);
        }
    }
    return 0;
}

int dlt_user_opts_format(const dlt_user_opts *opts, char *buf, size_t buflen)
{
    int n = snprintf(buf, buflen, "bind=%s,gpus=%s,nccl=%s,nic=%s%s", opts->bind == DLT_BIND_NONE ? "none" : "closest",
                     opts->gpus == DLT_GPUS_STEP ? "step" : "task", opts->nccl == DLT_NCCL_OFF ? "off" : "auto",
                     opts->nic[0] ? opts->nic : "auto", opts->verbose ? ",verbose" : "");
    return (n < 0 || (size_t)n >= buflen) ? -ENOSPC : 0;
}
