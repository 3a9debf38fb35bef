/* SPDX-License-Identifier: Apache-2.0 */
/* options: the --dl-train=OPTS grammar and the plugstack.conf site arguments.
 * Every string here may come from a user and is read in slurmstepd as root: bounded, validated. */
#include "options.h"
#include "text_escape.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

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

/* The characters of a NIC, HCA, interface or partition name: [A-Za-z0-9_.:-], and ',' in lists. */
static int _name_char(char c, int allow_comma)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
           c == ':' || c == '-' || (allow_comma && c == ',');
}

/* Whether every character of s is a name character or a comma. */
static int _name_list_chars(const char *s)
{
    while (*s && _name_char(*s, 1))
        s++;
    return *s == '\0';
}

int dlt_valid_name(const char *s, int allow_comma)
{
    size_t n = 0;
    if (!s || !*s)
        return 0;
    for (; s[n]; n++)
        if (!_name_char(s[n], allow_comma) || n >= DLT_NAME_MAX - 1)
            return 0;
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

#define SITE_KEYS                                                                                                      \
    "default_bind, default_nccl, default_gpus, enable, allow_bind_none, topo_dir, nvml_lib, sysfs_root, "              \
    "nccl_socket_ifname, nccl_ib_hca, cpu_partitions"

static int _site_conf_parse_into(dlt_site_conf *site, int argc, char *const argv[], dlt_err *err)
{
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        const char *eq = arg ? strchr(arg, '=') : NULL;
        char key[32];
        const char *val;
        if (!eq || eq == arg || (size_t)(eq - arg) >= sizeof(key))
            return dlt_fail(err, -EINVAL, "plugstack.conf argument '%.64s' is not key=value (keys: %s)", arg ? arg : "",
                            SITE_KEYS);
        memcpy(key, arg, (size_t)(eq - arg));
        key[eq - arg] = '\0';
        val = eq + 1;
        /* A key given twice is a mistake to say, not a last-one-wins that hides the first. */
        for (int j = 0; j < i; j++)
            if (argv[j] && !strncmp(argv[j], arg, (size_t)(eq - arg) + 1))
                return dlt_fail(err, -EINVAL, "plugstack.conf: %.31s given twice ('%.64s' and '%.64s'): keep one", key,
                                argv[j], arg);
        if (!strcmp(key, "default_bind")) {
            if (_parse_bind(val, &site->default_bind))
                return dlt_fail(err, -EINVAL, "plugstack.conf default_bind='%.64s' invalid (closest|none)", val);
        } else if (!strcmp(key, "default_nccl")) {
            if (_parse_nccl(val, &site->default_nccl))
                return dlt_fail(err, -EINVAL, "plugstack.conf default_nccl='%.64s' invalid (auto|off)", val);
        } else if (!strcmp(key, "enable")) {
            if (!strcmp(val, "optin"))
                site->enable = DLT_ENABLE_OPTIN;
            else if (!strcmp(val, "always"))
                site->enable = DLT_ENABLE_ALWAYS;
            else
                return dlt_fail(err, -EINVAL, "plugstack.conf enable='%.64s' invalid (optin|always)", val);
        } else if (!strcmp(key, "allow_bind_none")) {
            if (_parse_bool(val, &site->allow_bind_none))
                return dlt_fail(err, -EINVAL, "plugstack.conf allow_bind_none='%.64s' invalid (yes|no)", val);
        } else if (!strcmp(key, "topo_dir")) {
            if (!_valid_path(val) || val[0] != '/')
                return dlt_fail(err, -EINVAL, "plugstack.conf topo_dir='%.64s' must be an absolute path under %d bytes",
                                val, DLT_PATH_MAX);
            snprintf(site->topo_dir, sizeof(site->topo_dir), "%s", val);
        } else if (!strcmp(key, "nvml_lib")) {
            if (!_valid_path(val))
                return dlt_fail(err, -EINVAL, "plugstack.conf nvml_lib='%.64s' invalid", val);
            snprintf(site->nvml_lib, sizeof(site->nvml_lib), "%s", val);
        } else if (!strcmp(key, "sysfs_root")) {
            if (!_valid_path(val) || val[0] != '/')
                return dlt_fail(err, -EINVAL, "plugstack.conf sysfs_root='%.64s' must be an absolute path", val);
            snprintf(site->sysfs_root, sizeof(site->sysfs_root), "%s", val);
        } else if (!strcmp(key, "default_gpus")) {
            if (!strcmp(val, "task"))
                site->default_gpus = DLT_GPUS_TASK;
            else if (!strcmp(val, "step"))
                site->default_gpus = DLT_GPUS_STEP;
            else
                return dlt_fail(err, -EINVAL, "plugstack.conf default_gpus='%.64s' invalid (task|step)", val);
        } else if (!strcmp(key, "cpu_partitions")) {
            /* Slurm's partition names: no spaces or commas; a list of them, none empty. */
            size_t n = strlen(val);
            char shown[80];
            if (!_name_list_chars(val) || n == 0 || n >= sizeof(site->cpu_partitions) || val[0] == ',' ||
                val[n - 1] == ',' || strstr(val, ",,")) {
                dlt_name_escape(val, shown, sizeof(shown));
                return dlt_fail(err, -EINVAL,
                                "plugstack.conf cpu_partitions='%s' invalid (a comma list of partition names of "
                                "[A-Za-z0-9_.:-], under %d bytes, e.g. cpu_partitions=cpu,debug)",
                                shown, DLT_PATH_MAX);
            }
            snprintf(site->cpu_partitions, sizeof(site->cpu_partitions), "%s", val);
        } else if (!strcmp(key, "nccl_socket_ifname")) {
            if (!dlt_valid_name(val, 1))
                return dlt_fail(err, -EINVAL, "plugstack.conf nccl_socket_ifname='%.64s' invalid", val);
            snprintf(site->nccl_socket_ifname, sizeof(site->nccl_socket_ifname), "%s", val);
        } else if (!strcmp(key, "nccl_ib_hca")) {
            if (!dlt_valid_name(val, 1))
                return dlt_fail(err, -EINVAL, "plugstack.conf nccl_ib_hca='%.64s' invalid", val);
            snprintf(site->nccl_ib_hca, sizeof(site->nccl_ib_hca), "%s", val);
        } else {
            return dlt_fail(err, -EINVAL, "plugstack.conf: unknown argument '%.31s' (keys: %s)", key, SITE_KEYS);
        }
    }
    return 0;
}

