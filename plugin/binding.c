/* SPDX-License-Identifier: Apache-2.0 */
/* binding: pure functions from a topology, the step's GPUs and a local rank to GPU, CPUs, NIC. */
#include "binding.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Splits a comma list of small non-negative integers. Returns the count or -1. */
static int _parse_index_list(const char *s, int out[], char labels[][8], int max)
{
    int n = 0;
    const char *p = s;
    if (!s || !*s)
        return 0;
    while (*p) {
        char *end;
        long v;
        if (!isdigit((unsigned char)*p) || n >= max)
            return -1;
        v = strtol(p, &end, 10);
        if (v < 0 || v > 4095 || end - p > 4)
            return -1;
        if (labels)
            snprintf(labels[n], 8, "%ld", v);
        out[n++] = (int)v;
        p = end;
        if (*p == ',')
            p++;
        else if (*p)
            return -1;
    }
    return n;
}

static int _gpu_by_gres_index(const dlt_topology *t, int idx)
{
    int sorted[DLT_MAX_GPUS];
    for (int i = 0; i < t->ngpus; i++)
        if (t->gpus[i].minor == idx)
            return i;
    /* No such minor: the idx-th GPU by PCI bus id. */
    for (int i = 0; i < t->ngpus; i++)
        sorted[i] = i;
    for (int i = 1; i < t->ngpus; i++)
        for (int j = i; j > 0 && strcmp(t->gpus[sorted[j - 1]].busid, t->gpus[sorted[j]].busid) > 0; j--) {
            int tmp = sorted[j];
            sorted[j] = sorted[j - 1];
            sorted[j - 1] = tmp;
        }
    return idx < t->ngpus ? sorted[idx] : -1;
}

int dlt_step_gpus_resolve(const dlt_topology *t, const char *cuda_visible, const char *step_gpus, dlt_step_gpus *out,
                          dlt_err *err)
{
    int vis[DLT_MAX_GPUS], gres[DLT_MAX_GPUS], nvis, ngres;
    memset(out, 0, sizeof(*out));
    nvis = _parse_index_list(cuda_visible, vis, out->label, DLT_MAX_GPUS);
    if (nvis < 0) {
        return dlt_fail(err, -EINVAL, "CUDA_VISIBLE_DEVICES='%.64s' is not a list of GPU indices", cuda_visible);
    }
    ngres = step_gpus && *step_gpus ? _parse_index_list(step_gpus, gres, NULL, DLT_MAX_GPUS) : -2;
    if (ngres == -1 || (ngres >= 0 && ngres != nvis)) {
        /* Slurm's two lists disagree (e.g. a user rewrote one): trust the visible list alone. */
        ngres = -2;
    }
    for (int i = 0; i < nvis; i++) {
        int idx = ngres >= 0 ? gres[i] : vis[i];
        int g = _gpu_by_gres_index(t, idx);
        if (g < 0) {
            return dlt_fail(err, -ENODEV,
                            "the step's GPU %d (CUDA_VISIBLE_DEVICES=%.64s) is not among the %d GPUs NVML sees", idx,
                            cuda_visible, t->ngpus);
        }
        out->topo[i] = g;
    }
    out->n = nvis;
    dlt_step_gpus_order(t, out);
    return 0;
}

void dlt_step_gpus_order(const dlt_topology *t, dlt_step_gpus *s)
{
    int used[DLT_MAX_GPUS] = {0};
    int cur = 0;
    if (s->n == 0)
        return;
    s->order[0] = 0;
    used[0] = 1;
    for (int k = 1; k < s->n; k++) {
        int best = -1, best_links = -1;
        dlt_distance best_dist = DLT_DIST_SYS;
        for (int j = 0; j < s->n; j++) {
            int links;
            dlt_distance d;
            if (used[j])
                continue;
            links = t->gpus[s->topo[cur]].nvlink_to_gpu[s->topo[j]];
            d = dlt_topo_gpu_distance(t, s->topo[cur], s->topo[j]);
            if (links > best_links || (links == best_links && d < best_dist)) {
                best = j;
                best_links = links;
                best_dist = d;
            }
        }
        if (best < 0)
            break; /* cannot happen: k < n leaves an unused GPU */
        s->order[k] = best;
        used[best] = 1;
        cur = best;
    }
}

static int _find_nic(const dlt_topology *t, const char *name)
{
    for (int i = 0; i < t->nnics; i++)
        if (!strcmp(t->nics[i].name, name) || (t->nics[i].netdev[0] && !strcmp(t->nics[i].netdev, name)))
            return i;
    return -1;
}

/* Nearest NIC to a PCI device: up before down, then distance, InfiniBand before Ethernet,
 * faster before slower, then name. */
static int _nearest_nic(const dlt_topology *t, int pci, dlt_distance *dist)
{
    int best = -1;
    dlt_distance bd = DLT_DIST_SYS;
    for (int i = 0; i < t->nnics; i++) {
        const dlt_nic *n = &t->nics[i], *b = best >= 0 ? &t->nics[best] : NULL;
        dlt_distance d = dlt_topo_pci_distance(t, pci, n->pci);
        int better;
        if (!b)
            better = 1;
        else if (n->up != b->up)
            better = n->up > b->up;
        else if (d != bd)
            better = d < bd;
        else if (n->is_ib != b->is_ib)
            better = n->is_ib > b->is_ib;
        else if (n->speed_mbps != b->speed_mbps)
            better = n->speed_mbps > b->speed_mbps;
        else
            better = strcmp(n->name, b->name) < 0;
        if (better) {
            best = i;
            bd = d;
        }
    }
    *dist = bd;
    return best;
}

