/* SPDX-License-Identifier: Apache-2.0 */
/* stop_signal: the stop request of TERM, USR1 and INT. */
#include "config.h"

#include "common/exit_status.h"
#include "common/stop_signal.h"
#include "common/tunables.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t g_stop_signal;
/* Start-up's state, read by the handlers: whether it lasts, the status to end with, and its stage
 * in one of two buffers (the one not published is written, then published by its index, so the
 * handler never reads a buffer being written). */
static volatile sig_atomic_t g_startup, g_startup_status = DLT_EXIT_STOPPED_UNSAVED, g_stage_index = -1,
                                        g_grace = DLT_STOP_STARTUP_GRACE_MAX_S;
static char g_stage[2][256];

static void _say(const char *s)
{
    ssize_t w = write(STDERR_FILENO, s, strlen(s));
    (void)w;
}

static const char *_signal_name(int sig)
{
    return sig == SIGTERM ? "SIGTERM" : sig == SIGUSR1 ? "SIGUSR1" : sig == SIGINT ? "SIGINT" : "a stop signal";
}

/* async-signal-safe: the decimal digits of v into buf */
static const char *_decimal(int v, char buf[16])
{
    char *p = buf + 15;
    *p = '\0';
    do
        *--p = (char)('0' + v % 10);
    while ((v /= 10) > 0 && p > buf);
    return p;
}

/* The timer a stop during start-up armed has run out: start-up never reached a point that answers
 * the request. write and _exit only. */
static void _on_startup_timeout(int sig)
{
    char num[16];
    int stage = g_stage_index;
    (void)sig;
    _say("dltrain: ");
    _say(_signal_name(g_stop_signal));
    _say(" came ");
    _say(_decimal(g_grace, num));
    _say(" s ago, during start-up (");
    _say(stage >= 0 && stage < 2 ? g_stage[stage] : "before its first stage");
    _say("), which has not reached a point where it can stop: ending now; nothing was trained in this run");
    _say(g_startup_status == DLT_EXIT_PREEMPTED ? ", so the newest checkpoint stays the one to resume from; exit "
                                                  "status "
                                                : "; exit status ");
    _say(_decimal(g_startup_status, num));
    _say("\n");
    _exit(g_startup_status);
}

/* A second Ctrl-C quits at once, saying so (write and _exit only: async-signal-safe), as an
 * interactive user who presses it again expects. */
static void _on_signal(int sig)
{
    if (sig == SIGINT && g_stop_signal == SIGINT) {
        static const char msg[] = "dltrain: second interrupt (Ctrl-C): quitting now, without the checkpoint\n";
        ssize_t w = write(STDERR_FILENO, msg, sizeof(msg) - 1);
        (void)w;
        _exit(DLT_EXIT_INTERRUPTED);
    }
    if (g_startup && !g_stop_signal)
        alarm((unsigned)g_grace);
    g_stop_signal = sig;
}

void dlt_stop_signal_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = _on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sa.sa_handler = _on_startup_timeout;
    sigaction(SIGALRM, &sa, NULL);
    g_startup = 1;
}

void dlt_stop_signal_stage(const char *stage)
{
    int next = g_stage_index == 0 ? 1 : 0;
    snprintf(g_stage[next], sizeof(g_stage[next]), "%s", stage);
    g_stage_index = next;
}

void dlt_stop_signal_startup_grace(double seconds)
{
    g_grace = !(seconds >= 1)                          ? 1
              : seconds > DLT_STOP_STARTUP_GRACE_MAX_S ? DLT_STOP_STARTUP_GRACE_MAX_S
                                                       : (int)seconds;
}

void dlt_stop_signal_startup_status(int exit_status)
{
    g_startup_status = exit_status;
}

void dlt_stop_signal_startup_end(void)
{
    g_startup = 0;
    alarm(0);
}

volatile sig_atomic_t *dlt_stop_signal_flag(void)
{
    return &g_stop_signal;
}
