/* SPDX-License-Identifier: Apache-2.0 */
/* stop_signal: the stop request of TERM, USR1 and INT. */
#include "config.h"

#include "common/exit_status.h"
#include "common/stop_signal.h"

#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t g_stop_signal;

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
}

volatile sig_atomic_t *dlt_stop_signal_flag(void)
{
    return &g_stop_signal;
}
