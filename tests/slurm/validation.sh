#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Validation during training on 2 nodes x 2 ranks: every validation image scored once over the
# ranks (a share per rank that the batch does not divide), with rank 0's BN statistics, so the
# last validation is exactly what a one-rank dltrain eval of the final checkpoint gives; then, also
# across the ranks, fine-tuning from that checkpoint (--init) up to a target accuracy
# (--target-top1), and dltrain eval with the model taken from the checkpoint.
. "$(dirname "$0")/lib.sh"
data_test_start 2 11 3
"$MK" folder "$WORK/ds" 4 23 40 40 plain # 92 validation images: 23 per rank, batch 7
SMALL=(--arch resnet18 --width 0.25 --image-size 32 --batch 7 --workers 1 --log-every 0 --lr 0.4 --warmup-epochs 0)
out=$(timeout 300 srun --quiet -N2 --ntasks-per-node=2 --gpus-per-node=2 --mpi=pmix --dl-train "$DLTRAIN" train --data "$WORK/ds" \
      "${SMALL[@]}" --epochs 3 --checkpoint-dir "$WORK/ck" 2>&1); rc=$?
last=$(grep -o 'epoch 3 val top-1 [0-9.]* top-5 [0-9.]* (92 images' <<<"$out" | awk '{print $5}')
ck=$(ls "$WORK/ck" 2>/dev/null | grep -v state | tail -1)
one=$("$DLTRAIN" eval --data "$WORK/ds" "${SMALL[@]}" --batch 32 --checkpoint "$WORK/ck/$ck" 2>&1 | sed -n 's/.*: 92 images, top-1 \([0-9.]*\),.*/\1/p')
if ((rc == 0)) && [[ -n $last && $last == "$one" && $(grep -c 'val top-1' <<<"$out") == 3 ]]; then
  ok "4 ranks validate all 92 images each epoch; the last ($last) equals one-rank eval of the checkpoint ($one)"
else not_ok "validation across ranks (rc=$rc, '$last' vs '$one')"; echo "$out" | tail -6 | diag; fi
out=$(timeout 300 srun --quiet -N2 --ntasks-per-node=2 --gpus-per-node=2 --mpi=pmix --dl-train "$DLTRAIN" train --data "$WORK/ds" \
      "${SMALL[@]}" --epochs 4 --init "$WORK/ck/$ck" --target-top1 0.01 --checkpoint-dir "$WORK/ft" --metrics "$WORK/ft.jsonl" 2>&1); rc=$?
if ((rc == 0)) && [[ $out == *"initialised from $WORK/ck/$ck"* && $out == *"target top-1 0.0100 reached at epoch 1"* && $out == *"time to target"* ]] &&
   grep -q '"key":"run_stop".*"status":"success"' "$WORK/ft.jsonl" && [[ $(ls "$WORK/ft" | grep -c -v state) == 1 ]]; then
  ok "4 ranks: --init from the checkpoint, --target-top1 stops after the first validation reaching it, one checkpoint, run_stop success"
else not_ok "--init / --target-top1 across ranks (rc=$rc)"; echo "$out" | tail -6 | diag; fi
out=$(timeout 120 srun --quiet -N2 --ntasks-per-node=2 --gpus-per-node=2 --mpi=pmix --dl-train "$DLTRAIN" eval --data "$WORK/ds" \
      --batch 7 --workers 1 --checkpoint "$WORK/ck/$ck" 2>&1); rc=$?
if ((rc == 0)) && [[ $out == *": 92 images, top-1 $one,"* ]]; then ok "4 ranks: dltrain eval with no model options (taken from the checkpoint): 92 images, top-1 $one"; else not_ok "eval from the checkpoint across ranks (rc=$rc)"; echo "$out" | tail -4 | diag; fi
exit 0
