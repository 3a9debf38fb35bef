/* launch: what every multi-rank command does first: PMIx bootstrap, then the host communicator. */
#ifndef DLT_CLI_LAUNCH_H
#define DLT_CLI_LAUNCH_H

#include "pmix/dltpmix.h"
#include "trainer/comm/comm.h"

/* comm_kind as dlt_comm_create's, plus "nccl" and "auto-gpu" (NCCL for more than one rank, on
 * CUDA device cuda_device, -1: the first visible). Returns 0 with *px and *comm set, or 1 after
 * printing why. */
int dlt_cli_launch(const char *comm_kind, int cuda_device, double timeout_s, dltpmix_ctx **px, dlt_comm **comm);
void dlt_cli_finish(dltpmix_ctx *px, dlt_comm *comm);

#endif
