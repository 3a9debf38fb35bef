#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The GPU check script without a GPU: its dry run lists every phase (the two-rank phase right after
# the op checks), the 480 s deadline and the kill rule; with no GPU it skips saying so; with a
# stand-in nvidia-smi that reports a GPU and a deadline too short for any phase, it starts nothing
# and still prints the table of phases and the verdict. The two-rank launcher starts its ranks with
# their rendezvous variables and ends the others when one fails.
. "$(dirname "$0")/../slurm/lib.sh"
tap_plan 5
RUN=$DLT_SRCDIR/tests/device/run.sh
rm -rf "$WORK"/*
mkdir -p "$WORK/bin" "$WORK/nogpu"
cat >"$WORK/bin/nvidia-smi" <<'SH'
#!/bin/sh
case "$*" in
  *-L*) echo "GPU 0: Stand-in H200 (UUID: GPU-00000000-0000-0000-0000-000000000000)" ;;
  *) echo "Stand-in H200, 143771 MiB, 999.99" ;;
esac
SH
chmod +x "$WORK/bin/nvidia-smi"

out=$(OUT=$WORK/dry bash "$RUN" --dry-run 2>&1); rc=$?
phases=$(grep -c '^device: phase ' <<<"$out")
order=$(grep '^device: phase ' <<<"$out" | awk '{print $3}' | tr '\n' ' ')
if ((rc == 0 && phases == 9)) && [[ $out == *"deadline 480 s"* && $order == "unpack ops multi-rank train-identity"* &&
      $out == *"phase multi-rank (starts with"* && $out == *"phase bench"* && $out == *"two NCCL ranks on one GPU"* &&
      $out == *"multi-rank: NOT TESTED, counted as cut"* && $out == *"timeout -k 5"* ]]; then
  ok "dry run: $phases phases ($order), the 480 s deadline, the two-rank phase after the op checks, timeout -k"
else not_ok "dry run (rc=$rc, $phases phases: $order)"; echo "$out" | diag; fi
# The phases' caps fit the deadline.
caps=$(grep -o 'at most [0-9]* s' <<<"$out" | awk '{s += $3} END {print s}')
if ((caps <= 480)); then ok "the phases' caps add up to $caps s <= 480 s"; else not_ok "the phases' caps add up to $caps s > 480 s"; fi

out=$(PATH=$WORK/nogpu:/usr/bin:/bin OUT=$WORK/nogpu-out bash "$RUN" 2>&1); rc=$?
if ((rc == 0)) && [[ $out == *"SKIP: no GPU visible"* ]]; then ok "no GPU: skipped, saying so"; else not_ok "no GPU (rc=$rc)"; echo "$out" | diag; fi

start=$SECONDS
out=$(PATH=$WORK/bin:$PATH DLT_DEVICE_DEADLINE=2 OUT=$WORK/short bash "$RUN" 2>&1); rc=$?
if ((rc == 2 && SECONDS - start < 30)) && [[ $out == *"unpack not started"* && $out == *"unpack           skipped: deadline"* && $out == *"bench            not run"* && $out == *"of 2 s"* ]]; then
  ok "a deadline too short for any phase: nothing started, the table printed, exit 2 (phases cut)"
else not_ok "deadline handling (rc=$rc)"; echo "$out" | diag; fi
TWO=$DLT_SRCDIR/tests/device/two_ranks.sh
out=$(bash "$TWO" 2 sh -c 'echo "rank $DLTPMIX_TEST_RANK of $DLTPMIX_TEST_SIZE dir=${DLTPMIX_TEST_RENDEZVOUS:+set}"' 2>&1); rc=$?
out2=$(timeout 20 bash "$TWO" 2 sh -c 'if [ "$DLTPMIX_TEST_RANK" = 1 ]; then exit 3; fi; exec sleep 15' 2>&1); rc2=$?
if ((rc == 0 && rc2 == 3)) && [[ $out == *"[rank 0] rank 0 of 2 dir=set"* && $out == *"[rank 1] rank 1 of 2 dir=set"* &&
      $out2 == *"rank 1 exited 3: ending the others"* ]]; then
  ok "two_ranks.sh: both ranks with their rendezvous; a failing rank ends the other, its status returned"
else not_ok "two_ranks.sh (rc=$rc, rc2=$rc2)"; { echo "$out"; echo "$out2"; } | diag; fi
exit 0
