#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Resuming on one rank: a resume whose settings differ from the checkpoint's is refused naming each
# difference with both values (exit 2, nothing trained), unless --resume-override names the
# settings that may change; then the change is said, the step count follows the new global batch
# and the new checkpoint records the history. A pair left half-written (the model file without
# its state file, a temporary file of an interrupted save) is passed over by --resume auto for the
# previous complete one, saying so. Tasks of a job array that share one --checkpoint-dir but read
# other data: --resume auto refuses the other task's checkpoint naming both data sets, --resume
# FILE continues from it on purpose, saying so; a checkpoint written before the data was recorded
# still resumes. The time to target after a resume counts every incarnation's training time, and
# the wall time since the first start, in the log line, the metrics events and contrib/report.py.
# A run stopped mid-epoch and resumed ends with the uninterrupted run's weights, byte for byte.
. "$(dirname "$0")/../slurm/lib.sh"
DLTRAIN=$DLT_BUILDDIR/trainer/dltrain
[[ -x $DLTRAIN ]] || skip_all "dltrain not built"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
tap_plan 14
rm -rf "${WORK:?}"/*
SYN=(--arch resnet18 --width 0.25 --image-size 32 --classes 4 --synthetic-size 64 --log-every 0 --warmup-epochs 0)
# Bounded: 60 s, or 240 s under the sanitizers (their runs are several times slower).
RUN_BOUND=60
[[ ${DLT_SANITIZED:-} ]] && RUN_BOUND=240
run() { local -n _o=$1 _r=$2; shift 2; _o=$(timeout "$RUN_BOUND" "$@" 2>&1); _r=$?; }

# ---- another configuration on resume
"$DLTRAIN" train "${SYN[@]}" --batch 8 --epochs 1 --checkpoint-dir "$WORK/a" >/dev/null 2>&1
sum0=$(md5sum "$WORK"/a/* | md5sum)
run out rc "$DLTRAIN" train "${SYN[@]}" --batch 16 --lr 0.2 --seed 5 --schedule cosine --epochs 2 --checkpoint-dir "$WORK/a" --resume auto
if ((rc == 2)) && [[ $out == *"--batch: checkpoint 8, now 16"* && $out == *"--lr: checkpoint 0.1, now 0.2"* && $out == *"--seed: checkpoint 1, now 5"* &&
  $out == *"--schedule: checkpoint step, now cosine"* && $out == *"--epochs: checkpoint 1, now 2"* && $out == *"--resume-override"* &&
  $out != *"training resnet18"* && $(md5sum "$WORK"/a/* | md5sum) == "$sum0" ]]; then
  ok "resume with --batch/--lr/--seed/--schedule changed: refused with exit 2, each difference named with both values"
else not_ok "resume with other settings (rc=$rc)"; echo "$out" | tail -8 | diag; fi

run out rc "$DLTRAIN" train "${SYN[@]}" --batch 8 --epochs 2 --checkpoint-dir "$WORK/a" --resume auto --resume-override classes
run out2 rc2 "$DLTRAIN" train "${SYN[@]}" --batch 8 --epochs 2 --checkpoint-dir "$WORK/a" --resume auto --resume-override batch,bogus
run out3 rc3 "$DLTRAIN" train "${SYN[@]}" --batch 8 --epochs 2 --resume-override batch
if ((rc == 2 && rc2 == 2 && rc3 == 2)) && [[ $out == *"classes cannot change on resume"* && $out2 == *"unknown setting 'bogus'"* && $out3 == *"only with --resume"* ]]; then
  ok "--resume-override refuses the model's shape, unknown names, and use without --resume"
else not_ok "--resume-override checks ($rc $rc2 $rc3)"; { echo "$out"; echo "$out2"; echo "$out3"; } | tail -6 | diag; fi

# In the same directory the new global batch's lower step numbers would lose to the old checkpoints
# at the next --resume auto: refused; in another directory it goes on.
run out0 rc0 "$DLTRAIN" train "${SYN[@]}" --batch 16 --lr 0.2 --epochs 3 --checkpoint-dir "$WORK/a" --resume auto --resume-override batch,lr
run out rc "$DLTRAIN" train "${SYN[@]}" --batch 16 --lr 0.2 --epochs 3 --checkpoint-dir "$WORK/a2" --resume "$WORK/a/ckpt-00000008.safetensors" --resume-override batch,lr
run info irc "$DLTRAIN" info --checkpoint "$WORK/a2/ckpt-00000012.safetensors" --verify
if ((rc0 == 1 && rc == 0 && irc == 0)) && [[ $out0 == *"continues as step 4, but $WORK/a holds checkpoints up to step 8"*"give another --checkpoint-dir"* &&
  $out == *"--batch 8 -> 16, --lr 0.1 -> 0.2"* && $out == *"step 8 of the checkpoint (64 images) continues as step 4"* &&
  $info == *"changed on resume: step 8: --batch 8 -> 16, --lr 0.1 -> 0.2"* && $info == *"batch=16"* ]]; then
  ok "--resume-override batch,lr: the change is said, the step follows the global batch, the new checkpoint records the history"
else not_ok "resume with --resume-override (rc0=$rc0 rc=$rc irc=$irc)"; { echo "$out0"; echo "$out"; echo "$info"; } | tail -8 | diag; fi

# ---- the CRC-32 a checkpoint records is zlib's (Python's zlib.crc32 of the model file, an
# independent reference): files written before dltrain used zlib itself verify alike.
want=$(python3 -c 'import sys, zlib; print("%08x" % zlib.crc32(open(sys.argv[1], "rb").read()))' "$WORK/a2/ckpt-00000012.safetensors")
if [[ -n $want && $info == *"CRC-32 $want match"* ]]; then ok "the recorded CRC-32 is zlib's ($want, Python's zlib.crc32 of the model file)"
else not_ok "recorded CRC-32 against zlib's ($want)"; grep -o 'CRC-32 [0-9a-f]*' <<<"$info" | diag; fi

# ---- a disk that fills between the model file and the state file (a small tmpfs, where this
# machine lets us mount one): the pair appears whole or not at all.
B=(--batch 8 --epochs 2)
mkdir -p "$WORK/full"
if mount -t tmpfs -o size=10m tmpfs "$WORK/full" 2>/dev/null; then
  trap 'umount "$WORK/full" 2>/dev/null' EXIT
  "$DLTRAIN" train "${SYN[@]}" "${B[@]}" --steps 8 --checkpoint-dir "$WORK/full" >/dev/null 2>&1
  # 10 MiB holds the step-8 pair and the step-16 model file, not the step-16 state file.
  run out rc "$DLTRAIN" train "${SYN[@]}" "${B[@]}" --checkpoint-dir "$WORK/full" --resume auto
  files=$(cd "$WORK/full" && echo *)
  run out2 rc2 "$DLTRAIN" train "${SYN[@]}" "${B[@]}" --steps 9 --checkpoint-dir "$WORK/full" --resume auto
  if ((rc == 1)) && [[ $out == *"checkpoint at step 16 FAILED"*"No space left on device"* && $files == "ckpt-00000008.safetensors ckpt-00000008.state.safetensors" &&
    $out2 == *"resumed from $WORK/full/ckpt-00000008.safetensors at step 8"* ]]; then
    ok "the disk fills while the state file is written: the failure is said, no model file is left alone, auto resumes from the previous pair"
  else not_ok "full disk between model and state file (rc=$rc, files: $files)"; { echo "$out"; echo "$out2"; } | tail -6 | diag; fi
  umount "$WORK/full"; trap - EXIT
else
  ok "# SKIP cannot mount a tmpfs here to fill a disk"
fi

# ---- a save interrupted between the two renames: the newest model file has no state file
mkdir -p "$WORK/half"
"$DLTRAIN" train "${SYN[@]}" "${B[@]}" --steps 8 --checkpoint-dir "$WORK/half" >/dev/null 2>&1
cp "$WORK/half/ckpt-00000008.safetensors" "$WORK/half/ckpt-00000016.safetensors"
run out rc "$DLTRAIN" train "${SYN[@]}" "${B[@]}" --checkpoint-dir "$WORK/half" --resume auto
if ((rc == 0)) && [[ $out == *"skipping checkpoint $WORK/half/ckpt-00000016.safetensors: no state file beside it: an incomplete checkpoint"* &&
  $out == *"resuming from the newest complete and valid checkpoint, $WORK/half/ckpt-00000008.safetensors"* &&
  $out == *"resumed from $WORK/half/ckpt-00000008.safetensors at step 8"* ]]; then
  ok "--resume auto passes over an incomplete newest pair for the previous complete one and says so"
else not_ok "incomplete newest pair (rc=$rc)"; echo "$out" | tail -5 | diag; fi

# ---- the words for a pair that does not match
"$DLTRAIN" train "${SYN[@]}" "${B[@]}" --checkpoint-every 8 --checkpoint-dir "$WORK/w" >/dev/null 2>&1
cp -r "$WORK/w" "$WORK/other"
cp "$WORK/other/ckpt-00000008.state.safetensors" "$WORK/other/ckpt-00000016.state.safetensors"
run out rc "$DLTRAIN" train "${SYN[@]}" --batch 8 --epochs 3 --resume "$WORK/other/ckpt-00000016.safetensors"
run out2 rc2 "$DLTRAIN" info --checkpoint "$WORK/other/ckpt-00000016.safetensors" --verify
if ((rc == 1 && rc2 == 1)) && [[ $out == *"which belongs to another model file, $WORK/other/ckpt-00000008.safetensors"* && $out2 == *"belongs to another model file"* && $out != *"changed or damaged"* ]]; then
  ok "another checkpoint's state file beside a model file: said to belong to another model file, not 'damaged'"
else not_ok "state file of another checkpoint ($rc $rc2)"; { echo "$out"; echo "$out2"; } | tail -4 | diag; fi
cp -r "$WORK/w" "$WORK/flip"
python3 - "$WORK/flip/ckpt-00000016.safetensors" <<'PY'
import sys
b = bytearray(open(sys.argv[1], "rb").read()); i = b.index(b'"conv1.weight"'); b[i + 12] ^= 1
open(sys.argv[1], "wb").write(b)
PY
run out rc "$DLTRAIN" train "${SYN[@]}" --batch 8 --epochs 3 --resume "$WORK/flip/ckpt-00000016.safetensors"
run out2 rc2 "$DLTRAIN" info --checkpoint "$WORK/flip/ckpt-00000016.safetensors" --verify
if ((rc == 1 && rc2 == 1)) && [[ $out == *"ckpt-00000016.safetensors has CRC-32"*"the model file was changed or damaged"* && $out2 == *"ckpt-00000016.safetensors has CRC-32"* && $out != *"not a resnet18"* ]]; then
  ok "a bit flip in a tensor name: --resume says CRC mismatch, as --verify does"
else not_ok "bit flip in a tensor name ($rc $rc2)"; { echo "$out"; echo "$out2"; } | tail -4 | diag; fi

# ---- a job array's tasks sharing one --checkpoint-dir with other data
MK=$DLT_BUILDDIR/tests/fixtures/mkjpegs
if [[ -x $MK ]]; then
  "$MK" folder "$WORK/dA" 4 6 40 40 plain >/dev/null
  "$MK" folder "$WORK/dB" 4 7 40 40 plain >/dev/null
  D=(--arch resnet18 --width 0.25 --image-size 32 --batch 8 --warmup-epochs 0 --log-every 0 --workers 1 --eval-every 0)
  "$DLTRAIN" train --data "$WORK/dA/train" "${D[@]}" --steps 3 --epochs 2 --checkpoint-dir "$WORK/arr" >/dev/null 2>&1
  run out rc "$DLTRAIN" train --data "$WORK/dB/train" "${D[@]}" --steps 6 --epochs 2 --checkpoint-dir "$WORK/arr" --resume auto
  if ((rc == 1)) && [[ $out == *"was written on other data"*"checkpoint: 24 images in 4 classes"*"this run: 28 images in 4 classes"* &&
    $out == *"give each task its own --checkpoint-dir"* && $out != *"resumed from"* && ! -f $WORK/arr/ckpt-00000006.safetensors ]]; then
    ok "--resume auto on another data set (a job array sharing a folder): refused, both data sets named"
  else not_ok "resume auto across data sets (rc=$rc)"; echo "$out" | tail -4 | diag; fi
  run out rc "$DLTRAIN" train --data "$WORK/dB/train" "${D[@]}" --steps 6 --epochs 2 --checkpoint-dir "$WORK/arr2" --resume "$WORK/arr/ckpt-00000003.safetensors"
  if ((rc == 0)) && [[ $out == *"continuing on other data as --resume FILE asks"*"checkpoint: 24 images"* && $out == *"resumed from $WORK/arr/ckpt-00000003.safetensors at step 3"* ]]; then
    ok "--resume FILE on another data set continues on purpose, saying so"
  else not_ok "resume FILE across data sets (rc=$rc)"; echo "$out" | tail -4 | diag; fi
  # the previous version's state file: no data record
  mkdir -p "$WORK/old" && cp "$WORK/arr/ckpt-00000003."* "$WORK/old/"
  python3 "$(dirname "$0")/old_checkpoint.py" "$WORK/old/ckpt-00000003.state.safetensors" data line parent_line parent_step train_seconds first_start
  run info irc "$DLTRAIN" info --checkpoint "$WORK/old/ckpt-00000003.safetensors" --verify
  run out rc "$DLTRAIN" train --data "$WORK/dB/train" "${D[@]}" --steps 6 --epochs 2 --checkpoint-dir "$WORK/old" --resume auto
  if ((irc == 0 && rc == 0)) && [[ $out == *"resumed from $WORK/old/ckpt-00000003.safetensors at step 3"* ]]; then
    ok "a checkpoint written before the data was recorded verifies and resumes with --resume auto"
  else not_ok "previous version's checkpoint (verify $irc, rc=$rc)"; { echo "$info"; echo "$out"; } | tail -4 | diag; fi

  # ---- time to target across a preemption: 30 steps, a pause, then on to the target
  "$DLTRAIN" train --data "$WORK/dA" "${D[@]}" --steps 30 --epochs 40 --checkpoint-dir "$WORK/tt" --metrics "$WORK/tt.jsonl" >/dev/null 2>&1
  t1=$(python3 -c 'import json,struct,sys; b=open(sys.argv[1],"rb").read(); n=struct.unpack("<Q",b[:8])[0]; print(json.loads(b[8:8+n])["__metadata__"].get("train_seconds","none"))' "$WORK/tt/ckpt-00000030.state.safetensors")
  sleep 2
  run out rc "$DLTRAIN" train --data "$WORK/dA" "${D[@]}" --epochs 40 --eval-every 1 --target-top1 0.01 --checkpoint-dir "$WORK/tt" --metrics "$WORK/tt.jsonl" --resume auto
  line=$(grep -o 'time to target [0-9.]* s of training ([0-9.]* s in this run), [0-9.]* s since the first start' <<<"$out")
  read -r tt this wall < <(sed 's/time to target \([0-9.]*\) s of training (\([0-9.]*\) s in this run), \([0-9.]*\) s since.*/\1 \2 \3/' <<<"$line")
  ev=$(python3 - "$WORK/tt.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"eval_accuracy"' in l]
m = rows[-1]["metadata"] if rows else {}
print(m.get("train_time", "none"), m.get("wall_time", "none"))
PY
)
  rep=$(python3 "$(dirname "$0")/../../contrib/report.py" "$WORK/tt.jsonl" 2>&1)
  if ((rc == 0)) && [[ $t1 != none && -n $line ]] && python3 -c 'import sys; t1,tt,this,wall,et,ew=map(float,sys.argv[1:]); sys.exit(not (tt + 0.1 >= t1 + this and tt >= t1 - 0.05 and wall >= tt + 1.9 and abs(et - tt) < 0.5 and ew >= et + 1.9))' "$t1" "$tt" "$this" "$wall" $ev; then
    ok "time to target after a resume: $tt s of training ($t1 s before the preemption + $this s), $wall s since the first start"
  else not_ok "time to target after a resume (rc=$rc, before: $t1, line: '$line', events: $ev)"; echo "$out" | tail -3 | diag; fi
  if [[ $rep == *"train s"*"wall s"* ]] && python3 -c 'import sys; r=sys.argv[1].splitlines(); i=[k for k,l in enumerate(r) if "train s" in l][0]; f=r[i+1].split(); sys.exit(not (abs(float(f[4]) - float(sys.argv[2])) < 0.5))' "$rep" "$tt"; then
    ok "contrib/report.py reports the best validation's training time over both runs and the wall time"
  else not_ok "report.py after a resume"; echo "$rep" | tail -4 | diag; fi
