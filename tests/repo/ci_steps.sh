#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# .ci/steps.sh, which .ci/run sources: each step timed and counted, a failing step said and
# counted as failed, then the wall time of every step and the total, and the results summary
# ("N passed, N failed") as the last line. Runs trivial commands in place of CI's steps.
. "$(dirname "$0")/../slurm/lib.sh"
tap_plan 4
# summary.sh leaves out results under a _build directory (distcheck's), where WORK lies in make
# distcheck: the stand-in result goes into a directory of its own.
rm -rf "${WORK:?}"; mkdir -p "$WORK"
TRS=$(mktemp -d /tmp/dltrain-ci-steps.XXXXXX) || exit 1
trap 'rm -rf "$TRS"' EXIT
printf ':test-result: PASS\n' >"$TRS/one.trs"
bash -n "$DLT_SRCDIR/.ci/run" 2>"$WORK/syntax" && ok ".ci/run parses (bash -n)" || { not_ok ".ci/run syntax"; diag <"$WORK/syntax"; }
out=$(cd "$DLT_SRCDIR" && bash -c '. .ci/steps.sh; step "one second" sleep 1; step "a failing step" false; timed "timed only" true; finish "$1"' _ "$TRS" 2>&1); rc=$?
times=$(sed -n '/^=== wall time per step$/,$p' <<<"$out")
if ((rc == 1)) && [[ $out == *"=== one second"* && $out == *"=== FAILED: a failing step"* ]] &&
   grep -qE '^ +0:00:0[12]  one second$' <<<"$times" && grep -qE '^ +0:00:00  a failing step$' <<<"$times" &&
   grep -qE '^ +0:00:00  timed only$' <<<"$times" && grep -qE '^ +0:00:0[12]  total$' <<<"$times"; then
  ok "each step's wall time (H:MM:SS) and the total, in the order they ran"
else not_ok "step times (rc=$rc)"; echo "$out" | diag; fi
if [[ $(tail -1 <<<"$out") == "2 passed, 1 failed" ]] && (($(grep -n 'total$' <<<"$out" | cut -d: -f1) < $(wc -l <<<"$out"))); then
  ok "the summary line stays last (2 passed: one step and one automake result; 1 failed: the failing step)"
else not_ok "summary line last"; echo "$out" | tail -3 | diag; fi
# A failing test point is named next to the closing line, with the diagnostics after it, and so
# is a failed step: a CI log read from its end says what failed.
printf ':test-result: PASS\n:test-result: FAIL\n' >"$TRS/two.trs"
printf 'ok 1 - fine\nnot ok 2 - the broken thing (3 lived)\n# its first diagnostic\n# its second\nok 3 - also fine\n# not this one\n' >"$TRS/two.log"
out=$(cd "$DLT_SRCDIR" && bash -c '. .ci/steps.sh; step "a failing step" false; finish "$1"' _ "$TRS" 2>&1); rc=$?
what=$(sed -n '/^=== what failed$/,$p' <<<"$out")
if ((rc == 1)) && [[ $(tail -1 <<<"$out") == "2 passed, 2 failed" ]] && grep -qx -- "--- ${TRS#./}/two.log" <<<"$what" &&
   grep -qx 'not ok 2 - the broken thing (3 lived)' <<<"$what" && grep -qx '# its second' <<<"$what" &&
   ! grep -q 'not this one\|^ok' <<<"$what" && grep -qx 'failed CI step: a failing step' <<<"$what"; then
  ok "the failing test point, its diagnostics and the failed step are named just before the closing line"
else not_ok "what failed"; echo "$out" | tail -12 | diag; fi
