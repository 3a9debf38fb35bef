# SPDX-License-Identifier: Apache-2.0
# .ci/steps.sh: sourced by .ci/run. Each CI step counted as one result and timed, and the end:
# the wall time of every step and the total, then tests/summary.sh's "N passed, N failed" last.
extra_pass=0 extra_fail=0 failed_steps=""
ci_t0=$SECONDS
ci_times=()  # "SECONDS<TAB>NAME", in the order the steps ran

# timed NAME CMD...: runs CMD, records its wall time under NAME, returns its status.
timed() {
  local name=$1 t0=$SECONDS rc
  shift
  "$@"
  rc=$?
  ci_times+=("$((SECONDS - t0))"$'\t'"$name")
  return $rc
}

# step NAME CMD...: a CI step outside automake counts as one result.
step() {
  local name=$1
  shift
  echo "=== $name"
  if timed "$name" "$@"; then extra_pass=$((extra_pass + 1)); else echo "=== FAILED: $name"; extra_fail=$((extra_fail + 1)); failed_steps+=$name$'\n'; return 1; fi
}

# failing_logs DIR [FIND TESTS]: the last 40 lines of each test log under DIR that records a failure.
failing_logs() {
  local f
  for f in $(find "$@" -name '*.log' 2>/dev/null); do
    grep -q -E '^(not ok|Bail out)|^(FAIL|ERROR):' "$f" && { echo "--- $f"; tail -40 "$f"; }
  done
  return 0
}

_hms() { printf '%d:%02d:%02d' $(($1 / 3600)) $(($1 / 60 % 60)) $(($1 % 60)); }

print_times() {
  local t
  echo "=== wall time per step"
  for t in "${ci_times[@]}"; do printf '%9s  %s\n' "$(_hms "${t%%$'\t'*}")" "${t#*$'\t'}"; done
  printf '%9s  %s\n' "$(_hms $((SECONDS - ci_t0)))" "total"
}

# finish [DIR]: the times, then the results summary (its line stays last); exits with its status.
finish() {
  print_times
  DLT_EXTRA_PASS=$extra_pass DLT_EXTRA_FAIL=$extra_fail DLT_FAILED_STEPS=$failed_steps bash tests/summary.sh "${1:-.}"
  exit $?
}
