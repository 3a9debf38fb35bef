/* SPDX-License-Identifier: Apache-2.0 */
/* fake_nccl: the test's controls of the stand-in NCCL library. */
#ifndef DLT_FAKE_NCCL_H
#define DLT_FAKE_NCCL_H

#include <nccl.h>

/* The next operation stays ncclInProgress for in_progress_polls polls of ncclCommGetAsyncError,
 * then reports final; ncclGetLastError returns last_error. Resets the counters. */
void fake_nccl_script(int in_progress_polls, ncclResult_t final, const char *last_error);
int fake_nccl_polls(void);
int fake_nccl_aborts(void);
int fake_nccl_destroys(void);

#endif
