#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# summary.sh [DIR]: counts the test results automake recorded (*.trs, one line per TAP test
# point) and prints "N passed, N failed" (skips are listed, not counted as passes).
# Exit status 1 when anything failed or errored, or when nothing ran at all.
dir=${1:-.}
pass=0 fail=0 skip=0
# distcheck's results (under _build) are its own run's, not this one's
mapfile -t results < <(find "$dir" -name '*.trs' -not -path '*/_build/*' 2>/dev/null | sort)
while IFS= read -r line; do
  case "$line" in
    ":test-result: PASS"*|":test-result: XFAIL"*) pass=$((pass + 1)) ;;
    ":test-result: FAIL"*|":test-result: ERROR"*|":test-result: XPASS"*) fail=$((fail + 1)) ;;
    ":test-result: SKIP"*) skip=$((skip + 1)) ;;
  esac
done < <(((${#results[@]})) && cat "${results[@]}" 2>/dev/null)
# What failed, named next to the closing line (a CI log may be read from its end only): each
# failing test point with up to 6 of the diagnostic lines after it, then the failed CI steps (DLT_FAILED_STEPS).
if ((fail)); then
  echo "=== what failed"
  for trs in "${results[@]}"; do
    log=${trs%.trs}.log
    grep -q -E '^:test-result: (FAIL|ERROR|XPASS)' "$trs" || continue
    echo "--- ${log#./}"
    awk '/^(not ok|Bail out)/ || /^ERROR:/ && !seen++ {print; d = 6; next} d > 0 && /^#/ {print; d--; next} {d = 0}' \
      "$log" 2>/dev/null | head -40
  done
fi
while IFS= read -r step; do [[ -n $step ]] && echo "failed CI step: $step"; done <<<"${DLT_FAILED_STEPS:-}"
extra_pass=${DLT_EXTRA_PASS:-0} extra_fail=${DLT_EXTRA_FAIL:-0}
pass=$((pass + extra_pass)); fail=$((fail + extra_fail))
# Where the suite's time went: the slowest test scripts and programs (tests/timed_driver.sh).
mapfile -t timed < <(find "$dir" -name '*.seconds' -not -path '*/_build/*' 2>/dev/null)
if ((${#timed[@]})); then
  for f in "${timed[@]}"; do printf '%s %s\n' "$(cat "$f" 2>/dev/null)" "${f#./}"; done |
    awk '$1 ~ /^[0-9.]+$/ {name = $NF; sub(/\.seconds$/, "", name); cpu = (NF >= 3 && $2 ~ /^[0-9.]+$/) ? $2 : 0;
                           t += $1; c += cpu; a[n++] = sprintf("%8.1f s %8.1f s CPU  %s", $1, cpu, name)}
         END {if (n) printf "=== test time: %.0f s wall, %.0f s CPU in %d tests (summed; make -j runs them side by side; CPU: the processes each test waited for); the slowest:\n", t, c, n;
              for (i = 0; i < n; i++) print a[i]}' | { IFS= read -r head && echo "$head"; sort -rn | head -12; }
fi
((skip)) && echo "($skip skipped; see the .log files for why)"
echo "$pass passed, $fail failed"
((fail == 0 && pass > 0))
