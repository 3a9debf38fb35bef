/* SPDX-License-Identifier: Apache-2.0 */
/* dltrain-topo: drives the plugin's discovery, binding and NCCL XML code outside Slurm, on a fixture
 * (fake NVML + sysfs tree) or the real node, for the tests and for site administrators checking
 * what the plugin will do on a node.
 *   dltrain-topo NVML_LIB SYSFS_ROOT xml|matrix
 *   dltrain-topo NVML_LIB SYSFS_ROOT bind CUDA_VISIBLE_DEVICES SLURM_STEP_GPUS LOCAL_RANK ALLOWED_CPUS [NIC]
 *   dltrain-topo --check-plugstack [FILE] */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/node_name.h"
#include "plugin/binding.h"
#include "plugin/nccl_topo_xml.h"
#include "plugin/nvml_loader.h"
#include "plugin/options.h"
#include "plugin/plugstack_conf.h"
#include "plugin/text_escape.h"
#include "plugin/topo_report.h"
#include "plugin/topology.h"

static const char g_usage[] =
    "usage: dltrain-topo NVML_LIB SYSFS_ROOT matrix\n"
    "       dltrain-topo NVML_LIB SYSFS_ROOT xml\n"
    "       dltrain-topo NVML_LIB SYSFS_ROOT bind CUDA_VISIBLE_DEVICES SLURM_STEP_GPUS LOCAL_RANK ALLOWED_CPUS [NIC]\n"
    "       dltrain-topo --check-plugstack [FILE]\n"
    "\n"
    "What the dltrain SPANK plugin discovers and chooses on this node, outside Slurm (any user):\n"
    "  matrix  the GPUs, NICs and NUMA nodes and their distances (as --dl-train=verbose shows)\n"
    "  xml     the NCCL topology file the plugin writes (NCCL_TOPO_FILE)\n"
    "  bind    one task's GPU, CPUs and NIC for the step's GPUs and its local rank\n"
    "  --check-plugstack  the plugstack.conf lines that load spank_dltrain.so (following includes), each\n"
    "           with its arguments parsed as the plugin parses them: FILE:LINE: OK and the settings, or the\n"
    "           error; exit 1 on a bad line. Run it before slurmd's next step reads an edited file.\n"
    "           FILE: PlugStackConfig from slurm.conf ($SLURM_CONF, else " DLT_SLURM_SYSCONFDIR "/slurm.conf),\n"
    "           else plugstack.conf beside slurm.conf, as Slurm finds it.\n"
    "NVML_LIB: normally libnvidia-ml.so.1 (the plugin's nvml_lib=); SYSFS_ROOT: normally / (sysfs_root=).\n"
    "Example: dltrain-topo libnvidia-ml.so.1 / matrix     See dltrain-topo(8).\n";

/* One line that loads the plugin: its arguments through the plugin's own parser. 0 good, 1 bad. */
static int _check_hit(const dlt_plugstack_hit *h)
{
    char file[256], path[256], settings[1024];
    dlt_site_conf site;
    dlt_err err = DLT_ERR_INIT;
    dlt_name_escape(h->file, file, sizeof(file));
    dlt_name_escape(h->path, path, sizeof(path));
    if (h->argc_total > h->argc) {
        printf("%s:%d: %d arguments, more than the %d the plugin's check reads: keep one key=value per setting\n", file,
               h->line, h->argc_total, DLT_PS_ARGS_MAX);
        return 1;
    }
    if (dlt_site_conf_parse(&site, h->argc, h->argv, &err) != 0) {
        char words[DLT_ERR_MAX * 2];
        dlt_name_escape(err.msg, words, sizeof(words));
        printf("%s:%d: %s\n", file, h->line, words);
        return 1;
    }
    if (h->path[0] == '/' && access(h->path, F_OK) != 0) {
        int e = errno;
        if (h->required) {
            printf("%s:%d: required %s: %s: slurmd fails every step while a required plugin cannot be loaded\n", file,
                   h->line, path, strerror(e));
            return 1;
        }
        printf("%s:%d: note: optional %s: %s: Slurm skips the line and --dl-train is unknown\n", file, h->line, path,
               strerror(e));
    }
    if (dlt_site_conf_format(&site, settings, sizeof(settings)) != 0)
        snprintf(settings, sizeof(settings), "(settings too long to show)");
    printf("%s:%d: OK: %s %s: %s\n", file, h->line, h->required ? "required" : "optional", path, settings);
    return 0;
}

/* --check-plugstack [FILE]: 0 every line that loads the plugin is good (or there is none), 1 a bad
 * line or a stack Slurm cannot load, 2 a named FILE that does not exist. */
