/* SPDX-License-Identifier: Apache-2.0 */
/* launch: what every multi-rank command does first: PMIx bootstrap, the GPU of this rank (one per
 * rank), then the communicator. */
#ifndef DLT_CLI_LAUNCH_H
#define DLT_CLI_LAUNCH_H

#include "common/status.h"
#include "pmix/dltpmix.h"
#include "trainer/backend/backend.h"
#include "trainer/comm/comm.h"

/* For a GPU run (req->gpu) backend->device and req->cuda_device get the rank's device, and two
 * ranks of a node on one GPU are refused. problem (NULL: none) is what this rank found wrong before
 * the launch (a missing path, a CPU without bf16): the ranks exchange it through PMIx before any
 * communicator exists, so that every rank stops, exit status 2, without an abort, the message said
 * once when every rank found the same, else by each rank that found it, with rank 0 naming them.
 * Returns 0 with *px and *comm set (the communicator reports into err from then on), or 1 or 2
 * after printing why. */
int dlt_cli_launch(dlt_comm_request *req, dlt_backend_config *backend, double timeout_s, const char *problem,
                   dltpmix_ctx **px, dlt_comm **comm, dlt_err *err);
void dlt_cli_finish(dltpmix_ctx *px, dlt_comm *comm);

/* The process's exit status for a run's status (trainer.h's dlt_run_status, or a negative status:
 * dlt_train_run, dlt_eval_run, dlt_bench_run and the preflight checks before them): 0 done,
 * DLT_EXIT_FAILED failed (a negative status, or refused before the start), DLT_EXIT_USAGE refused
 * as a usage error, DLT_EXIT_PREEMPTED or DLT_EXIT_STOPPED_UNSAVED for a run stopped by a signal.
 * The one place a run's end becomes an exit status. */
int dlt_cli_exit_status(int run_status);

/* Every rank's claim (host, GPU) gathered through PMIx and checked: 0, or nonzero with err set. */
int dlt_cli_check_gpus(dltpmix_ctx *px, const char *gpu, dlt_err *err);

#endif
