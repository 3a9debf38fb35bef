#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The command line as a new user and a hostile tester meet it, one rank: numbers read strictly
# (" 8", "1e1", 20 digits), every choice checked (--comm), options the command or the backend does
# not use said or refused, DLT_LOG and --baseline checked before the run; user paths that are not
# regular files (a FIFO) refused by name instead of blocking; checkpoint options without
# --checkpoint-dir refused and a signal without one exiting with its own status; eval of --val-data
# alone; --synthetic/--noise with --data and --milestones out of order refused; the wording of
# --comm nccl on the CPU, a missing --checkpoint and --stall-timeout under 1 s; the host-wait share.
. "$(dirname "$0")/../slurm/lib.sh"
DLTRAIN=$DLT_BUILDDIR/trainer/dltrain
MK=$DLT_BUILDDIR/tests/fixtures/mkjpegs
[[ -x $DLTRAIN && -x $MK ]] || skip_all "dltrain or mkjpegs not built"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
unset DLT_LOG
tap_plan 13
rm -rf "${WORK:?}"/*
mkdir -p "$WORK"
SYN=(--arch resnet18 --width 0.25 --image-size 32 --classes 4 --batch 8 --synthetic-size 64 --log-every 0 --warmup-epochs 0)
# run OUTVAR RCVAR CMD...: stdout and stderr together, bounded (a hang shows as 124).
run() { local -n _o=$1 _r=$2; shift 2; _o=$(timeout 60 "$@" 2>&1 </dev/null); _r=$?; }

# ---- 18: numbers, choices, options the command or the backend does not use
bad=""
for v in " 8" "1e1" "+8" "8 " "7.0"; do
  run out rc "$DLTRAIN" train "${SYN[@]}" --steps 1 --batch "$v"
  q=; [[ $v == *" "* ]] && q="'"
  [[ $rc == 2 && $out == "dltrain: --batch $q$v$q: not a whole number"* ]] || bad+=" [--batch '$v': rc $rc: $out]"
done
run out rc "$DLTRAIN" train "${SYN[@]}" --steps 1 --batch 99999999999999999999
[[ $rc == 2 && $out == "dltrain: --batch 99999999999999999999: out of range"* ]] || bad+=" [20 digits: rc $rc: $out]"
run out rc "$DLTRAIN" train "${SYN[@]}" --steps 1 --lr " 0.1"
[[ $rc == 2 && $out == *"--lr ' 0.1': not a decimal number"* ]] || bad+=" [--lr ' 0.1': rc $rc: $out]"
run out rc "$DLTRAIN" train "${SYN[@]}" --steps 1 --comm foo
[[ $rc == 2 && $out == "dltrain: --comm foo: auto, single, mpi or nccl" ]] || bad+=" [--comm foo: rc $rc: $out]"
if [[ -z $bad ]]; then ok "--batch ' 8', '1e1', '+8', '8 ', '7.0' are not whole numbers; 20 digits are out of range; --lr ' 0.1' refused; --comm foo is a usage error (2)"
else not_ok "strict numbers and choices:$bad"; fi

bad=""
run out rc "$DLTRAIN" train "${SYN[@]}" --steps 1 --backend cpu --loss-scale 1024 --deterministic
[[ $rc == 2 && $out == "dltrain: --loss-scale, --deterministic: for the CUDA backend only, and this run uses the CPU backend (--backend cpu)"* ]] || bad+=" [CUDA options on the CPU: rc $rc: $out]"
run out rc "$DLTRAIN" train "${SYN[@]}" --steps 1 --backend cpu --precision fp16
[[ $rc == 2 && $out == "dltrain: --precision fp16 needs the CUDA backend"* ]] || bad+=" [fp16 on the CPU: rc $rc: $out]"
run out rc env DLT_LOG=garbage "$DLTRAIN" train "${SYN[@]}" --steps 1
[[ $rc == 2 && $out == "dltrain: DLT_LOG=garbage: quiet, info or verbose (or unset)" ]] || bad+=" [DLT_LOG=garbage: rc $rc: $out]"
echo garbage >"$WORK/baseline.jsonl"
run out rc "$DLTRAIN" train "${SYN[@]}" --steps 1 --baseline "$WORK/baseline.jsonl"
[[ $rc == 2 && $out == *"--baseline $WORK/baseline.jsonl: no interval line with images_per_s"* && $out != *"done:"* ]] || bad+=" [garbage --baseline: rc $rc: $out]"
if [[ -z $bad ]]; then ok "CUDA-only options and fp16 on the CPU backend, DLT_LOG=garbage and a --baseline without a usable line: refused before training (2)"
else not_ok "options the backend does not use, DLT_LOG, --baseline:$bad"; fi

"$DLTRAIN" train "${SYN[@]}" --steps 1 --checkpoint-dir "$WORK/ck" >"$WORK/train1.log" 2>&1
CK=$WORK/ck/ckpt-00000001.safetensors
run out rc "$DLTRAIN" eval "${SYN[@]}" --eval-size 16 --checkpoint "$CK" --steps 3 --resume auto
n=$(grep -c "does not use" <<<"$out")
if ((rc == 0 && n == 1)) && [[ $out == *"dltrain: warning: eval does not use --steps, --warmup-epochs, --synthetic-size, --log-every, --resume (see dltrain eval --help): ignored"* && $out == *": 16 images, top-1"* ]]; then
  ok "eval given train options (--steps, --resume, ...): one warning line naming them all; the evaluation runs"
else not_ok "options of another command (rc=$rc, $n warning lines)"; echo "$out" | diag; fi
if grep -q "done: 1 step in" "$WORK/train1.log"; then ok "'done: 1 step' (not '1 steps')"
else not_ok "plural of one step"; grep done: "$WORK/train1.log" | diag; fi

# ---- 2: a FIFO (or any non-regular file) named as a user path is refused by name, never waited on
rm -f "$WORK/fifo"; mkfifo "$WORK/fifo"
"$MK" folder "$WORK/ds" 2 4 40 40 plain >/dev/null # 8 train and 8 val images, 2 classes
F=$WORK/fifo
bad=""
for a in "--metrics $F" "--init $F" "--resume $F" "--dump-batch $F" "--baseline $F" "--data $WORK/ds --val-data $WORK/ds/val --val-labels $F" "--data $F"; do
  out=$(timeout 20 "$DLTRAIN" train "${SYN[@]}" --steps 1 $a 2>&1 </dev/null); rc=$?
  opt=${a%% *}; [[ $a == *val-labels* ]] && opt=--val-labels
  [[ $rc == 1 || $rc == 2 ]] && [[ $out == *"$opt $F: a FIFO, not a"* ]] || bad+=" [train $a: rc $rc: $(tail -1 <<<"$out")]"
done
run out rc "$DLTRAIN" eval "${SYN[@]}" --checkpoint "$F"
[[ $rc == 2 && $out == *"--checkpoint $F: a FIFO, not a regular file"* ]] || bad+=" [eval --checkpoint: rc $rc]"
run out rc "$DLTRAIN" info --checkpoint "$F" --verify # straight to the checkpoint reader: no check before it
[[ $rc == 1 && $out == *"$F: a FIFO, not a regular file"* ]] || bad+=" [info --verify: rc $rc: $out]"
run out rc "$DLTRAIN" data pack "$WORK/ds/train" "$F"
[[ $rc == 2 && $out == *"$F: a FIFO, not a regular file"* ]] || bad+=" [data pack: rc $rc: $out]"
run out rc "$DLTRAIN" data pack "$WORK/ds/train" "$WORK/p.rec" --labels "$F"
[[ $rc == 1 && $out == *"labels file $F: a FIFO, not a regular file"* ]] || bad+=" [data pack --labels: rc $rc: $out]"
if [[ -z $bad ]]; then ok "a FIFO as --metrics, --init, --resume, --dump-batch, --baseline, --val-labels, --data, eval --checkpoint, info --verify, data pack output and --labels: refused by name at once"
else not_ok "FIFOs:$bad"; fi

# ---- 7: checkpoint options without --checkpoint-dir; a signal without one
bad=""
for a in "--checkpoint-every 1" "--checkpoint-minutes 1" "--target-top1 0.5"; do
  run out rc "$DLTRAIN" train "${SYN[@]}" --steps 1 $a
  [[ $rc == 2 && $out == "dltrain: ${a%% *}: checkpoints go to --checkpoint-dir DIR, and none was given"* ]] || bad+=" [$a: rc $rc: $out]"
done
if [[ -z $bad ]]; then ok "--checkpoint-every, --checkpoint-minutes, --target-top1 without --checkpoint-dir: refused (2)"
else not_ok "checkpoint options without a directory:$bad"; fi
# SIGTERM after the first step line: nothing can be saved, and the status must not say it was (75).
timeout 120 "$DLTRAIN" train "${SYN[@]}" --synthetic-size 100000 --epochs 1 --log-every 1 >"$WORK/sig.out" 2>&1 &
pid=$!
for _ in $(seq 600); do grep -q "step 1/" "$WORK/sig.out" 2>/dev/null && break; sleep 0.1; done
kill -TERM $pid 2>/dev/null
wait $pid; rc=$?
if ((rc == 143)) && grep -q "stop requested (signal) at step [0-9]*: nothing saved (no --checkpoint-dir); exit status 143" "$WORK/sig.out" && ! grep -q checkpointing "$WORK/sig.out"; then
  ok "SIGTERM without --checkpoint-dir: 'nothing saved', exit status 143 (not 75, which says a checkpoint was written)"
else not_ok "signal without a checkpoint directory (rc=$rc)"; tail -3 "$WORK/sig.out" | diag; fi

# ---- 3: eval --val-data DIR without --data scores DIR; a missing path is an error
TINY=(--arch resnet18 --width 0.25 --image-size 32 --workers 2)
"$DLTRAIN" train --data "$WORK/ds" "${TINY[@]}" --log-every 0 --batch 4 --epochs 1 --checkpoint-dir "$WORK/ckd" >/dev/null 2>&1
CKD=$WORK/ckd/ckpt-00000002.safetensors
run out rc "$DLTRAIN" eval "${TINY[@]}" --checkpoint "$CKD" --val-data "$WORK/ds/val"
run out2 rc2 "$DLTRAIN" eval "${TINY[@]}" --checkpoint "$CKD" --data "$WORK/ds"
t1=$(sed -n 's/.*: \(8 images, top-1 [0-9.]*\), top-5 .*/\1/p' <<<"$out"); t2=$(sed -n 's/.*: \(8 images, top-1 [0-9.]*\), top-5 .*/\1/p' <<<"$out2")
run out3 rc3 "$DLTRAIN" eval "${TINY[@]}" --checkpoint "$CKD" --val-data /nonexistent
run out4 rc4 "$DLTRAIN" eval "${TINY[@]}" --checkpoint "$CKD" --val-labels "$WORK/baseline.jsonl"
run out5 rc5 "$DLTRAIN" train "${SYN[@]}" --steps 1 --val-data "$WORK/ds/val"
if ((rc == 0 && rc2 == 0 && rc3 == 2 && rc4 == 2 && rc5 == 2)) && [[ -n $t1 && $t1 == "$t2" && $out != *50000* && $out3 == "dltrain: --val-data /nonexistent: No such file or directory" && $out4 == *"--val-labels $WORK/baseline.jsonl labels the images of --val-data DIR"* && $out5 == *"--val-data $WORK/ds/val without --data"* ]]; then
  ok "eval --val-data DIR alone scores DIR ($t1, as --data ROOT); --val-data /nonexistent, --val-labels alone and train --val-data without --data: usage errors"
