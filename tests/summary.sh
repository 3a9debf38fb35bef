#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# summary.sh [DIR]: counts the test results automake recorded (*.trs, one line per TAP test
# point) and prints "N passed, N failed" (skips are listed, not counted as passes).
# Exit status 1 when anything failed or errored, or when nothing ran at all.
dir=${1:-.}
pass=0 fail=0 skip=0
while IFS= read -r line; do
  case "$line" in
    ":test-result: PASS"*|":test-result: XFAIL"*) pass=$((pass + 1)) ;;
    ":test-result: FAIL"*|":test-result: ERROR"*|":test-result: XPASS"*) fail=$((fail + 1)) ;;
    ":test-result: SKIP"*) skip=$((skip + 1)) ;;
  esac
done < <(find "$dir" -name '*.trs' -not -path '*/_build/*' -exec cat {} + 2>/dev/null)
extra_pass=${DLT_EXTRA_PASS:-0} extra_fail=${DLT_EXTRA_FAIL:-0}
pass=$((pass + extra_pass)); fail=$((fail + extra_fail))
((skip)) && echo "($skip skipped; see the .log files for why)"
echo "$pass passed, $fail failed"
((fail == 0 && pass > 0))