static int _check_plugstack(const char *named)
{
    char file[DLT_PS_PATH_MAX], how[512], shown[256];
    dlt_plugstack_scan *s;
    dlt_err err = DLT_ERR_INIT;
    int bad = 0, rc;

    if (named) {
        snprintf(file, sizeof(file), "%s", named);
        snprintf(how, sizeof(how), "named");
    } else if (dlt_plugstack_default_path(getenv("SLURM_CONF"), DLT_SLURM_SYSCONFDIR, file, sizeof(file), how,
                                          sizeof(how), &err) != 0) {
        fprintf(stderr, "dltrain-topo: %s\n", err.msg);
        return 1;
    }
    if (!(s = malloc(sizeof(*s)))) {
        fprintf(stderr, "dltrain-topo: out of memory for the plugstack scan\n");
        return 1;
    }
    dlt_plugstack_scan_init(s, DLT_PS_PLUGIN_NAME, 1);
    dlt_name_escape(file, shown, sizeof(shown));
    rc = dlt_plugstack_scan_file(s, file);
    if (rc == -ENOENT && named) {
        fprintf(stderr, "dltrain-topo: --check-plugstack %s: no such file (give the plugstack file slurmd reads)\n",
                shown);
        free(s);
        return 2;
    }
    printf("dltrain-topo: checking %s (%s)\n", shown, how);
    for (int i = 0; i < s->nhits; i++)
        bad |= _check_hit(&s->hits[i]);
    if (s->nfound > 1) {
        printf("dltrain-topo: %d lines load %s: Slurm loads it once per line and the last line's arguments "
               "apply to both; keep one line\n",
               s->nfound, DLT_PS_PLUGIN_NAME);
        bad = 1;
    }
    if (s->notes_len) {
        printf("dltrain-topo: notes on the files read:\n");
        for (const char *p = s->notes; *p;) {
            const char *nl = strchr(p, '\n');
            int n = nl ? (int)(nl - p) : (int)strlen(p);
            printf("  %.*s\n", n, p);
            p += n + (nl ? 1 : 0);
        }
    }
    if (s->broken) {
        printf("dltrain-topo: Slurm cannot read this plugin stack as a whole (see the notes)\n");
        bad = 1;
    }
    if (s->nfound == 0)
        printf("dltrain-topo: no line loads %s in %s or the files it includes: the plugin is off (the packaged "
               "plugstack.conf.d/dltrain.conf ships its line commented out); nothing to check\n",
               DLT_PS_PLUGIN_NAME, shown);
    else if (bad)
        printf("dltrain-topo: %s: fix the line(s) above: until then every --dl-train step fails (other steps "
               "run without dltrain)\n",
               shown);
    free(s);
    return bad;
}

int main(int argc, char **argv)
{
    static dlt_topology topo;
    static char out[1 << 18];
    dlt_nvml nvml;
    dlt_err err = DLT_ERR_INIT;
    int rc;

    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        fputs(g_usage, stdout);
        return 0;
    }
    if (argc >= 2 && !strcmp(argv[1], "--check-plugstack")) {
        if (argc > 3 || (argc == 3 && argv[2][0] == '-')) {
            fputs(g_usage, stderr);
            return 2;
        }
        return _check_plugstack(argc == 3 ? argv[2] : NULL);
    }
    if (argc < 4) {
        fputs(g_usage, stderr);
        return 2;
    }
    memset(&topo, 0, sizeof(topo));
    rc = dlt_nvml_open(&nvml, argv[1], &err);
    if (rc == 0) {
        rc = dlt_topo_add_nvml_gpus(&topo, &nvml, &err);
        dlt_nvml_close(&nvml);
        if (rc) {
            fprintf(stderr, "dltrain-topo: %s\n", err.msg);
            return 1;
        }
    } else {
        fprintf(stderr, "dltrain-topo: %s (continuing without GPUs)\n", err.msg);
        dlt_err_clear(&err); /* said; not this run's failure */
    }
    if (dlt_topo_load_sysfs(&topo, argv[2], &err)) {
        fprintf(stderr, "dltrain-topo: %s\n", err.msg);
        return 1;
    }
    if (!strcmp(argv[3], "xml")) {
        rc = dlt_nccl_topo_xml(&topo, out, sizeof(out));
        if (rc < 0) {
            fprintf(stderr, "dltrain-topo: no NCCL topology file: %s\n",
                    rc == -ENOTSUP   ? "NCCL models no CPU of this architecture; NCCL detects the topology itself"
                    : rc == -ENODATA ? "/proc/cpuinfo names no CPU vendor, which NCCL requires on x86; NCCL "
                                       "detects the topology itself"
                                     : "larger than the plugin writes");
            return 1;
        }
        fputs(out, stdout);
        return 0;
    }
    if (!strcmp(argv[3], "matrix")) {
        /* the node's own name for the node's own tree, else the tree's path (a fixture) */
        char name[256];
        if (!strcmp(argv[2], "/"))
            dlt_node_name(name, sizeof(name));
        else
            snprintf(name, sizeof(name), "%s", argv[2]);
        rc = dlt_topo_matrix(&topo, name, out, sizeof(out));
        if (rc < 0)
            return 1;
        fputs(out, stdout);
        return 0;
    }
    if (!strcmp(argv[3], "bind") && argc >= 8) {
        dlt_step_gpus s;
        dlt_binding b;
        dlt_cpuset allowed;
        char cpus[256], vis[128];
        if (dlt_step_gpus_resolve(&topo, argv[4], argv[5], &s, &err) || dlt_cpuset_parse(argv[7], &allowed) ||
            dlt_binding_choose(&topo, &s, atoi(argv[6]), &allowed, argc > 8 ? argv[8] : "", &b, &err)) {
            fprintf(stderr, "dltrain-topo: %s\n", err.msg);
            return 1;
        }
        dlt_cpuset_format(&b.cpus, cpus, sizeof(cpus));
        if (b.gpu_pos < 0 || dlt_binding_cuda_visible(&s, &b, 0, vis, sizeof(vis)))
            snprintf(vis, sizeof(vis), "-");
        printf("gpu=%s pci=%s cpus=%s numa_local=%d nic=%s dist=%s order=", vis,
               b.gpu >= 0 ? topo.gpus[b.gpu].busid : "-", cpus, b.cpus_numa_local,
               b.nic >= 0 ? topo.nics[b.nic].name : "-", dlt_distance_name(b.nic_distance));
        for (int k = 0; k < s.n; k++)
            printf("%s%s", k ? "," : "", s.label[s.order[k]]);
        printf("\n");
        return 0;
    }
    fprintf(stderr, "dltrain-topo: unknown command %s\n", argv[3]);
    return 2;
}
