/* SPDX-License-Identifier: Apache-2.0 */
/* exit_status: every exit status of the dltrain program, in one place. man/dltrain.1's EXIT STATUS
 * section is checked against this file (tests/repo/exit_status.sh): a status added here and not
 * there, or there and not here, fails the check. */
#ifndef DLT_EXIT_STATUS_H
#define DLT_EXIT_STATUS_H

#define DLT_EXIT_OK 0
/* a run failed; the message says why and what to change */
#define DLT_EXIT_FAILED 1
/* a usage error: a bad option, an option that needs another, a path missing or of the wrong kind */
#define DLT_EXIT_USAGE 2
/* --preflight / dltrain check: slow ranks, nodes or links named */
#define DLT_EXIT_DEGRADED 3
/* --preflight / dltrain check: a wrong GEMM or all-reduce result, named */
#define DLT_EXIT_BROKEN 4
/* stopped by SIGTERM/SIGUSR1/SIGINT after checkpointing: requeue, and --resume auto continues */
#define DLT_EXIT_PREEMPTED 75
/* aborted by the stall watchdog */
#define DLT_EXIT_STALLED 86
/* a second SIGINT: quit at once, nothing saved (128 + SIGINT) */
#define DLT_EXIT_INTERRUPTED 130
/* stopped by a signal without --checkpoint-dir, nothing saved: 128 + SIGTERM, what a shell
 * reports for a command SIGTERM ended, as the run's progress is lost the same way (a requeue on
 * 75 would start over without knowing) */
#define DLT_EXIT_STOPPED_UNSAVED 143

#endif