else not_ok "eval --val-data without --data ($rc $rc2 $rc3 $rc4 $rc5)"; printf '%s\n' "$out" "$out2" "$out3" "$out4" "$out5" | diag; fi

# ---- 10: --synthetic/--noise with --data; --milestones that do not strictly increase
bad=""
for a in --synthetic --noise; do
  run out rc "$DLTRAIN" train "${TINY[@]}" --data "$WORK/ds" --batch 4 --steps 1 $a
  [[ $rc == 2 && $out == "dltrain: $a and --data $WORK/ds: generated images or those of --data, not both; give one" ]] || bad+=" [$a --data: rc $rc: $out]"
done
for m in 3,2,1 1,1 30,60,60; do
  run out rc "$DLTRAIN" train "${SYN[@]}" --steps 1 --milestones $m
  [[ $rc == 2 && $out == "dltrain: --milestones $m: the epochs must strictly increase"* ]] || bad+=" [--milestones $m: rc $rc: $out]"
done
run out rc "$DLTRAIN" train "${SYN[@]}" --steps 1 --milestones 1,2,3
((rc == 0)) || bad+=" [--milestones 1,2,3: rc $rc]"
if [[ -z $bad ]]; then ok "--synthetic or --noise with --data refused (2); --milestones 3,2,1, 1,1, 30,60,60 refused, 1,2,3 accepted"
else not_ok "conflicting data options, milestones:$bad"; fi

