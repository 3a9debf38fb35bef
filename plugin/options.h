/* SPDX-License-Identifier: Apache-2.0 */
/* options: the --dl-train=OPTS grammar and the plugstack.conf site arguments.
 * Pure parsing into plain structs; nothing here touches Slurm, so tests and fuzzers call it directly. */
#ifndef DLT_PLUGIN_OPTIONS_H
#define DLT_PLUGIN_OPTIONS_H

#include "common/status.h"
#include <stddef.h>

/* Longest --dl-train value accepted; anything longer is refused, never truncated. */
#define DLT_OPTS_MAX 1024
#define DLT_NAME_MAX 64  /* NIC / HCA names and comma lists of them */
#define DLT_PATH_MAX 256 /* site paths (topo_dir, nvml_lib) */
#define DLT_ERR_MAX 512

typedef enum { DLT_BIND_CLOSEST = 0, DLT_BIND_NONE = 1 } dlt_bind_mode;
typedef enum { DLT_NCCL_AUTO = 0, DLT_NCCL_OFF = 1 } dlt_nccl_mode;
typedef enum { DLT_ENABLE_OPTIN = 0, DLT_ENABLE_ALWAYS = 1 } dlt_enable_mode;
/* gpus=: a task sees only its GPU, or every GPU of the step with its own first (CUDA IPC/P2P);
 * none: a CPU step (no GPU binding, no NCCL setup; CPU/NUMA binding and the rank contract only),
 * which must be asked for: a step without GPUs is otherwise refused (a forgotten --gpus-per-node). */
typedef enum { DLT_GPUS_TASK = 0, DLT_GPUS_STEP = 1, DLT_GPUS_NONE = 2 } dlt_gpus_mode;

/* Site configuration from plugstack.conf: defaults and limits for every step. */
typedef struct {
    dlt_bind_mode default_bind;
    dlt_nccl_mode default_nccl;
    dlt_enable_mode enable;
    int allow_bind_none;           /* site may forbid users turning binding off */
    char topo_dir[DLT_PATH_MAX];   /* parent of step directories (root-owned, not user-writable) */
    char nvml_lib[DLT_PATH_MAX];   /* dlopen name/path of NVML */
    char sysfs_root[DLT_PATH_MAX]; /* where sys/ and proc/ are read ("/"); fixtures in tests */
    dlt_gpus_mode default_gpus;    /* default_gpus=task|step */
    char nccl_socket_ifname[DLT_NAME_MAX];
    char nccl_ib_hca[DLT_NAME_MAX];
    /* cpu_partitions=: partitions where a step without gpus= runs as gpus=none ("" none) */
    char cpu_partitions[DLT_PATH_MAX];
} dlt_site_conf;

/* What the user asked for with --dl-train=OPTS, after site defaults. */
typedef struct {
    int requested; /* --dl-train given (or enable=always) */
    dlt_bind_mode bind;
    dlt_nccl_mode nccl;
    char nic[DLT_NAME_MAX]; /* "" = auto */
    dlt_gpus_mode gpus;     /* gpus=task|step|none */
    int gpus_given;         /* gpus= was in OPTS (not the site default): the user asked for it */
    int verbose;
} dlt_user_opts;

void dlt_site_conf_defaults(dlt_site_conf *site);

/* Parses plugstack.conf arguments (key=value each). Unknown keys and bad values are errors:
 * a typo in a site file must not silently change every job. Returns 0 or -EINVAL with err filled. */
int dlt_site_conf_parse(dlt_site_conf *site, int argc, char *const argv[], dlt_err *err);

/* Every site setting as "key=value ..." in the order of the keys, unset names as (unset), for
 * dltrain-topo --check-plugstack. Returns 0 or -ENOSPC. */
int dlt_site_conf_format(const dlt_site_conf *site, char *buf, size_t buflen);

/* Applies site defaults to opts, then parses OPTS (may be NULL or "" for plain --dl-train).
 * Returns 0 or -EINVAL with err naming the bad token and the valid ones. */
int dlt_user_opts_parse(dlt_user_opts *opts, const dlt_site_conf *site, const char *optstr, dlt_err *err);

/* One --dl-train key: its values ("closest|none"; NULL: a bare word such as verbose), what it
 * sets (0, -EINVAL for a bad value, -EPERM when the site forbids it) and the valid values as a
 * refusal names them. */
typedef struct {
    const char *key;
    const char *values;
    int (*set)(dlt_user_opts *opts, const dlt_site_conf *site, const char *val);
    const char *valid;
} dlt_user_key;

/* The --dl-train keys, and how many. */
const dlt_user_key *dlt_user_keys(size_t *count);

/* "bind=closest|none, gpus=task|step, ...": every key with its values, for refusals and usage. */
int dlt_user_keys_text(char *buf, size_t len);

/* The --dl-train option's usage text for srun --help, with every key. Returns 0 or -ENOSPC. */
int dlt_user_opts_usage(char *buf, size_t len);

/* Canonical text of opts ("bind=closest,nccl=auto,nic=auto"), for logs and DLT_OPTS. */
int dlt_user_opts_format(const dlt_user_opts *opts, char *buf, size_t buflen);

/* A NIC/HCA/interface name: 1..63 chars of [A-Za-z0-9_.:-]. Also used for comma lists when
 * allow_comma is set (NCCL_IB_HCA=mlx5_0,mlx5_1). */
int dlt_valid_name(const char *s, int allow_comma);

#endif
