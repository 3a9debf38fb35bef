#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Validation during training: every epoch on ROOT/val by default (each image once), logged and in
# the metrics file as MLPerf-style events; the weights bit-identical to a run without it; the last
# validation equal to `dltrain eval` of the final checkpoint; --target-top1 stopping the run at the
# first validation reaching it, with its checkpoint and the time to target; dltrain eval taking the
# model from the checkpoint's state file (a contradicting option refused naming both values; a
# model file without a state file, as torchvision exports, still evaluated given the options).
. "$(dirname "$0")/../slurm/lib.sh"
DLTRAIN=$DLT_BUILDDIR/trainer/dltrain
MK=$DLT_BUILDDIR/tests/fixtures/mkjpegs
[[ -x $DLTRAIN && -x $MK ]] || skip_all "dltrain or mkjpegs not built"
tap_plan 9
rm -rf "$WORK"/*
"$MK" folder "$WORK/ds" 4 24 48 40 plain
: >"$WORK/ds/val/c02/zz_extra_missing_label.txt" # not an image: ignored by the folder reader
SMALL=(--arch resnet18 --width 0.25 --image-size 32 --batch 20 --warmup-epochs 0 --lr 0.4 --label-smoothing 0 --workers 2 --log-every 0)
nval=$(find "$WORK/ds/val" -name '*.JPEG' | wc -l)

out=$("$DLTRAIN" train --data "$WORK/ds" "${SMALL[@]}" --epochs 3 --checkpoint-dir "$WORK/a" --metrics "$WORK/a.jsonl" 2>&1); rc=$?
n=$(grep -c "val top-1 .* ($nval images" <<<"$out")
ev=$(grep -c '"key":"eval_accuracy".*"val_images":'"$nval"',' "$WORK/a.jsonl" 2>/dev/null)
if ((rc == 0 && n == 3 && ev == 3)) && grep -q '"event_type":"INTERVAL_START","key":"run_start"' "$WORK/a.jsonl" && grep -q '"event_type":"INTERVAL_END","key":"run_stop","value":null,"metadata":{"time":[0-9.]*,"status":"success"' "$WORK/a.jsonl" && [[ $(grep -c '"key":"epoch_start"' "$WORK/a.jsonl") == 3 ]]; then
  ok "3 epochs: 3 validations of all $nval images (none dropped at batch 20), logged and as MLPerf-format eval_accuracy events between run_start/run_stop"
else not_ok "validation each epoch (rc=$rc, $n lines, $ev events)"; { echo "$out"; cat "$WORK/a.jsonl"; } | tail -12 | diag; fi

"$DLTRAIN" train --data "$WORK/ds" "${SMALL[@]}" --epochs 3 --checkpoint-dir "$WORK/b" --eval-every 0 >"$WORK/b.out" 2>&1
if cmp -s "$WORK/a/ckpt-00000012.safetensors" "$WORK/b/ckpt-00000012.safetensors" && ! grep -q 'val top-1' "$WORK/b.out"; then
  ok "the weights with validation each epoch are bit-identical to --eval-every 0 (BN statistics included)"
else not_ok "training state touched by validation"; ls -l "$WORK/a" "$WORK/b" | diag; fi

last=$(grep -o 'epoch 3 val top-1 [0-9.]*' <<<"$out" | awk '{print $5}')
ev=$("$DLTRAIN" eval --data "$WORK/ds" "${SMALL[@]}" --checkpoint "$WORK/a/ckpt-00000012.safetensors" 2>&1)
e1=$(sed -n 's/.*: \([0-9]*\) images, top-1 \([0-9.]*\),.*/\1 \2/p' <<<"$ev")
if [[ -n $last && $e1 == "$nval $last" ]]; then ok "the last validation ($last) is what dltrain eval of the final checkpoint gives ($e1)"; else not_ok "validation vs eval ($last vs $e1)"; echo "$ev" | diag; fi