# ---- 14: wording: --comm nccl on the CPU, eval of a missing checkpoint, --stall-timeout under 1 s
run out rc "$DLTRAIN" train "${SYN[@]}" --steps 1 --comm nccl --backend cpu
run out2 rc2 "$DLTRAIN" eval "${SYN[@]}" --checkpoint /nonexistent.safetensors
run out3 rc3 "$DLTRAIN" train "${SYN[@]}" --steps 1 --stall-timeout 0.2
run out4 rc4 "$DLTRAIN" train "${SYN[@]}" --steps 1 --stall-timeout 0
if ((rc == 2 && rc2 == 2 && rc3 == 2 && rc4 == 0)) && [[ $out == *"--comm nccl reduces GPU buffers, and this run uses the CPU backend (--backend cpu): use --comm mpi"* && $out != *"run with --backend cpu"* && $out2 == *"--checkpoint /nonexistent.safetensors: No such file or directory"* && $out2 != *damaged* && $out3 == "dltrain: --stall-timeout 0.2: 0 (off) or at least 1 second" ]]; then
  ok "--comm nccl --backend cpu advises --comm mpi; eval of a missing checkpoint says it does not exist; --stall-timeout 0.2 refused, 0 (off) accepted"
else not_ok "wording ($rc $rc2 $rc3 $rc4)"; printf '%s\n' "$out" "$out2" "$out3" "$out4" | diag; fi

