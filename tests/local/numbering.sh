#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# One numbering on one rank: steps count from 1 ("step k/N" after the k-th optimizer step) and every
# message about a step uses that k (the non-finite loss warning, the watchdog's first step); epochs
# count from 1 (the first epoch is "epoch 1") in the step lines, the validation line and the
# metrics' epoch_start and eval_accuracy events.
. "$(dirname "$0")/../slurm/lib.sh"
DLTRAIN=$DLT_BUILDDIR/trainer/dltrain
[[ -x $DLTRAIN ]] || skip_all "dltrain not built"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
tap_plan 4
rm -rf "${WORK:?}"/*
SYN=(--arch resnet18 --width 0.25 --image-size 32 --classes 4 --warmup-epochs 0 --log-every 1)
run() { local -n _o=$1 _r=$2; shift 2; _o=$(timeout 120 "$@" 2>&1); _r=$?; }

# 8 steps per epoch, 12 steps: the 8th ends epoch 1, the 9th is the first of epoch 2.
run out rc "$DLTRAIN" train "${SYN[@]}" --batch 8 --synthetic-size 64 --epochs 2 --steps 12 --eval-every 1 --eval-size 16 --metrics "$WORK/m.jsonl"
if ((rc == 0)) && [[ $out == *"epoch 1 step 1/12 "* && $out == *"epoch 1 step 8/12 "* && $out == *"epoch 2 step 9/12 "* && $out == *"epoch 1 val top-1"* && $out != *"epoch 0"* ]]; then
  ok "step lines and validation: the first epoch is epoch 1, step 8 of 8 per epoch ends it, step 9 starts epoch 2"
else not_ok "epochs in the step lines (rc=$rc)"; echo "$out" | grep -E "epoch" | head -12 | diag; fi
ev=$(grep -oE '"key":"(epoch_start|eval_accuracy)".*"epoch_num":[0-9]+,"step_num":[0-9]+' "$WORK/m.jsonl" | sed -E 's/"key":"([a-z_]*)".*"epoch_num":([0-9]+),"step_num":([0-9]+)/\1 \2 \3/' | tr '\n' ';')
if [[ $ev == "epoch_start 1 0;eval_accuracy 1 8;epoch_start 2 8;" ]]; then ok "metrics: epoch_start 1 at step 0, eval_accuracy of epoch 1 at step 8, epoch_start 2 at step 8"
else not_ok "epochs in the metrics events: $ev"; fi

# A diverging run: the warning names the step its step line shows.
run out rc "$DLTRAIN" train "${SYN[@]}" --batch 16 --synthetic-size 128 --epochs 3 --lr 1e9 --max-bad-steps 2
warned=$(sed -n 's/^dltrain: loss is .* at step \([0-9]*\): update skipped.*/\1/p' <<<"$out" | tr '\n' ' ')
logged=$(sed -n 's/^dltrain: epoch [0-9]* step \([0-9]*\)\/[0-9]* loss -*nan.*/\1/p' <<<"$out" | tr '\n' ' ')
last=$(sed -n 's/.*loss not finite for 3 consecutive steps (last at step \([0-9]*\)).*/\1/p' <<<"$out")
if ((rc != 0)) && [[ -n $warned && $warned == "$logged" && $last == $(($(awk '{print $NF}' <<<"$warned") + 1)) ]]; then
  ok "non-finite loss: the warnings name steps $warned, the step lines that show the NaN loss are the same"
else not_ok "non-finite loss numbering (rc=$rc, warned '$warned', logged '$logged', last '$last')"; echo "$out" | tail -6 | diag; fi

# The watchdog on the first step says step 1 (DLT_TEST_STALL counts steps the same way).
if have_test_hooks; then
run out rc env DLT_TEST_STALL=compute:1:30 "$DLTRAIN" train "${SYN[@]}" --batch 8 --synthetic-size 64 --epochs 1 --stall-timeout 1
if ((rc == 86)) && [[ $out == *"stuck in forward/backward for "*" s at step 1 "* && $out != *"step 1/8"* ]]; then
  ok "a stall in the first step: the watchdog says step 1, before any step line"
else not_ok "watchdog numbering (rc=$rc)"; echo "$out" | tail -3 | diag; fi
else
  ok "$NO_HOOKS: DLT_TEST_STALL"
fi