int dlt_binding_choose(const dlt_topology *t, const dlt_step_gpus *s, int local_rank, const dlt_cpuset *allowed,
                       const char *nic_name, dlt_binding *out, dlt_err *err)
{
    memset(out, 0, sizeof(*out));
    out->gpu_pos = -1;
    out->gpu = -1;
    out->nic = -1;
    out->nic_distance = DLT_DIST_SYS;
    if (local_rank < 0) {
        return dlt_fail(err, -EINVAL, "invalid local rank %d", local_rank);
    }
    out->cpus = *allowed;
    if (s->n > 0) {
        const dlt_gpu *g;
        dlt_cpuset both;
        out->gpu_pos = s->order[local_rank % s->n];
        out->gpu = s->topo[out->gpu_pos];
        g = &t->gpus[out->gpu];
        dlt_cpuset_and(&both, &g->local_cpus, allowed);
        if (dlt_cpuset_count(&both) > 0) {
            out->cpus = both;
            out->cpus_numa_local = 1;
        }
    }
    if (nic_name && *nic_name) {
        out->nic = _find_nic(t, nic_name);
        if (out->nic < 0) {
            char have[256] = "";
            size_t used = 0;
            for (int i = 0; i < t->nnics && used < sizeof(have); i++) {
                int w = snprintf(have + used, sizeof(have) - used, "%s%s", i ? ", " : "", t->nics[i].name);
                if (w > 0)
                    used += (size_t)w;
            }
            return dlt_fail(err, -ENODEV, "nic=%s: no such HCA or interface on this node (found: %s)", nic_name,
                            t->nnics ? have : "none");
        }
        out->nic_distance =
            out->gpu >= 0 ? dlt_topo_pci_distance(t, t->gpus[out->gpu].pci, t->nics[out->nic].pci) : DLT_DIST_SYS;
    } else if (t->nnics > 0) {
        out->nic = _nearest_nic(t, out->gpu >= 0 ? t->gpus[out->gpu].pci : -1, &out->nic_distance);
    }
    return 0;
}

int dlt_binding_cuda_visible(const dlt_step_gpus *s, const dlt_binding *b, int all_step_gpus, char *buf, size_t buflen)
{
    size_t used;
    int n;
    if (b->gpu_pos < 0 || !buflen)
        return -EINVAL;
    n = snprintf(buf, buflen, "%s", s->label[b->gpu_pos]);
    if (n < 0 || (size_t)n >= buflen)
        return -ENOSPC;
    used = (size_t)n;
    for (int k = 0; all_step_gpus && k < s->n; k++) {
        int pos = s->order[k];
        if (pos == b->gpu_pos)
            continue;
        n = snprintf(buf + used, buflen - used, ",%s", s->label[pos]);
        if (n < 0 || (size_t)n >= buflen - used)
            return -ENOSPC;
        used += (size_t)n;
    }
    return 0;
}

int dlt_binding_numa_cpus(const dlt_topology *t, int local_rank, int local_count, const dlt_cpuset *allowed,
                          dlt_cpuset *out)
{
    int numa;
    dlt_cpuset both;
    *out = *allowed;
    if (t->nnuma < 2 || local_count < 1 || local_rank < 0 || local_rank >= local_count)
        return -1;
    numa = (int)((long)local_rank * t->nnuma / local_count);
    dlt_cpuset_and(&both, &t->numa_cpus[numa], allowed);
    if (dlt_cpuset_count(&both) == 0)
        return -1;
    *out = both;
    return numa;
}

int dlt_partition_listed(const char *list, const char *partition)
{
    size_t n = partition ? strlen(partition) : 0;
    for (const char *p = list; n && p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
        if (!strncmp(p, partition, n) && (p[n] == ',' || p[n] == '\0'))
            return 1;
    return 0;
}

int dlt_gpus_decide(const dlt_user_opts *opts, const dlt_site_conf *site, const char *partition, int step_has_gpus,
                    int have_nvml, int node_gpus, dlt_gpus_mode *out, char *why, size_t len)
{
    const char *asked = opts->gpus == DLT_GPUS_STEP ? "step" : "task";
    why[0] = '\0';
    *out = opts->gpus;
    if (opts->gpus_given) {
        if (opts->gpus == DLT_GPUS_NONE)
            return 0;
        if (!step_has_gpus) {
            snprintf(why, len,
                     "--dl-train=gpus=%s asks for GPUs but this step has none on this node: add --gpus-per-node=N "
                     "(or --gres=gpu:N, --gpus-per-task=1), or leave gpus= out (a node without GPUs then runs the "
                     "step as gpus=none)",
                     asked);
            return -EINVAL;
        }
        if (have_nvml && node_gpus == 0) {
            snprintf(why, len,
                     "--dl-train=gpus=%s asks for GPUs but this node has none (NVML counts 0): run the step on GPU "
                     "nodes, or use gpus=none",
                     asked);
            return -EINVAL;
        }
        return 0;
    }
    if (partition && dlt_partition_listed(site->cpu_partitions, partition)) {
        *out = DLT_GPUS_NONE;
        snprintf(why, len, "partition %.64s is one of the site's cpu_partitions: gpus=none", partition);
        return 0;
    }
    if (step_has_gpus)
        return 0;
    if (node_gpus == 0) {
        *out = DLT_GPUS_NONE;
        snprintf(why, len, "no GPU on this node: gpus=none (%s; the step requests no GPUs)",
                 have_nvml ? "NVML counts 0 GPUs" : "no NVML: no GPU driver");
        return 0;
    }
    snprintf(why, len,
             "--dl-train needs GPUs but this step requests none and this node has %d GPU(s): add --gpus-per-node=N "
             "(or --gres=gpu:N, --gpus-per-task=1); a CPU step says so with --dl-train=gpus=none",
             node_gpus);
    return -EINVAL;
}