# ---- 17: one rank has no all-reduce: the share is named after what it measures
run out rc "$DLTRAIN" train "${SYN[@]}" --steps 2 --log-every 1 --verbose --metrics "$WORK/m17.jsonl"
if ((rc == 0)) && [[ $out == *"gradient reduction: none"* && $out == *" data "*"% wait "*"%"* && $out != *"allreduce "*"%"* ]] && grep -q '"wait":' "$WORK/m17.jsonl" && grep -q '"allreduce":' "$WORK/m17.jsonl"; then
  ok "one rank: the step line says 'wait N%' (the host's wait for the step's results), not 'allreduce N%'; the metrics key is 'wait' ('allreduce' repeats it for earlier readers)"
else not_ok "share named after the all-reduce on one rank (rc=$rc)"; grep "step " <<<"$out" | diag; fi

# ---- output paths: a file's missing folder is a usage error naming the folder (it was status 1
# for --metrics, and data pack named its temporary file); directories are made with their parents
run out rc "$DLTRAIN" train "${SYN[@]}" --steps 1 --metrics "$WORK/nope/m.jsonl"
"$MK" folder "$WORK/pk" 2 2 32 32 >/dev/null 2>&1
run out2 rc2 "$DLTRAIN" data pack "$WORK/pk" "$WORK/nope/out.rec"
run out3 rc3 "$DLTRAIN" train "${SYN[@]}" --steps 1 --checkpoint-dir "$WORK/ck/a/b"
if ((rc == 2 && rc2 == 2 && rc3 == 0)) && [[ $out == *"--metrics $WORK/nope/m.jsonl: its folder $WORK/nope does not exist: create it (mkdir -p $WORK/nope)"* &&
  $out2 == *"OUT.rec $WORK/nope/out.rec: its folder $WORK/nope does not exist"* && $out2 != *".tmp."* && -s $WORK/ck/a/b/ckpt-00000001.safetensors ]]; then
  ok "a missing folder of --metrics / data pack OUT.rec: status 2 naming it; --checkpoint-dir a/b made with its parents"
else not_ok "output paths ($rc $rc2 $rc3)"; printf '%s\n' "$out" "$out2" "$out3" | tail -6 | diag; fi

# ---- eval of a model file without a state file (a torchvision export): the tensors say which
# ResNet it is (it assumed resnet50 and failed on the first tensor); a contradicting --arch is refused.
# 16 images (--eval-size): the default 50000 took over the 60 s bound on a loaded CI machine
run out rc "$DLTRAIN" train "${SYN[@]}" --steps 1 --checkpoint-dir "$WORK/tv"
cp "$WORK/tv/ckpt-00000001.safetensors" "$WORK/tv/export.safetensors"
run out rc "$DLTRAIN" eval --synthetic --eval-size 16 --image-size 32 --batch 8 --checkpoint "$WORK/tv/export.safetensors"
run out2 rc2 "$DLTRAIN" eval --synthetic --eval-size 16 --image-size 32 --batch 8 --arch resnet50 --checkpoint "$WORK/tv/export.safetensors"
if ((rc == 0 && rc2 == 2)) && [[ $out == *"has no state file (a torchvision export?): its tensors are those of resnet18, width 0.25, 4 classes"* &&
  $out == *"dltrain: eval $WORK/tv/export.safetensors: "*"top-1"* && $out2 == *"--arch resnet50, but the checkpoint was trained as resnet18"* ]]; then
  ok "eval of a torchvision-style export: resnet18 / width 0.25 / 4 classes read from its tensors; --arch resnet50 refused"
else not_ok "eval of an export ($rc $rc2)"; printf '%s\n' "$out" "$out2" | tail -6 | diag; fi
