#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# timed_driver.sh DRIVER...: runs automake's test driver (all arguments, as given) and writes the
# test's wall time in seconds beside its .trs (NAME.seconds), for tests/summary.sh's list of the
# slowest tests: the suite's time is a budget (the README's test command), and this says where it goes.
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
  awk -v s="$start" -v e="$end" 'BEGIN { printf "%.1f\n", e - s }' >"${trs%.trs}.seconds" 2>/dev/null || true
fi
exit $rc
