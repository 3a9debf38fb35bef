#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A stop signal during validation: validation is abandoned at the next batch (it changes no
# weights) and the checkpoint is written at once, exit 75 (it used to finish the whole pass, then
# run one more training step, before saving: past a short preemption warning, SIGKILL and nothing
# saved). The time from the signal to the exit is printed.
. "$(dirname "$0")/../slurm/lib.sh"
DLTRAIN=$DLT_BUILDDIR/trainer/dltrain
[[ -x $DLTRAIN ]] || skip_all "dltrain not built"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
tap_plan 2
rm -rf "${WORK:?}" && mkdir -p "$WORK"
# 8 steps per epoch, then a validation of 32768 generated images (4096 batches: seconds even on a fast
# machine); the signal comes 0.3 s into it.
"$DLTRAIN" train --arch resnet18 --width 0.25 --image-size 32 --classes 4 --warmup-epochs 0 --log-every 1 --batch 8 \
  --synthetic-size 64 --epochs 4 --eval-every 1 --eval-size 32768 --checkpoint-dir "$WORK/ck" \
  --metrics "$WORK/m.jsonl" >"$WORK/out" 2>&1 &
pid=$!
for _ in $(seq 1200); do grep -q '"step":8,' "$WORK/m.jsonl" 2>/dev/null && break; sleep 0.05; done
sleep 0.3
t0=$(date +%s.%N)
kill -USR1 "$pid"
for _ in $(seq 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
t1=$(date +%s.%N)
kill -KILL "$pid" 2>/dev/null
wait "$pid"; rc=$?
took=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b - a}')
out=$(cat "$WORK/out")
if ((rc == 75)) && [[ $out == *"stop requested (signal) during validation: abandoned after batch"* &&
      $out == *"stop requested (signal) at step 8: checkpointing"* && -f $WORK/ck/ckpt-00000008.safetensors &&
      $out != *"val top-1"* ]] && ! grep -q '"step":9,' "$WORK/m.jsonl"; then
  ok "USR1 during validation: abandoned, checkpoint of step 8 written, no further step, exit 75, ${took} s from signal to exit"
else not_ok "stop during validation (rc=$rc, ${took} s)"; tail -6 "$WORK/out" | diag; fi
out=$(timeout 120 "$DLTRAIN" train --arch resnet18 --width 0.25 --image-size 32 --classes 4 --warmup-epochs 0 \
  --log-every 1 --batch 8 --synthetic-size 64 --epochs 2 --eval-every 1 --eval-size 64 --checkpoint-dir "$WORK/ck" \
  --resume auto 2>&1); rc=$?
if ((rc == 0)) && [[ $out == *"resumed from $WORK/ck/ckpt-00000008"* ]]; then ok "--resume auto continues from that checkpoint"
else not_ok "resume after the stop in validation (rc=$rc)"; echo "$out" | tail -4 | diag; fi
exit 0