else
  for _ in 1 2 3 4 5; do ok "# SKIP mkjpegs not built"; done
fi

# Stopped at step 4 of a 6-step epoch of image files (the loader's position is what a resume
# must restore: generated images depend on the step alone), resumed to step 12 (two epochs on):
# the data stream continues where it stopped, so the weights are the uninterrupted run's.
rm -rf "$WORK/mid" && mkdir -p "$WORK/mid"
if [[ ! -x $MK ]]; then
  ok "# SKIP mkjpegs not built"
elif ! "$MK" folder "$WORK/mid/d" 4 12 40 40 plain >/dev/null; then
  not_ok "mkjpegs could not make the image folder $WORK/mid/d"
else
  MID=(--data "$WORK/mid/d" --arch resnet18 --width 0.25 --image-size 32 --batch 8 --epochs 3 --warmup-epochs 0
       --seed 3 --log-every 0 --workers 2)
  "$DLTRAIN" train "${MID[@]}" --steps 12 --checkpoint-dir "$WORK/mid/a" >/dev/null 2>&1; rc1=$?
  "$DLTRAIN" train "${MID[@]}" --steps 4 --checkpoint-dir "$WORK/mid/b" >/dev/null 2>&1; rc2=$?
  out=$("$DLTRAIN" train "${MID[@]}" --steps 12 --checkpoint-dir "$WORK/mid/b" --resume auto 2>&1); rc3=$?
  if ((rc1 == 0 && rc2 == 0 && rc3 == 0)) && [[ $out == *"resumed from $WORK/mid/b/ckpt-00000004.safetensors at step 4"* ]] &&
     cmp -s "$WORK/mid/a/ckpt-00000012.safetensors" "$WORK/mid/b/ckpt-00000012.safetensors"; then
    ok "stopped mid-epoch (step 4 of 6, image files) and resumed to step 12: the uninterrupted run's weights, byte for byte"
  else not_ok "mid-epoch resume (rc $rc1 $rc2 $rc3)"; echo "$out" | tail -4 | diag; fi
fi
