/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: the NCCL XML writer and the topology matrix on random topologies (random PCI
 * trees, NVLink counts, NICs, names), and the sysfs reader on a tree built from the input.
 * The XML must be well formed: balanced tags, quoted attribute values, no tab, no prolog. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plugin/binding.h"
#include "plugin/nccl_topo_xml.h"
#include "plugin/topo_report.h"
#include "plugin/topology.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct {
    const uint8_t *p;
    size_t n;
} _in;

static unsigned _u8(_in *in)
{
    if (!in->n)
        return 0;
    in->n--;
    return *in->p++;
}

/* Minimal XML well-formedness: every <tag ...> closed by </tag> or />, attributes name="value". */
static void _check_xml(const char *x)
{
    const char *stack[64];
    size_t slen[64];
    int depth = 0;
    if (!strncmp(x, "<?xml", 5) || strchr(x, '\t'))
        abort();
    for (const char *p = x; *p;) {
        if (*p != '<') {
            if (*p != ' ' && *p != '\n')
                abort(); /* text content is never written */
            p++;
            continue;
        }
        if (p[1] == '/') {
            const char *name = p + 2;
            size_t n = strcspn(name, ">");
            if (!depth || n != slen[depth - 1] || strncmp(name, stack[depth - 1], n))
                abort();
            depth--;
            p = name + n + 1;
            continue;
        }
        {
            const char *name = p + 1, *q;
            size_t n = strcspn(name, " />");
            q = name + n;
            while (*q == ' ') {
                q++;
                if (*q == '/' || *q == '>')
                    break;
                q += strcspn(q, "=\" />");
                if (q[0] != '=' || q[1] != '"')
                    abort();
                q = strchr(q + 2, '"');
                if (!q)
                    abort();
                if (q - strchr(q - 1, '"') > 255)
                    abort();
                q++;
            }
            if (q[0] == '/' && q[1] == '>') {
                p = q + 2;
            } else if (q[0] == '>') {
                if (depth >= 64)
                    abort();
                stack[depth] = name;
                slen[depth++] = n;
                p = q + 1;
            } else {
                abort();
            }
        }
    }
    if (depth)
        abort();
}

static void _random_topology(_in *in, dlt_topology *t)
{
    memset(t, 0, sizeof(*t));
    t->npci = (int)(_u8(in) % 24);
    for (int i = 0; i < t->npci; i++) {
        dlt_pci *p = &t->pci[i];
        unsigned par = _u8(in);
        snprintf(p->busid, sizeof(p->busid), "0000:%02x:%02x.%x", _u8(in), _u8(in) % 32, _u8(in) % 8);
        /* Parents may point anywhere, even forward or at themselves: the writer must not loop. */
        p->parent = (par & 0x80) ? -1 : (int)(par % (unsigned)t->npci);
        p->numa = (int)(_u8(in) % 5) - 1;
        snprintf(p->root, sizeof(p->root), "pci0000:%02x", _u8(in) % 3);
        snprintf(p->cls, sizeof(p->cls), "0x0%x0%x00", _u8(in) % 7, _u8(in) % 9);
        snprintf(p->link_speed, sizeof(p->link_speed), "8.0 GT/s PCIe");
        p->link_width = 16;
    }
    t->ngpus = t->npci ? (int)(_u8(in) % 9) : 0;
    for (int g = 0; g < t->ngpus; g++) {
        dlt_gpu *x = &t->gpus[g];
        x->pci = (int)(_u8(in) % (unsigned)t->npci);
        snprintf(x->busid, sizeof(x->busid), "%s", t->pci[x->pci].busid);
        x->sm = (int)_u8(in);
        for (int j = 0; j < t->ngpus; j++)
            x->nvlink_to_gpu[j] = j == g ? 0 : (int)(_u8(in) % 4);
        x->nvlink_to_switch = (int)(_u8(in) % 3);
        snprintf(x->switch_busid, sizeof(x->switch_busid), "0000:c%x:00.0", _u8(in) % 16);
        x->numa = (int)(_u8(in) % 3) - 1;
        dlt_cpuset_parse("0-7", &x->local_cpus);
    }
    t->nnics = t->npci ? (int)(_u8(in) % 4) : 0;
    for (int k = 0; k < t->nnics; k++) {
        dlt_nic *n = &t->nics[k];
        n->pci = (int)(_u8(in) % (unsigned)t->npci);
        n->is_ib = (int)(_u8(in) & 1);
        snprintf(n->name, sizeof(n->name), "nic%u", _u8(in));
        snprintf(n->netdev, sizeof(n->netdev), "if%u", _u8(in));
        n->speed_mbps = (int)_u8(in) * 1000;
        n->up = (int)(_u8(in) & 1);
    }
    t->nnuma = (int)(_u8(in) % 3);
    for (int i = 0; i < t->nnuma; i++)
        dlt_cpuset_parse(i ? "8-15" : "0-7", &t->numa_cpus[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static dlt_topology t;
    static char xml[1 << 18], report[1 << 16];
    _in in = {data, size};
    dlt_step_gpus s;
    dlt_binding b;
    dlt_cpuset allowed;
    char vis[64] = "";
    dlt_err err = DLT_ERR_INIT;
    _random_topology(&in, &t);
    if (dlt_nccl_topo_xml(&t, xml, sizeof(xml)) > 0)
        _check_xml(xml);
    (void)dlt_topo_matrix(&t, "fuzz", report, sizeof(report));
    /* Binding over a random step list. */
    for (int i = 0, n = (int)(_u8(&in) % 5); i < n; i++)
        snprintf(vis + strlen(vis), sizeof(vis) - strlen(vis), "%s%u", i ? "," : "", _u8(&in) % 10);
    dlt_cpuset_parse("0-3", &allowed);
    if (dlt_step_gpus_resolve(&t, vis, NULL, &s, dlt_err_fresh(&err)) == 0 &&
        dlt_binding_choose(&t, &s, (int)_u8(&in), &allowed, "", &b, dlt_err_fresh(&err)) == 0 && s.n > 0) {
        char out[128];
        if (b.gpu < 0 || b.gpu >= t.ngpus || dlt_binding_cuda_visible(&s, &b, 1, out, sizeof(out)) != 0)
            abort();
    }
    return 0;
}
