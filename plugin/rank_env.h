/* SPDX-License-Identifier: Apache-2.0 */
/* rank_env: the torch.distributed rank contract a task gets from the plugin (RANK, WORLD_SIZE,
 * LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT): pure rules over Slurm's
 * values, so any env:// program (PyTorch, Lightning, JAX) starts without a hand-written snippet. */
#ifndef DLT_RANK_ENV_H
#define DLT_RANK_ENV_H

#include <stddef.h>
#include <stdint.h>

/* The derived port range, used when the step has no reserved ports. Below Linux's ephemeral range
 * (32768-60999), above the usual services. */
#define DLT_PORT_BASE 20000
#define DLT_PORT_SPAN 10000

/* MASTER_PORT: the first of the step's reserved ports (SLURM_STEP_RESV_PORTS: "12000-12003" or
 * "12000,12005", *reserved 1) when resv names one, else the derived port (*reserved 0). -EINVAL
 * for a reserved list that does not start with a port (1..65535). */
int dlt_rank_port(const char *resv, uint32_t job, uint32_t step, int *port, int *reserved);

/* The derived port: base + (mix64(job) + step) mod span. Steps of one job get consecutive ports
 * (never the same one within DLT_PORT_SPAN steps); any two steps of different jobs get the same
 * port with probability 1 / DLT_PORT_SPAN, whatever their ids. */
int dlt_rank_port_derived(uint32_t job, uint32_t step);

/* The record of what the plugin set in a task (DLT_SET, with DLT_STEP=job.step beside it), so that a
 * step started from inside that task (a nested srun, an sbatch) can tell the outer step's values,
 * inherited through the environment, from the user's: "NAME:hash,NAME:hash", a hash per value
 * (FNV-1a, 16 hex digits), never the values themselves. */
#define DLT_ENV_RECORD_MAX 1024

/* FNV-1a 64 of a value as recorded. */
uint64_t dlt_env_value_hash(const char *value);

/* Appends name (letters, digits, '_', under 64 bytes) and value's hash to rec. 0, -EINVAL for a
 * name outside that, or -ENOSPC (rec unchanged). */
int dlt_env_record_add(char *rec, size_t len, const char *name, const char *value);

/* The next entry of a record at *cursor: 1 with name and hash filled and *cursor moved on, 0 at the
 * end, -EINVAL for a malformed entry (the rest of the record is then not trusted). */
int dlt_env_record_next(const char **cursor, char *name, size_t namelen, uint64_t *hash);

#endif
