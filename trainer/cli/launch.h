/* SPDX-License-Identifier: Apache-2.0 */
/* launch: what every multi-rank command does first: PMIx bootstrap, the GPU of this rank (one per
 * rank), then the communicator. */
#ifndef DLT_CLI_LAUNCH_H
#define DLT_CLI_LAUNCH_H

#include "pmix/dltpmix.h"
#include "trainer/backend/backend.h"
#include "trainer/comm/comm.h"

/* For a GPU run (req->gpu) backend->device and req->cuda_device get the rank's device, and two
 * ranks of a node on one GPU are refused. Returns 0 with *px and *comm set (the communicator
 * reports into err from then on), or 1 after printing why. */
int dlt_cli_launch(dlt_comm_request *req, dlt_backend_config *backend, double timeout_s, dltpmix_ctx **px,
                   dlt_comm **comm, char *err, size_t errlen);
void dlt_cli_finish(dltpmix_ctx *px, dlt_comm *comm);

/* Every rank's claim (host, GPU) gathered through PMIx and checked: 0, or nonzero with err set. */
int dlt_cli_check_gpus(dltpmix_ctx *px, const char *gpu, char *err, size_t errlen);

#endif
