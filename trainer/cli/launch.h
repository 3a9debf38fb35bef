/* launch: what every multi-rank command does first: PMIx bootstrap, then the communicator. */
#ifndef DLT_CLI_LAUNCH_H
#define DLT_CLI_LAUNCH_H

#include "pmix/dltpmix.h"
#include "trainer/comm/comm.h"

/* Returns 0 with *px and *comm set (the communicator reports into err from then on), or 1 after
 * printing why. */
int dlt_cli_launch(const dlt_comm_request *req, double timeout_s, dltpmix_ctx **px, dlt_comm **comm, char *err,
                   size_t errlen);
void dlt_cli_finish(dltpmix_ctx *px, dlt_comm *comm);

#endif
