#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The dltrain program's exit statuses live in one header (common/exit_status.h) and the man
# page's EXIT STATUS lists exactly those; the trainer's sources exit through the header's names,
# not bare numbers (a usage error that returned 1 was one such drift).
. "$(dirname "$0")/../slurm/lib.sh"
cd "$DLT_SRCDIR" || exit 1
H=common/exit_status.h
tap_plan 3

header=$(sed -n 's/^#define DLT_EXIT_[A-Z_]* \([0-9][0-9]*\)$/\1/p' "$H" | sort -n | tr '\n' ' ')
man=$(awk '/^\.SH EXIT STATUS/{on=1; next} /^\.SH /{on=0} on && prev == ".TP" && /^\.B [0-9]+$/ {print $2} {prev=$0}' man/dltrain.1 |
  sort -n | tr '\n' ' ')
if [[ -n $header && $header == "$man" ]]; then ok "man/dltrain.1 EXIT STATUS lists exactly the statuses of $H: $header"
else not_ok "exit statuses differ: $H has '$header', man/dltrain.1 EXIT STATUS has '$man'"; fi

# Each status is defined once: no other header defines a DLT_EXIT_ name.
dups=$(grep -rn --include='*.h' --include='*.c' -E '^#define DLT_EXIT_' trainer plugin pmix | grep -v "^$H:" || true)
if [[ -z $dups ]]; then ok "no DLT_EXIT_ status is defined outside $H"
else not_ok "statuses defined outside $H"; echo "$dups" | diag; fi

# The commands' statuses (trainer/cli/, preflight) and the program's own _exit calls use the names.
bare=$(grep -n -E '\breturn 2;|\? 2 :|\b_?exit\([0-9]+\)' trainer/cli/*.c trainer/train/preflight.c common/stop_signal.c \
  trainer/train/watchdog.c | grep -v -E '\breturn 0;|\b_?exit\(0\)' || true)
if [[ -z $bare ]]; then ok "the commands return and exit through the header's names (no bare status numbers)"
else not_ok "bare exit statuses"; echo "$bare" | diag; fi
