/* SPDX-License-Identifier: Apache-2.0 */
/* bootstrap_bench: time of the bootstrap exchange an NCCL program needs (who am I + a 128-byte
 * id from rank 0 to all), through dltpmix, or through MPI (MPI_Init + MPI_Bcast) as the peer.
 * Run under srun --mpi=pmix; rank 0 prints one JSON line. tests/bench/bootstrap_bench.sh runs
 * both at several rank counts and prints medians and the ratio. With BOOTSTRAP_BENCH_HELD=1 every
 * rank also prints "held T" (T: the wall clock, seconds since the epoch) when it holds the id:
 * tests/bench/scale.sh measures the bootstrap from the step's start to the last rank's T.
 * --pmix-fence: the PMIx floor under both, PMIx_Init and one fence without data. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <pmix.h>

#include "pmix/dltpmix.h"
#ifdef DLT_HAVE_MPI
#include <mpi.h>
#endif

static double _now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Every rank's wall clock when it holds the id, where asked (BOOTSTRAP_BENCH_HELD=1). */
static void _held(void)
{
    struct timespec ts;
    const char *v = getenv("BOOTSTRAP_BENCH_HELD");
    if (!v || strcmp(v, "1"))
        return;
    clock_gettime(CLOCK_REALTIME, &ts);
    printf("held %.6f\n", (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec);
    fflush(stdout);
}

static int _run_pmix_fence(void)
{
    pmix_proc_t me;
    pmix_status_t rc = PMIx_Init(&me, NULL, 0);
    if (rc != PMIX_SUCCESS) {
        fprintf(stderr, "bootstrap_bench: PMIx_Init: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    rc = PMIx_Fence(NULL, 0, NULL, 0);
    if (rc != PMIX_SUCCESS) {
        fprintf(stderr, "bootstrap_bench: PMIx_Fence: %s\n", PMIx_Error_string(rc));
        return 1;
    }
    _held();
    return PMIx_Finalize(NULL, 0) == PMIX_SUCCESS ? 0 : 1;
}

static int _run_dltpmix(void)
{
    dltpmix_ctx *ctx = NULL;
    unsigned char id[128];
    char err[1024];
    double t0 = _now(), t_init, t_bcast, t_barrier;
    const dltpmix_info *in;

    if (dltpmix_init(&ctx, NULL, err, sizeof(err)) != 0) {
        fprintf(stderr, "bootstrap_bench: %s\n", err);
        return 1;
    }
    t_init = _now();
    in = dltpmix_get_info(ctx);
    memset(id, in->rank == 0 ? 0x5a : 0, sizeof(id));
    if (dltpmix_bcast(ctx, 0, id, sizeof(id)) != 0 || id[127] != 0x5a) {
        fprintf(stderr, "bootstrap_bench: bcast: %s\n", dltpmix_error(ctx));
        return 1;
    }
    t_bcast = _now();
    _held();
    if (dltpmix_barrier(ctx) != 0) {
        fprintf(stderr, "bootstrap_bench: barrier: %s\n", dltpmix_error(ctx));
        return 1;
    }
    t_barrier = _now();
    if (in->rank == 0)
        printf("{\"impl\":\"dltpmix\",\"ranks\":%d,\"nodes\":%d,\"init_s\":%.6f,\"bcast_s\":%.6f,"
               "\"bootstrap_s\":%.6f,\"barrier_s\":%.6f}\n",
               in->size, in->node_count, t_init - t0, t_bcast - t_init, t_bcast - t0, t_barrier - t_bcast);
    return dltpmix_finalize(ctx) ? 1 : 0;
}

static int _run_mpi(void)
{
#ifdef DLT_HAVE_MPI
    unsigned char id[128];
    int rank, size;
    double t0 = _now(), t_init, t_bcast, t_barrier;
    if (MPI_Init(NULL, NULL) != MPI_SUCCESS)
        return 1;
    t_init = _now();
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    memset(id, rank == 0 ? 0x5a : 0, sizeof(id));
    MPI_Bcast(id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
    t_bcast = _now();
    _held();
    MPI_Barrier(MPI_COMM_WORLD);
    t_barrier = _now();
    if (rank == 0)
        printf("{\"impl\":\"mpi\",\"ranks\":%d,\"init_s\":%.6f,\"bcast_s\":%.6f,\"bootstrap_s\":%.6f,"
               "\"barrier_s\":%.6f}\n",
               size, t_init - t0, t_bcast - t_init, t_bcast - t0, t_barrier - t_bcast);
    MPI_Finalize();
    return id[127] == 0x5a ? 0 : 1;
#else
    fprintf(stderr, "bootstrap_bench: built without MPI\n");
    return 77;
#endif
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--mpi"))
        return _run_mpi();
    if (argc > 1 && !strcmp(argv[1], "--pmix-fence"))
        return _run_pmix_fence();
    return _run_dltpmix();
}
