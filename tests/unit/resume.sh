#!/usr/bin/env bash
# Resuming on one rank: a resume whose settings differ from the checkpoint's is refused naming each
# difference with both values (exit 2, nothing trained), unless --resume-override names the
# settings that may change; then the change is said, the step count follows the new global batch
# and the new checkpoint records the history. A pair left half-written (the model file without
# its state file, a temporary file of an interrupted save) is passed over by --resume auto for the
# previous complete one, saying so.
. "$(dirname "$0")/../slurm/lib.sh"
DLTRAIN=$DLT_BUILDDIR/trainer/dltrain
[[ -x $DLTRAIN ]] || skip_all "dltrain not built"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
tap_plan 3
rm -rf "${WORK:?}"/*
SYN=(--arch resnet18 --width 0.25 --image-size 32 --classes 4 --synthetic-size 64 --log-every 0 --warmup-epochs 0)
run() { local -n _o=$1 _r=$2; shift 2; _o=$(timeout 60 "$@" 2>&1); _r=$?; }

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

run out rc "$DLTRAIN" train "${SYN[@]}" --batch 16 --lr 0.2 --epochs 3 --checkpoint-dir "$WORK/a" --resume auto --resume-override batch,lr
run info irc "$DLTRAIN" info --checkpoint "$WORK/a/ckpt-00000012.safetensors" --verify
if ((rc == 0 && irc == 0)) && [[ $out == *"--batch 8 -> 16, --lr 0.1 -> 0.2"* && $out == *"step 8 of the checkpoint (64 images) continues as step 4"* &&
  $info == *"changed on resume: step 8: --batch 8 -> 16, --lr 0.1 -> 0.2"* && $info == *"batch=16"* ]]; then
  ok "--resume-override batch,lr: the change is said, the step follows the global batch, the new checkpoint records the history"
else not_ok "resume with --resume-override (rc=$rc irc=$irc)"; { echo "$out"; echo "$info"; } | tail -8 | diag; fi