int dlt_site_conf_parse(dlt_site_conf *site, int argc, char *const argv[], dlt_err *err)
{
    dlt_site_conf parsed;
    int rc;
    /* All or nothing: a refused line leaves the defaults, never a half-applied configuration. */
    dlt_site_conf_defaults(&parsed);
    rc = _site_conf_parse_into(&parsed, argc, argv, err);
    if (rc == 0)
        *site = parsed;
    else
        dlt_site_conf_defaults(site);
    return rc;
}

/* ---- --dl-train keys: each key's grammar and usage beside its handler; the parser, the option's
 * usage text in srun --help and the valid-keys list of every refusal read this table. */

static int _key_bind(dlt_user_opts *opts, const dlt_site_conf *site, const char *val)
{
    if (_parse_bind(val, &opts->bind))
        return -EINVAL;
    return opts->bind == DLT_BIND_NONE && !site->allow_bind_none ? -EPERM : 0;
}

static int _key_gpus(dlt_user_opts *opts, const dlt_site_conf *site, const char *val)
{
    (void)site;
    if (strcmp(val, "task") && strcmp(val, "step") && strcmp(val, "none"))
        return -EINVAL;
    opts->gpus = !strcmp(val, "step") ? DLT_GPUS_STEP : !strcmp(val, "none") ? DLT_GPUS_NONE : DLT_GPUS_TASK;
    opts->gpus_given = 1;
    return 0;
}

static int _key_nccl(dlt_user_opts *opts, const dlt_site_conf *site, const char *val)
{
    (void)site;
    return _parse_nccl(val, &opts->nccl) ? -EINVAL : 0;
}

static int _key_nic(dlt_user_opts *opts, const dlt_site_conf *site, const char *val)
{
    (void)site;
    if (!strcmp(val, "auto"))
        opts->nic[0] = '\0';
    else if (dlt_valid_name(val, 0))
        snprintf(opts->nic, sizeof(opts->nic), "%s", val);
    else
        return -EINVAL;
    return 0;
}

static int _key_verbose(dlt_user_opts *opts, const dlt_site_conf *site, const char *val)
{
    (void)site, (void)val;
    opts->verbose = 1;
    return 0;
}

static const dlt_user_key g_user_keys[] = {
    {"bind", "closest|none", _key_bind, "bind=closest|none"},
    {"gpus", "task|step|none", _key_gpus, "gpus=task|step|none"},
    {"nccl", "auto|off", _key_nccl, "nccl=auto|off"},
    {"nic", "auto|NAME", _key_nic, "nic=auto or an interface/HCA name of [A-Za-z0-9_.:-], at most 63 characters"},
    {"verbose", NULL, _key_verbose, "verbose"},
};
_Static_assert(DLT_NAME_MAX - 1 == 63, "the nic key's usage says 63 characters");

const dlt_user_key *dlt_user_keys(size_t *count)
{
    *count = sizeof(g_user_keys) / sizeof(g_user_keys[0]);
    return g_user_keys;
}

int dlt_user_keys_text(char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof(g_user_keys) / sizeof(g_user_keys[0]); i++) {
        const dlt_user_key *k = &g_user_keys[i];
        int w = snprintf(buf + n, len - n, "%s%s%s%s", i ? ", " : "", k->key, k->values ? "=" : "",
                         k->values ? k->values : "");
        if (w < 0 || (size_t)w >= len - n)
            return -ENOSPC;
        n += (size_t)w;
    }
    return 0;
}

