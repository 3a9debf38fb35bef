/* SPDX-License-Identifier: Apache-2.0 */
/* tunables: the trainer's fixed limits, and the defaults more than one module uses, in one place
 * (the options that expose some of them say so). The training recipe's defaults are in
 * train/train_config.c; libdltpmix's bootstrap timeout is its own (DLTPMIX_DEFAULT_TIMEOUT_S). */
#ifndef DLT_TUNABLES_H
#define DLT_TUNABLES_H

/* Gradient all-reduce bucket size in MiB (--bucket-mib; PyTorch DDP's default is 25). */
#define DLT_DEFAULT_BUCKET_MIB 25.0
/* The bottom gradient bucket, MiB (at most --bucket-mib): its sum can start only once backward is
 * over, so all of it is exposed (grad_buckets.h). */
#define DLT_BOTTOM_BUCKET_MIB 1.0
/* Bucket boundaries are aligned to this many elements (256 bytes of float). */
#define DLT_BUCKET_ALIGN_ELEMS 64
/* Largest cuDNN convolution workspace one algorithm may take. */
#define DLT_CUDNN_WORKSPACE_CAP ((size_t)1 << 30)
/* cuBLAS workspace, set explicitly so a CUDA graph capture never makes cuBLAS allocate. */
#define DLT_CUBLAS_WORKSPACE_BYTES ((size_t)32 << 20)
/* Seconds one phase of a step may take before the stall watchdog aborts the run (--stall-timeout). */
#define DLT_DEFAULT_STALL_TIMEOUT_S 900.0
/* A stop signal during start-up ends the process --stall-timeout seconds later, at most this many,
 * where start-up has not reached a point that answers it (a read blocked on a hung file system):
 * well inside Slurm's usual warnings (--signal=USR1@120), and long enough for a start-up that is
 * only slow (ResNet-50's planning on a loaded node) to reach the ranks' agreement on the stop. */
#define DLT_STOP_STARTUP_GRACE_MAX_S 60
/* Seconds the watchdog gives the communicator's abort before the stalled process exits anyway. */
#define DLT_WATCHDOG_ABORT_WAIT_S 10.0
/* A wake-up of the watchdog thread this much later than its tick means the process was stopped
 * (SIGSTOP, a suspended job): that time is not counted against --stall-timeout. */
#define DLT_WATCHDOG_STOPPED_GAP_S 3.0
/* fp16: overflow-free steps before the loss scale doubles (--loss-scale-window; the loss scaler's
 * fallback for a window <= 0 too). */
#define DLT_DEFAULT_LOSS_SCALE_WINDOW 2000
/* Steps between cross-rank weight checks (--check-every). */
#define DLT_DEFAULT_CHECK_EVERY 100
/* GPU-side waits (poll.h): polls that only yield the CPU, then the sleep between later polls. */
#define DLT_POLL_SPINS 64
#define DLT_POLL_SLEEP_NS 20000L
/* Progress of long commands (data pack, eval, the cuDNN algorithm search): seconds between
 * in-place updates on a terminal, and between plain lines elsewhere (DLT_PROGRESS_SECONDS). */
#define DLT_PROGRESS_TTY_S 0.5
#define DLT_PROGRESS_LINES_S 60.0

/* A requeued job finding its output folders held by its own previous incarnation (still ending)
 * waits this long for it before refusing (run_lock.h). */
#define DLT_REQUEUE_LOCK_WAIT_S 120.0

#endif
