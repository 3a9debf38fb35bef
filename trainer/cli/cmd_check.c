/* SPDX-License-Identifier: Apache-2.0 */
/* cmd_check: `dltrain check`: the job's health check (trainer/check/check.h) under srun --mpi=pmix
 * or alone; exit status healthy 0, degraded 3, broken 4 (1: could not run, 2: usage). */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/check/check.h"
#include "trainer/cli/commands.h"
#include "trainer/cli/launch.h"
#include "trainer/cli/parse.h"

enum {
    K_BACKEND = 256,
    K_PRECISION,
    K_DEVICE,
    K_GEMM,
    K_GEMM_S,
    K_FRACTION,
    K_MIN_TFLOPS,
    K_MIN_BUSBW,
    K_MIN_BYTES,
    K_MAX_BYTES,
    K_ITERS,
    K_NO_ISOLATE,
    K_PAIRS,
    K_JSON,
    K_COMM,
    K_TIMEOUT,
    K_HELP
};

static void _usage(FILE *f)
{
    fprintf(f, "usage: dltrain check [OPTIONS]   (srun --mpi=pmix [--dl-train] dltrain check, or alone)\n"
               "\n"
               "Each rank runs a GEMM on its device (cuBLAS on a GPU, oneDNN on the CPU) with small-integer\n"
               "inputs whose exact product is checked, then an all-reduce sweep on the trainer's communicator\n"
               "(time, algbw, busbw = algbw x 2(n-1)/n, every sum checked), then within each node, one rank\n"
               "per node across nodes, and node pairs, so that a slow or wrong rank, node or link is named.\n"
               "\n"
               "  --backend auto|cpu|cuda  the device the GEMM runs on (default auto, as dltrain train)\n"
               "  --precision P          fp32 | tf32 | fp16 | bf16: the GEMM's (GPU; the CPU checks fp32)\n"
               "  --device N             CUDA device among the visible ones (default: as dltrain train)\n"
               "  --gemm-size N          square GEMM size (default 8192 on a GPU, 1024 on a CPU)\n"
               "  --gemm-seconds S       time spent in timed GEMMs per rank (default 0.5)\n"
               "  --min-fraction F       a rank below F x the median TFLOP/s of its device model is named, and\n"
               "                         a node or node pair below F x the median busbw (default 0.85)\n"
               "  --min-tflops T         site threshold: a rank below T TFLOP/s is named\n"
               "  --min-busbw G          site threshold: busbw below G GB/s at the largest size is named\n"
               "  --min-bytes B --max-bytes B  the sweep's sizes (default 8 .. 256M; K, M, G suffixes)\n"
               "  --iters N              at most N timed all-reduces per size (default 20, fewer from 4 MiB)\n"
               "  --no-isolate           only the sweep over all ranks\n"
               "  --pairs                always test node pairs (default: when the cross-node figure is low)\n"
               "  --json                 one JSON object instead of the table\n"
               "  --comm auto|single|mpi|nccl  as dltrain train   --timeout S  bootstrap timeout\n"
               "\n"
               "Exit status: 0 healthy, 3 degraded (slow ranks, nodes or links named), 4 broken (a wrong\n"
               "result named), 1 the check could not run, 2 usage. See dltrain(1), CHECK.\n");
}

/* A byte count: a whole number with an optional K, M or G (binary) suffix. */
static int _bytes(const char *opt, const char *v, size_t *out, char *err, size_t errlen)
{
    char num[32];
    size_t n = strlen(v), shift = 0;
    int64_t w;
    if (n > 0 && n < sizeof(num) && strchr("KkMmGg", v[n - 1])) {
        shift = strchr("Kk", v[n - 1]) ? 10 : strchr("Mm", v[n - 1]) ? 20 : 30;
        n--;
    }
    snprintf(num, sizeof(num), "%.*s", (int)(n < sizeof(num) ? n : sizeof(num) - 1), v);
    if (dlt_parse_whole(opt, num, shift ? 1 : 8, (int64_t)4 << (30 - shift), &w, err, errlen) != 0) {
        snprintf(err, errlen, "%s %s: expected a byte count from 8 to 4G (a whole number, optionally with K, M or G)",
                 opt, v);
        return -1;
    }
    *out = (size_t)w << shift;
    return 0;
}

