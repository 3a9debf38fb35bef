/* SPDX-License-Identifier: Apache-2.0 */
/* scaling_model: predicted speed-up of synchronous data-parallel ResNet-50 from an iteration-time
 * model, for the classic benchmark's machine: V100 GPUs, 4 per node on NVLink, one EDR InfiniBand
 * link per node. Printed beside the MXNet results of that benchmark (15.4x fp32, 13.8x fp16 at 16
 * GPUs) and NVIDIA's DGX-2 MXNet figures (15.19x, 14.39x).
 *
 *   t_iter(n)  = t_compute + exposed all-reduce
 *   t_compute  = batch / single-GPU images/s
 *   all-reduce = 2 (n-1)/n x gradient bytes / bandwidth + 2 (n-1) x latency (ring), where the
 *                bandwidth is NVLink's inside one node and the node's IB link across nodes
 *   exposed    = max(last bucket's all-reduce, all-reduce - overlap x backward time): buckets
 *                start while backward (2/3 of compute) still runs.
 * Every input is a flag; the defaults are stated assumptions, not measurements of this machine. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *name;
    double ips1, batch, grad_bytes, mxnet_16, dgx2_16;
} prec_case;

static double _allreduce(int n, int per_node, double bytes, double nvlink_gbs, double ib_gbs, double lat_nv,
                         double lat_ib)
{
    double bw = n <= per_node ? nvlink_gbs : ib_gbs, lat = n <= per_node ? lat_nv : lat_ib;
    if (n < 2)
        return 0;
    return 2.0 * (n - 1) / n * bytes / (bw * 1e9) + 2.0 * (n - 1) * lat;
}

/* All-reduce time left after overlapping with backward (tb): never less than the last bucket's. */
static double _exposed(double ar, double bytes, double bucket, double overlap, double tb, int n)
{
    double last = ar * (bucket < bytes ? bucket / bytes : 1.0);
    if (n < 2)
        return 0;
    return ar - overlap * tb > last ? ar - overlap * tb : last;
}

int main(int argc, char **argv)
{
    double params = 25557032, nvlink = 100, ib = 11.0, lat_nv = 3e-6, lat_ib = 8e-6, bucket = 25 * 1048576.0;
    double overlap = 0.8;
    int per_node = 4;
    prec_case cases[2] = {{"fp32", 380, 128, 4, 15.4, 15.19}, {"fp16", 1150, 256, 2, 13.8, 14.39}};
    for (int i = 1; i + 1 < argc; i += 2) {
        double v = atof(argv[i + 1]);
        if (!strcmp(argv[i], "--fp32-ips"))
            cases[0].ips1 = v;
        else if (!strcmp(argv[i], "--fp16-ips"))
            cases[1].ips1 = v;
        else if (!strcmp(argv[i], "--fp32-batch"))
            cases[0].batch = v;
        else if (!strcmp(argv[i], "--fp16-batch"))
            cases[1].batch = v;
        else if (!strcmp(argv[i], "--ib-gbs"))
            ib = v;
        else if (!strcmp(argv[i], "--nvlink-gbs"))
            nvlink = v;
        else if (!strcmp(argv[i], "--overlap"))
            overlap = v;
        else if (!strcmp(argv[i], "--bucket-mib"))
            bucket = v * 1048576.0;
        else {
            fprintf(stderr, "usage: scaling_model [--fp32-ips X] [--fp16-ips X] [--fp32-batch N] [--fp16-batch N] "
                            "[--ib-gbs X] [--nvlink-gbs X] [--overlap F] [--bucket-mib M]\n");
            return 2;
        }
    }
    printf("assumptions: ResNet-50 (%.0f parameters), %d V100 per node on NVLink (%.0f GB/s ring), one EDR IB per "
           "node (%.1f GB/s), %.0f MiB buckets, %.0f%% of backward usable for overlap\n",
           params, per_node, nvlink, ib, bucket / 1048576.0, overlap * 100);
    for (int c = 0; c < 2; c++) {
        prec_case *p = &cases[c];
        double tc = p->batch / p->ips1, bytes = params * p->grad_bytes, tb = tc * 2.0 / 3.0;
        printf("\n%s: %.0f img/s per GPU at batch %.0f (t_compute %.1f ms), gradients %.1f MB\n", p->name, p->ips1,
               p->batch, tc * 1e3, bytes / 1e6);
        printf("%-6s %-6s %-12s %-12s %-10s %-10s\n", "GPUs", "nodes", "allreduce ms", "exposed ms", "speed-up",
               "efficiency");
        double s16 = 0;
        for (int k = 0, pts[] = {1, 2, 4, 8, 12, 16}; k < 6; k++) {
            int n = pts[k];
            double ar = _allreduce(n, per_node, bytes, nvlink, ib, lat_nv, lat_ib);
            double exposed = _exposed(ar, bytes, bucket, overlap, tb, n);
            double s = n * tc / (tc + exposed);
            printf("%-6d %-6d %-12.2f %-12.2f %-10.2f %.1f%%\n", n, (n + per_node - 1) / per_node, ar * 1e3,
                   exposed * 1e3, s, 100 * s / n);
            s16 = s;
        }
        printf("16 GPUs: model %.2fx (ratio to MXNet %.3f) | MXNet benchmark %.1fx | NVIDIA DGX-2 MXNet %.2fx\n", s16,
               s16 / p->mxnet_16, p->mxnet_16, p->dgx2_16);
    }
    return 0;
}
