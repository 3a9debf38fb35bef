/* SPDX-License-Identifier: Apache-2.0 */
/* main: the dltrain command line: dispatch to a subcommand. */
#include "config.h"

#include <omp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/crash_report.h"
#include "common/exit_status.h"
#include "trainer/cli/commands.h"

static void _usage(FILE *f)
{
    fprintf(f, "usage: dltrain COMMAND [OPTIONS]\n"
               "\n"
               "commands:\n"
               "  train      train a ResNet on an ImageFolder, a RecordIO file or synthetic images;\n"
               "             checkpoints, metrics, resume\n"
               "  eval       top-1/top-5 of a checkpoint, verified against its state file (--verify: only that)\n"
               "  bench      training (or --inference) images/s on synthetic data\n"
               "  info       layers, parameter count and FLOPs of a model\n"
               "  data pack  pack an ImageFolder into MXNet RecordIO (.rec + .idx), optionally resized\n"
               "  env        bootstrap through PMIx and report every rank's placement, GPU, CPU binding\n"
               "             and NCCL settings, then check the host communicator with an all-reduce\n"
               "  check      health check: GEMM per rank and all-reduce sweep, slow or wrong ranks, nodes\n"
               "             and links named; exit 0 healthy, 3 degraded, 4 broken\n"
               "\n"
               "dltrain COMMAND --help shows a command's options; see dltrain(1).\n");
}

/* OMP_NUM_THREADS above the CPUs this task may use: OpenMP's threads spin while they wait for each
 * other, so any oversubscription costs far more than it seems (8 threads on 2 CPUs: 2 images/s
 * where 2 threads give 250; 100000 ends in libgomp). Capped to those CPUs, said once, before any
 * parallel region starts. */
static void _cap_threads(void)
{
    const char *v = getenv("OMP_NUM_THREADS");
    cpu_set_t set;
    long want;
    int cpus;
    char *end;
    if (!v || !*v || sched_getaffinity(0, sizeof(set), &set) != 0 || (cpus = CPU_COUNT(&set)) < 1)
        return;
    want = strtol(v, &end, 10); /* "8" or the first level of "8,2" */
    if (end == v || want <= cpus)
        return;
    fprintf(stderr,
            "dltrain: warning: OMP_NUM_THREADS=%s is above the %d CPU(s) this task may use (OpenMP threads "
            "sharing CPUs run at a fraction of the speed): using %d\n",
            v, cpus, cpus);
    omp_set_num_threads(cpus);
}

int main(int argc, char **argv)
{
    /* A write past `ulimit -f` fails with EFBIG, reported by the file's writer with its name,
     * instead of SIGXFSZ ending the process with no word (status 153). */
    signal(SIGXFSZ, SIG_IGN);
    dlt_crash_report_install();
    _cap_threads();
    if (argc < 2) {
        _usage(stderr);
        return DLT_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        _usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("dltrain %s\n", PACKAGE_VERSION);
        return 0;
    }
    if (!strcmp(argv[1], "env"))
        return dlt_cmd_env(argc - 1, argv + 1);
    if (!strcmp(argv[1], "train") || !strcmp(argv[1], "eval") || !strcmp(argv[1], "bench"))
        return dlt_cmd_train(argc - 1, argv + 1);
    if (!strcmp(argv[1], "data"))
        return dlt_cmd_data(argc - 1, argv + 1);
    if (!strcmp(argv[1], "check"))
        return dlt_cmd_check(argc - 1, argv + 1);
    if (!strcmp(argv[1], "info"))
        return dlt_cmd_info(argc - 1, argv + 1);
    fprintf(stderr, "dltrain: unknown command '%s'\n", argv[1]);
    _usage(stderr);
    return DLT_EXIT_USAGE;
}
