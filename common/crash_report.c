/* SPDX-License-Identifier: Apache-2.0 */
/* crash_report: the last words of a process that faulted. */
#include "config.h"

#include "common/crash_report.h"

#include <execinfo.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static char g_context[256];
static char g_limit[160];
static char g_altstack[64 * 1024];

static void _put(const char *s)
{
    ssize_t w = write(STDERR_FILENO, s, strlen(s));
    (void)w;
}

/* Decimal digits of v into buf (at least 21 bytes); async-signal-safe. */
static const char *_decimal(char *buf, size_t size, unsigned long v)
{
    char *p = buf + size - 1;
    *p = '\0';
    do {
        *--p = (char)('0' + v % 10);
        v /= 10;
    } while (v && p > buf);
    return p;
}

/* write and raise only: async-signal-safe. */
static void _on_fault(int sig, siginfo_t *info, void *uctx)
{
    const char *name = sig == SIGSEGV ? "SIGSEGV" : sig == SIGBUS ? "SIGBUS" : sig == SIGILL ? "SIGILL" : "SIGFPE";
    char num[24];
    (void)uctx;
    /* si_code <= 0 (SI_USER, SI_QUEUE, SI_TKILL): kill(2) or sigqueue(3) of another process sent it;
     * no fault happened, and the thread the kernel chose to run this handler is not a faulting one */
    if (info && info->si_code <= 0 && info->si_pid != getpid()) {
        _put("dltrain: killed by ");
        _put(name);
        _put(" sent by process ");
        _put(_decimal(num, sizeof(num), (unsigned long)info->si_pid));
        _put(" (user id ");
        _put(_decimal(num, sizeof(num), (unsigned long)info->si_uid));
        _put("), not by a fault in dltrain\n");
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    _put("dltrain: crashed with ");
    _put(name);
    if (g_context[0]) {
        _put(" while ");
        _put(g_context);
    }
    _put(g_limit[0] ? g_limit : ": this is a bug in dltrain or a library it uses; please report it with this line");
    _put("\n");
    /* where: glibc's backtrace writes the frames itself (no malloc; libgcc was loaded at install);
     * dltrain is linked with --export-dynamic, so its own functions are named too */
    {
        void *frames[48];
        int n = backtrace(frames, (int)(sizeof(frames) / sizeof(frames[0])));
        _put("dltrain: the faulting thread's stack, innermost first:\n");
        backtrace_symbols_fd(frames, n, STDERR_FILENO);
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

void dlt_crash_report_install(void)
{
    static const int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE};
    struct sigaction sa;
    struct rlimit as;
    stack_t st;
    void *warm[1];
    (void)backtrace(warm, 1); /* loads libgcc's unwinder now, not inside the handler */
    if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY)
        snprintf(g_limit, sizeof(g_limit),
                 "; the address-space limit is %llu MiB (ulimit -v): short of memory, "
                 "oneDNN's code generator crashes this way: raise the limit or lower --batch",
                 (unsigned long long)(as.rlim_cur >> 20));
    memset(&st, 0, sizeof(st));
    st.ss_sp = g_altstack;
    st.ss_size = sizeof(g_altstack);
    sigaltstack(&st, NULL);
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = _on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
        sigaction(sigs[i], &sa, NULL);
}

void dlt_crash_context(const char *fmt, ...)
{
    va_list ap;
    if (!fmt) {
        g_context[0] = '\0';
        return;
    }
    va_start(ap, fmt);
    vsnprintf(g_context, sizeof(g_context), fmt, ap);
    va_end(ap);
}
