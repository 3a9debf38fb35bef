#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# timed_driver.sh DRIVER...: runs automake's test driver (all arguments, as given) and writes the
# test's wall time in seconds beside its .trs (NAME.seconds: wall seconds, the CPU seconds of the
# test's waited-for processes (user + system; daemons it started are not counted), start time in
# epoch seconds), for tests/summary.sh's list of the slowest tests: the suite's time is a budget (the
# README's test command), and this says where it goes.
trs=
prev=
for a in "$@"; do
  [ "$prev" = --trs-file ] && trs=$a
  prev=$a
done
start=$(date +%s.%N)
"$@"
rc=$?
if [ -n "$trs" ]; then
  end=$(date +%s.%N)
  # `times`: the shell's own user and system time, then its children's (e.g. 0m1.250000s 0m0.100000s)
  # (written to a file first: in a pipe or $(...) it would run in a subshell, which has no children)
  times >"${trs%.trs}.seconds" 2>/dev/null
  cpu=$(awk 'NR == 2 { t = 0; for (i = 1; i <= 2; i++) { split($i, p, /[ms]/); t += p[1] * 60 + p[2] } printf "%.1f", t }' "${trs%.trs}.seconds" 2>/dev/null)
  awk -v s="$start" -v e="$end" -v c="${cpu:-0}" 'BEGIN { printf "%.1f %s %.0f\n", e - s, c, s }' >"${trs%.trs}.seconds" 2>/dev/null || true
fi
exit $rc
