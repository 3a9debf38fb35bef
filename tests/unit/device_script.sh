#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The GPU check script without a GPU: its dry run lists every phase and the deadline; with no GPU
# it skips saying so; with a stand-in nvidia-smi that reports a GPU and a deadline too short for
# any phase, it starts nothing and still prints the table of phases and the verdict.
. "$(dirname "$0")/../slurm/lib.sh"
tap_plan 3
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
if ((rc == 0 && phases == 9)) && [[ $out == *"deadline 540 s"* && $out == *"phase train-lowp"* && $out == *"phase bench"* && $out == *"NCCL refuses two ranks on one GPU"* ]]; then
  ok "dry run: $phases phases and the 540 s deadline, the one-GPU limit said"
else not_ok "dry run (rc=$rc, $phases phases)"; echo "$out" | diag; fi

out=$(PATH=$WORK/nogpu:/usr/bin:/bin OUT=$WORK/nogpu-out bash "$RUN" 2>&1); rc=$?
if ((rc == 0)) && [[ $out == *"SKIP: no GPU visible"* ]]; then ok "no GPU: skipped, saying so"; else not_ok "no GPU (rc=$rc)"; echo "$out" | diag; fi

start=$SECONDS
out=$(PATH=$WORK/bin:$PATH DLT_DEVICE_DEADLINE=2 OUT=$WORK/short bash "$RUN" 2>&1); rc=$?
if ((rc == 2 && SECONDS - start < 30)) && [[ $out == *"unpack not started"* && $out == *"unpack           skipped: deadline"* && $out == *"bench            not run"* && $out == *"of 2 s"* ]]; then
  ok "a deadline too short for any phase: nothing started, the table printed, exit 2 (phases cut)"
else not_ok "deadline handling (rc=$rc)"; echo "$out" | diag; fi
exit 0