int dlt_user_opts_usage(char *buf, size_t len)
{
    char keys[256];
    int n;
    if (dlt_user_keys_text(keys, sizeof(keys)) != 0)
        return -ENOSPC;
    n = snprintf(buf, len,
                 "Set up this step for data-parallel training: bind each task to its GPU and NUMA-local CPUs, write "
                 "the NCCL topology, pick the NIC. OPTS is a comma list of %s. See spank_dltrain(8).",
                 keys);
    return n < 0 || (size_t)n >= len ? -ENOSPC : 0;
}

int dlt_user_opts_parse(dlt_user_opts *opts, const dlt_site_conf *site, const char *optstr, dlt_err *err)
{
    char buf[DLT_OPTS_MAX], keys[256], shown[80], shown_val[80];
    char *save = NULL;
    size_t len;

    memset(opts, 0, sizeof(*opts));
    opts->requested = 1;
    opts->bind = site->default_bind;
    opts->nccl = site->default_nccl;
    opts->gpus = site->default_gpus;
    if (!optstr || !*optstr)
        return 0;
    (void)dlt_user_keys_text(keys, sizeof(keys));
    len = strlen(optstr);
    if (len >= sizeof(buf))
        return dlt_fail(err, -EINVAL, "--dl-train value is %zu bytes, longer than the %d allowed", len,
                        DLT_OPTS_MAX - 1);
    memcpy(buf, optstr, len + 1);
    /* Every piece of the value in a message is escaped: the value may come from the environment
     * (_SLURM_SPANK_OPTION_dltrain_dl_train) unchecked by srun, and the message reaches slurmd's log
     * from root's slurmstepd, where a newline would forge a line. */
    if (buf[0] == ',' || buf[len - 1] == ',' || strstr(buf, ",,")) {
        dlt_name_escape(optstr, shown, sizeof(shown));
        return dlt_fail(err, -EINVAL, "--dl-train='%s': empty option in the comma list (valid: %s)", shown, keys);
    }

    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        const char *val = eq ? eq + 1 : NULL;
        const dlt_user_key *k = NULL;
        int rc;
        if (eq)
            *eq = '\0';
        for (size_t i = 0; i < sizeof(g_user_keys) / sizeof(g_user_keys[0]) && !k; i++)
            if (!strcmp(tok, g_user_keys[i].key) && !val == !g_user_keys[i].values)
                k = &g_user_keys[i];
        dlt_name_escape(tok, shown, sizeof(shown));
        dlt_name_escape(val ? val : "", shown_val, sizeof(shown_val));
        if (!k)
            return dlt_fail(err, -EINVAL, "--dl-train: unknown option '%s%s%s' (valid: %s)", shown, val ? "=" : "",
                            shown_val, keys);
        if ((rc = k->set(opts, site, val)) == -EPERM)
            return dlt_fail(err, -EINVAL, "--dl-train: '%s=%s' is disabled on this cluster (allow_bind_none=no)", shown,
                            shown_val);
        if (rc != 0)
            return dlt_fail(err, -EINVAL, "--dl-train: bad value '%s=%s' (valid: %s)", shown, shown_val, k->valid);
    }
    return 0;
}

int dlt_user_opts_format(const dlt_user_opts *opts, char *buf, size_t buflen)
{
    int n = snprintf(buf, buflen, "bind=%s,gpus=%s,nccl=%s,nic=%s%s", opts->bind == DLT_BIND_NONE ? "none" : "closest",
                     opts->gpus == DLT_GPUS_STEP   ? "step"
                     : opts->gpus == DLT_GPUS_NONE ? "none"
                                                   : "task",
                     opts->nccl == DLT_NCCL_OFF ? "off" : "auto", opts->nic[0] ? opts->nic : "auto",
                     opts->verbose ? ",verbose" : "");
    return (n < 0 || (size_t)n >= buflen) ? -ENOSPC : 0;
}

int dlt_site_conf_format(const dlt_site_conf *site, char *buf, size_t buflen)
{
    int n = snprintf(
        buf, buflen,
        "default_bind=%s default_nccl=%s default_gpus=%s enable=%s allow_bind_none=%s topo_dir=%s "
        "nvml_lib=%s sysfs_root=%s nccl_socket_ifname=%s nccl_ib_hca=%s cpu_partitions=%s",
        site->default_bind == DLT_BIND_NONE ? "none" : "closest", site->default_nccl == DLT_NCCL_OFF ? "off" : "auto",
        site->default_gpus == DLT_GPUS_STEP ? "step" : "task", site->enable == DLT_ENABLE_ALWAYS ? "always" : "optin",
        site->allow_bind_none ? "yes" : "no", site->topo_dir, site->nvml_lib, site->sysfs_root,
        site->nccl_socket_ifname[0] ? site->nccl_socket_ifname : "(unset)",
        site->nccl_ib_hca[0] ? site->nccl_ib_hca : "(unset)",
        site->cpu_partitions[0] ? site->cpu_partitions : "(unset)");
    return (n < 0 || (size_t)n >= buflen) ? -ENOSPC : 0;
}
