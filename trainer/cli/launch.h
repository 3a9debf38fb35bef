/* launch: what every multi-rank command does first: PMIx bootstrap, then the host communicator. */
#ifndef DLT_CLI_LAUNCH_H
#define DLT_CLI_LAUNCH_H

#include "pmix/dltpmix.h"
#include "trainer/comm/comm.h"

/* Returns 0 with *px and *comm set, or 1 after printing why. */
int dlt_cli_launch(const char *comm_kind, double timeout_s, dltpmix_ctx **px, dlt_comm **comm);
void dlt_cli_finish(dltpmix_ctx *px, dlt_comm *comm);

#endif
