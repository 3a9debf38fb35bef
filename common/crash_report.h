/* SPDX-License-Identifier: Apache-2.0 */
/* crash_report: a last line on standard error when the process dies of a fault (SIGSEGV, SIGBUS,
 * SIGILL, SIGFPE), saying what it was doing and, when an address-space limit is set, that limit:
 * oneDNN's code generator, short of memory under `ulimit -v`, crashes inside dnnl_primitive_create
 * instead of returning an error, and a bare "Segmentation fault" leaves the user nothing to go on.
 * The faulting thread's stack follows the line (glibc's backtrace_symbols_fd: no allocation).
 * The fault's default action follows (status 128 + signal, a core dump where enabled). The state
 * is the process's, as a signal handler's must be. A fault signal that another process sent (kill
 * -SEGV: si_code SI_USER or SI_QUEUE) is said to be that, naming the sender, with no stack. */
#ifndef DLT_CRASH_REPORT_H
#define DLT_CRASH_REPORT_H

/* Installs the handlers (on an alternate stack, so a stack overflow is reported too). */
void dlt_crash_report_install(void);

/* What the process is doing, for the report ("planning layer layer3.1.conv1"); NULL clears it.
 * Formatted here, never in the handler. */
void dlt_crash_context(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