out=$("$DLTRAIN" train --data "$WORK/ds" "${SMALL[@]}" --epochs 6 --target-top1 0.01 --checkpoint-dir "$WORK/c" --metrics "$WORK/c.jsonl" 2>&1); rc=$?
if ((rc == 0)) && [[ $out == *"target top-1 0.0100 reached at epoch 1 (step 4): time to target"* && -f $WORK/c/ckpt-00000004.safetensors && $(ls "$WORK/c" | grep -c -v state) == 1 ]] && grep -q '"status":"success","step_num":4' "$WORK/c.jsonl"; then
  ok "--target-top1: the run stops at the first validation reaching it, checkpoints there, says the time to target"
else not_ok "--target-top1 (rc=$rc)"; { echo "$out"; ls "$WORK/c"; } | tail -6 | diag; fi

out=$("$DLTRAIN" train --synthetic "${SMALL[@]}" --synthetic-size 40 --epochs 1 --eval-every 1 --eval-size 50 2>&1); rc=$?
out2=$("$DLTRAIN" train --data "$WORK/ds" "${SMALL[@]}" --epochs 1 --val-data "$WORK/nowhere" 2>&1); rc2=$?
if ((rc == 0 && rc2 != 0)) && [[ $out == *"epoch 1 val top-1"* && $out2 == *"--val-data $WORK/nowhere: No such file or directory"* ]]; then
  ok "generated data validates on request; a missing --val-data is an error naming it"
else not_ok "synthetic validation / missing val data (rc=$rc, rc2=$rc2)"; { echo "$out"; echo "$out2"; } | tail -6 | diag; fi
ck=$WORK/a/ckpt-00000012.safetensors
bare=$("$DLTRAIN" eval --data "$WORK/ds" --batch 32 --checkpoint "$ck" 2>&1); rc=$?
if ((rc == 0)) && [[ $bare == *"96 images, top-1 $last,"* ]]; then ok "dltrain eval without model options: arch, width, image size and classes from the state file (top-1 $last)"; else not_ok "model from the checkpoint (rc=$rc)"; echo "$bare" | tail -3 | diag; fi
out=$("$DLTRAIN" eval --data "$WORK/ds" --arch resnet34 --checkpoint "$ck" 2>&1); rc=$?
out2=$("$DLTRAIN" eval --data "$WORK/ds" --width 0.5 --checkpoint "$ck" 2>&1); rc2=$?
if ((rc == 2 && rc2 == 2)) && [[ $out == *"--arch resnet34, but the checkpoint was trained as resnet18"* && $out2 == *"--width 0.5, but the checkpoint was trained with width 0.25"* ]]; then
  ok "an option contradicting the checkpoint is refused, naming both values"
else not_ok "contradicting options (rc=$rc/$rc2)"; { echo "$out"; echo "$out2"; } | diag; fi
mkdir -p "$WORK/tv"; cp "$ck" "$WORK/tv/exported.safetensors"
out=$("$DLTRAIN" eval --data "$WORK/ds" "${SMALL[@]}" --checkpoint "$WORK/tv/exported.safetensors" 2>&1); rc=$?
if ((rc == 0)) && [[ $out == *"unverified"* && $out == *"96 images, top-1 $last,"* ]]; then ok "a model file without a state file (a torchvision export) is evaluated given --arch etc., said unverified"; else not_ok "bare model file (rc=$rc)"; echo "$out" | tail -3 | diag; fi
out=$(python3 "$DLT_SRCDIR/contrib/report.py" "$WORK/a.jsonl" --accuracy-svg "$WORK/acc.svg" 2>&1); rc=$?
if ((rc == 0)) && grep -qE "^a\.jsonl +3 +[0-9.]+% +[0-9]+ " <<<"$out" && python3 -c 'import sys, xml.dom.minidom as m; d = m.parse(sys.argv[1]); assert len(d.getElementsByTagName("polyline")) == 2' "$WORK/acc.svg"; then
  ok "contrib/report.py: best/final validation top-1 per run, and top-1 against epochs and training time as SVG"
else not_ok "report.py accuracy (rc=$rc)"; echo "$out" | diag; fi
exit 0