int dlt_cmd_check(int argc, char **argv)
{
    static const struct option opts[] = {{"backend", required_argument, NULL, K_BACKEND},
                                         {"precision", required_argument, NULL, K_PRECISION},
                                         {"device", required_argument, NULL, K_DEVICE},
                                         {"gemm-size", required_argument, NULL, K_GEMM},
                                         {"gemm-seconds", required_argument, NULL, K_GEMM_S},
                                         {"min-fraction", required_argument, NULL, K_FRACTION},
                                         {"min-tflops", required_argument, NULL, K_MIN_TFLOPS},
                                         {"min-busbw", required_argument, NULL, K_MIN_BUSBW},
                                         {"min-bytes", required_argument, NULL, K_MIN_BYTES},
                                         {"max-bytes", required_argument, NULL, K_MAX_BYTES},
                                         {"iters", required_argument, NULL, K_ITERS},
                                         {"no-isolate", no_argument, NULL, K_NO_ISOLATE},
                                         {"pairs", no_argument, NULL, K_PAIRS},
                                         {"json", no_argument, NULL, K_JSON},
                                         {"comm", required_argument, NULL, K_COMM},
                                         {"timeout", required_argument, NULL, K_TIMEOUT},
                                         {"help", no_argument, NULL, K_HELP},
                                         {NULL, 0, NULL, 0}};
    dlt_check_config cfg;
    dlt_backend_config be;
    const char *comm_kind = "auto";
    double timeout = 0;
    int64_t w;
    dltpmix_ctx *px = NULL;
    dlt_comm *comm = NULL;
    char err[2048] = "";
    int opt, rc;

    dlt_check_defaults(&cfg);
    dlt_backend_config_defaults(&be);
    optind = 1;
    while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        rc = 0;
        switch (opt) {
        case K_BACKEND:
            if (strcmp(optarg, "auto") && strcmp(optarg, "cpu") && strcmp(optarg, "cuda")) {
                fprintf(stderr, "dltrain: --backend %s: auto, cpu or cuda\n", optarg);
                return 2;
            }
            be.kind = optarg;
            break;
        case K_PRECISION:
            if (dlt_precision_parse(optarg) < 0) {
                fprintf(stderr, "dltrain: --precision %s: one of fp32, tf32, fp16, bf16\n", optarg);
                return 2;
            }
            be.precision = (dlt_precision)dlt_precision_parse(optarg);
            break;
        case K_DEVICE:
            rc = dlt_parse_whole("--device", optarg, 0, 1024, &w, err, sizeof(err));
            be.device = (int)w;
            break;
        case K_GEMM:
            rc = dlt_parse_whole("--gemm-size", optarg, 16, 32768, &w, err, sizeof(err));
            cfg.gemm_n = (int)w;
            break;
        case K_GEMM_S:
            rc = dlt_parse_real("--gemm-seconds", optarg, 0, 600, &cfg.gemm_seconds, err, sizeof(err));
            break;
        case K_FRACTION: rc = dlt_parse_real("--min-fraction", optarg, 0, 1, &cfg.fraction, err, sizeof(err)); break;
        case K_MIN_TFLOPS:
            rc = dlt_parse_real("--min-tflops", optarg, 0, 1e6, &cfg.min_tflops, err, sizeof(err));
            break;
        case K_MIN_BUSBW: rc = dlt_parse_real("--min-busbw", optarg, 0, 1e6, &cfg.min_busbw, err, sizeof(err)); break;
        case K_MIN_BYTES: rc = _bytes("--min-bytes", optarg, &cfg.min_bytes, err, sizeof(err)); break;
        case K_MAX_BYTES: rc = _bytes("--max-bytes", optarg, &cfg.max_bytes, err, sizeof(err)); break;
        case K_ITERS:
            rc = dlt_parse_whole("--iters", optarg, 1, 1000, &w, err, sizeof(err));
            cfg.iters = (int)w;
            break;
        case K_NO_ISOLATE: cfg.isolate = 0; break;
        case K_PAIRS: cfg.pairs = 1; break;
        case K_JSON: cfg.json = 1; break;
        case K_COMM:
            if (strcmp(optarg, "auto") && strcmp(optarg, "single") && strcmp(optarg, "mpi") && strcmp(optarg, "nccl")) {
                fprintf(stderr, "dltrain: --comm %s: auto, single, mpi or nccl\n", optarg);
                return 2;
            }
            comm_kind = optarg;
            break;
        case K_TIMEOUT: rc = dlt_parse_real("--timeout", optarg, 1, 86400, &timeout, err, sizeof(err)); break;
        case K_HELP:
        case 'h': _usage(stdout); return 0;
        default: _usage(stderr); return 2;
        }
        if (rc != 0) {
            fprintf(stderr, "dltrain: %s\n", err);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "dltrain check: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (cfg.min_bytes > cfg.max_bytes) {
        fprintf(stderr, "dltrain: --min-bytes %zu is above --max-bytes %zu\n", cfg.min_bytes, cfg.max_bytes);
        return 2;
    }
    {
        dlt_comm_request req = {comm_kind, dlt_backend_is_gpu(&be), be.device};
        if ((rc = dlt_cli_launch(&req, &be, timeout, NULL, &px, &comm, err, sizeof(err))) != 0)
            return rc;
    }
    cfg.gpu = dlt_backend_is_gpu(&be);
    cfg.device = be.device;
    cfg.precision = be.precision;
    rc = dlt_check_run(&cfg, px, comm, stdout, err, sizeof(err));
    if (rc == 1)
        fprintf(stderr, "dltrain: rank %d: %s\n", comm->rank, err);
    dlt_cli_finish(px, comm);
    return rc;
}
