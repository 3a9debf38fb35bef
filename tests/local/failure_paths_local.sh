#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Failure paths a new user meets on one rank: too little data for the batch (a usage error naming
# count, batch, ranks and the fix; evaluation of a set smaller than a batch scores every image,
# never 0 images or NaN), NaN and infinities refused by every floating-point option, a damaged
# model file refused by eval (--verify on eval and info), --resume auto over damaged checkpoints
# stopping instead of starting over, and the help, man page and README wording.
. "$(dirname "$0")/../slurm/lib.sh"
DLTRAIN=$DLT_BUILDDIR/trainer/dltrain
MK=$DLT_BUILDDIR/tests/fixtures/mkjpegs
[[ -x $DLTRAIN && -x $MK ]] || skip_all "dltrain or mkjpegs not built"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
tap_plan 22
rm -rf "${WORK:?}"/*
"$MK" folder "$WORK/ds" 2 4 40 40 plain # 8 train and 8 val images, 2 classes
TINY=(--arch resnet18 --width 0.25 --image-size 32 --workers 2 --log-every 0)
SYN=(--arch resnet18 --width 0.25 --image-size 32 --classes 4 --batch 8 --synthetic-size 64 --log-every 0 --warmup-epochs 0)
# ran OUTVAR RCVAR CMD...: runs with a 60 s bound; a signal shows as 128+N.
run() { local -n _o=$1 _r=$2; shift 2; _o=$(timeout 60 "$@" 2>&1); _r=$?; }
no_signal() { (($1 < 124)); }

# ---- 1: too little data
run out rc "$DLTRAIN" train --data "$WORK/ds" "${TINY[@]}" --epochs 1
if ((rc != 0)) && no_signal $rc && [[ $out == *"8 image(s) give no full batch of 32 on each of 1 rank(s)"* && $out == *"--batch 8"* && $out != *1281167* ]]; then
  ok "train on 8 images with batch 32: refused naming the image count, batch, ranks and --batch 8"
else not_ok "too little training data (rc=$rc)"; echo "$out" | tail -3 | diag; fi
"$DLTRAIN" train --data "$WORK/ds" "${TINY[@]}" --batch 4 --epochs 1 --checkpoint-dir "$WORK/ck" >/dev/null 2>&1
CK=$WORK/ck/ckpt-00000002.safetensors
run out rc "$DLTRAIN" eval --data "$WORK/ds" "${TINY[@]}" --checkpoint "$CK"
t32=$(sed -n 's/.*: 8 images, top-1 \([0-9.]*\), top-5 [0-9.]*$/\1/p' <<<"$out")
if ((rc == 0)) && [[ -n $t32 && $out != *nan* ]]; then ok "eval of 8 images with the default batch 32: every image scored (top-1 $t32), no NaN"
else not_ok "eval of a set smaller than one batch (rc=$rc)"; echo "$out" | tail -3 | diag; fi
same=1
for b in 3 8; do
  run out rc "$DLTRAIN" eval --data "$WORK/ds" "${TINY[@]}" --batch $b --checkpoint "$CK"
  t=$(sed -n 's/.*: 8 images, top-1 \([0-9.]*\), top-5 [0-9.]*$/\1/p' <<<"$out")
  [[ $rc == 0 && -n $t && $t == "$t32" ]] || { same=0; echo "$out" | tail -2 | diag; }
done
if ((same)); then ok "batches 3, 8 and 32 count the same 8 images with the same top-1 (a short last batch is scored exactly)"; else not_ok "eval count/top-1 depends on the batch"; fi
run out rc "$DLTRAIN" eval --batch 32 --eval-size 4 --checkpoint "$CK" # the model from the checkpoint
run out2 rc2 "$DLTRAIN" train "${SYN[@]}" --batch 32 --synthetic-size 8
# Evaluation scores any number of generated images exactly (a short batch); training needs a full one.
if ((rc == 0 && rc2 == 2)) && [[ $out == *": 4 images, top-1"* && $out2 == *"--synthetic-size 8: 8 image(s)"*"--batch 8"* && $out != *nan* ]]; then
  ok "4 generated validation images with batch 32: all 4 scored; a training set smaller than a batch: usage error naming --synthetic-size and the --batch that fits"
else not_ok "synthetic too small (rc=$rc/$rc2)"; { echo "$out"; echo "$out2"; } | tail -4 | diag; fi

# ---- 3: NaN and infinities
bad=""
for o in width lr momentum wd label-smoothing warmup-epochs timeout checkpoint-minutes stall-timeout bucket-mib loss-scale; do
  for v in nan -nan inf -inf Infinity 1e999; do
    out=$(timeout 20 "$DLTRAIN" train "${SYN[@]}" --steps 1 --$o $v 2>&1); rc=$?
    [[ $rc == 2 && $out == "dltrain: --$o $v: "*"["*"]"* ]] || bad+=" --$o=$v($rc)"
  done
  out=$(timeout 20 "$DLTRAIN" train "${SYN[@]}" --steps 1 --$o=nan 2>&1); rc=$? # the --opt=value form names the option too
  [[ $rc == 2 && $out == "dltrain: --$o nan: "* ]] || bad+=" --$o=nan(form)"
done
if [[ -z $bad ]]; then ok "every floating-point option of train refuses nan/inf/1e999 (66 values), naming option, value and range"
else not_ok "floating-point options accepting NaN/inf:$bad"; fi
run out rc "$DLTRAIN" train "${SYN[@]}" --lr nan --steps 1
if ((rc == 2)) && [[ $out == "dltrain: --lr nan: not a finite number (expected a number in [0, 1000000000])" ]]; then ok "--lr nan: '$out'"; else not_ok "--lr nan (rc=$rc)"; echo "$out" | diag; fi
run out rc "$DLTRAIN" info --arch resnet18 --width nan
run out2 rc2 "$DLTRAIN" env --timeout inf
run out3 rc3 "$DLTRAIN" eval "${SYN[@]}" --checkpoint "$CK" --bucket-mib nan
run out4 rc4 "$DLTRAIN" bench "${SYN[@]}" --loss-scale -inf
run out5 rc5 env DLTPMIX_TIMEOUT=nan "$DLTRAIN" env
if ((rc == 2 && rc2 == 2 && rc3 == 2 && rc4 == 2 && rc5 == 1)) && [[ $out == *"--width nan"* && $out2 == *"--timeout inf"* && $out3 == *"--bucket-mib nan"* && $out4 == *"--loss-scale -inf"* && $out5 == *"DLTPMIX_TIMEOUT='nan'"* ]]; then
  ok "info --width, env --timeout, eval and bench options, and DLTPMIX_TIMEOUT refuse NaN and infinities too"
else not_ok "NaN in info/env/eval/bench/DLTPMIX_TIMEOUT ($rc $rc2 $rc3 $rc4 $rc5)"; { echo "$out"; echo "$out2"; echo "$out3"; echo "$out4"; echo "$out5"; } | diag; fi
bad=""
for a in "--batch 1.5" "--epochs 2.5" "--steps 0x10" "--seed 1e999" "--image-size 32px" "--classes ''" "--workers -1" "--log-every 1e-999" "--milestones 30,,x" "--milestones 1,2,3,4,5,6,7,8,9"; do
  out=$(eval timeout 20 "$DLTRAIN" train "${SYN[*]}" --steps 1 $a 2>&1); rc=$?
  [[ $rc == 2 && $out == "dltrain: --"* ]] || bad+=" [$a: rc $rc]"
done
run out rc "$DLTRAIN" data pack "$WORK/ds/train" "$WORK/x.rec" --resize abc
[[ $rc == 2 && $out == *"--resize abc"* ]] || bad+=" [data pack --resize abc: rc $rc]"
if [[ -z $bad ]]; then ok "counts refuse fractions, hex, overflow and trailing text; --milestones more than 8 or malformed; data pack --resize abc"
else not_ok "whole-number options:$bad"; fi

# ---- 4: eval verifies the model file against its state file
cp "$CK" "$WORK/damaged.safetensors"; cp "${CK%.safetensors}.state.safetensors" "$WORK/damaged.state.safetensors"
python3 - "$WORK/damaged.safetensors" <<'PY'
import sys
f = open(sys.argv[1], "r+b"); f.seek(-4096, 2); f.write(b"\x7f" * 64)
PY
run out rc "$DLTRAIN" eval --data "$WORK/ds" "${TINY[@]}" --checkpoint "$WORK/damaged.safetensors"
if ((rc == 1)) && [[ $out == *"damaged.safetensors has CRC-32 "*"but its state file"*"recorded"* && $out != *top-1* ]]; then ok "eval refuses a model file whose data bytes were overwritten (CRC differs from its state file), nothing scored"
else not_ok "eval of a damaged model file (rc=$rc)"; echo "$out" | tail -3 | diag; fi
run out rc "$DLTRAIN" eval --checkpoint "$WORK/damaged.safetensors" --verify
run out2 rc2 "$DLTRAIN" info --checkpoint "$WORK/damaged.safetensors" --verify
run out3 rc3 "$DLTRAIN" info --checkpoint "$CK" --verify
if ((rc == 1 && rc2 == 1 && rc3 == 0)) && [[ $out == *"CRC-32"* && $out2 == *"CRC-32"* && $out3 == *"$CK OK: "*"match"*"step 2"* ]]; then
  ok "--verify on eval and info: the damaged pair fails (exit 1), the intact one passes with its step (exit 0)"
else not_ok "--verify ($rc $rc2 $rc3)"; { echo "$out"; echo "$out2"; echo "$out3"; } | diag; fi
cp "$CK" "$WORK/alone.safetensors"
run out rc "$DLTRAIN" eval --data "$WORK/ds" "${TINY[@]}" --checkpoint "$WORK/alone.safetensors"
run out2 rc2 "$DLTRAIN" info --checkpoint "$WORK/alone.safetensors" --verify
if ((rc == 0 && rc2 == 1)) && [[ $out == *"alone.safetensors is unverified: no state file"* && $out == *"top-1 $t32"* && $out2 == *"cannot be verified"* ]]; then
  ok "a model file without its state file: eval says it is unverified (and scores it); --verify says it cannot be verified"
else not_ok "unverified model file ($rc $rc2)"; { echo "$out"; echo "$out2"; } | tail -4 | diag; fi
cp "$CK" "$WORK/st.safetensors"; cp "${CK%.safetensors}.state.safetensors" "$WORK/st.state.safetensors"
python3 - "$WORK/st.state.safetensors" <<'PY'
import sys
f = open(sys.argv[1], "r+b"); f.seek(-64, 2); f.write(b"\x55" * 8)
PY
run out rc "$DLTRAIN" info --checkpoint "$WORK/st.safetensors" --verify
cp "$CK" "$WORK/st2.safetensors"
python3 - "${CK%.safetensors}.state.safetensors" "$WORK/st2.state.safetensors" <<'PY'
import sys
b = open(sys.argv[1], "rb").read()
open(sys.argv[2], "wb").write(b.replace(b'"step":"2"', b'"step":"3"', 1))
PY
run out2 rc2 "$DLTRAIN" train --data "$WORK/ds" "${TINY[@]}" --batch 4 --epochs 3 --resume "$WORK/st2.safetensors"
if ((rc == 1 && rc2 == 1)) && [[ $out == *"st.state.safetensors has CRC-32"*"for itself: the state file was damaged"* && $out2 == *"st2.state.safetensors has CRC-32"*"for itself"* ]]; then
  ok "a state file whose momentum bytes or recorded step were changed is refused (it carries a CRC of itself)"
else not_ok "damaged state file ($rc $rc2)"; { echo "$out"; echo "$out2"; } | diag; fi

# ---- 5: --resume auto over damaged checkpoints
"$DLTRAIN" train "${SYN[@]}" --epochs 1 --checkpoint-dir "$WORK/r" >/dev/null 2>&1
python3 - "$WORK/r/ckpt-00000008.safetensors" <<'PY'
import sys
f = open(sys.argv[1], "r+b"); f.seek(-2048, 2); f.write(b"\x00" * 32)
PY
sum0=$(md5sum "$WORK"/r/* | md5sum)
run out rc "$DLTRAIN" train "${SYN[@]}" --epochs 2 --checkpoint-dir "$WORK/r" --resume auto
if ((rc == 1)) && [[ $out == *"$WORK/r has 1 checkpoint(s) and none is valid"* && $out == *"ckpt-00000008.safetensors has CRC-32"* && $out == *"--resume auto-or-fresh"* && $out != *"no checkpoint in"* && $out != *"starting from scratch as"* && $out != *"training resnet18"* && $(md5sum "$WORK"/r/* | md5sum) == "$sum0" ]]; then
  ok "--resume auto whose only checkpoint is damaged: stops, listing the file and why, files untouched"
else not_ok "--resume auto over a damaged checkpoint (rc=$rc)"; echo "$out" | tail -4 | diag; fi
rm "$WORK/r/ckpt-00000008.state.safetensors"
run out rc "$DLTRAIN" train "${SYN[@]}" --epochs 2 --checkpoint-dir "$WORK/r" --resume auto
if ((rc == 1)) && [[ $out == *"ckpt-00000008.safetensors: no state file beside it"* ]]; then ok "a model file without its state file counts as a checkpoint that is refused, not as none"
else not_ok "lone model file (rc=$rc)"; echo "$out" | tail -3 | diag; fi
run out rc "$DLTRAIN" train "${SYN[@]}" --epochs 2 --checkpoint-dir "$WORK/r" --resume auto-or-fresh
if ((rc == 0)) && [[ $out == *"starting from scratch as --resume auto-or-fresh asks"* && -f $WORK/r/ckpt-00000016.safetensors ]]; then ok "--resume auto-or-fresh: lists the damaged file, starts from scratch, checkpoints"
else not_ok "auto-or-fresh (rc=$rc)"; echo "$out" | tail -3 | diag; fi
run out rc "$DLTRAIN" train "${SYN[@]}" --epochs 3 --checkpoint-dir "$WORK/r" --resume auto
run out2 rc2 "$DLTRAIN" train "${SYN[@]}" --epochs 1 --checkpoint-dir "$WORK/none" --resume auto
if ((rc == 0 && rc2 == 0)) && [[ $out == *"resumed from $WORK/r/ckpt-00000016.safetensors at step 16"* && $out2 == *"no checkpoint in $WORK/none: starting from scratch"* ]]; then
  ok "a valid checkpoint beside the damaged one is resumed; 'no checkpoint' only where there is none"
else not_ok "resume with a valid checkpoint / empty dir ($rc $rc2)"; { echo "$out"; echo "$out2"; } | tail -4 | diag; fi

# ---- class-wide: a labels file that would drop or double images silently
mkdir -p "$WORK/flat"; cp "$WORK"/ds/val/c00/img_0000.JPEG "$WORK/flat/a.JPEG"; cp "$WORK"/ds/val/c01/img_0000.JPEG "$WORK/flat/b.JPEG"
printf '# comment\n\na.JPEG c00\nb.JPEG c01\n' > "$WORK/good.txt"
printf 'a.JPEG c00\nb.JPEG c01\na.JPEG c00\n' > "$WORK/dup.txt"
printf 'a.JPEG c00\nb.JPEG\n' > "$WORK/short.txt"
run out rc "$DLTRAIN" eval --data "$WORK/ds" --val-data "$WORK/flat" --val-labels "$WORK/good.txt" "${TINY[@]}" --checkpoint "$CK"
run out2 rc2 "$DLTRAIN" eval --data "$WORK/ds" --val-data "$WORK/flat" --val-labels "$WORK/dup.txt" "${TINY[@]}" --checkpoint "$CK"
run out3 rc3 "$DLTRAIN" eval --data "$WORK/ds" --val-data "$WORK/flat" --val-labels "$WORK/short.txt" "${TINY[@]}" --checkpoint "$CK"
if ((rc == 0 && rc2 == 1 && rc3 == 1)) && [[ $out == *": 2 images, top-1"* && $out2 == *"lists a.JPEG more than once"* && $out3 == *"short.txt, line 2: 'b.JPEG' is not \"FILENAME CLASS\""* ]]; then
  ok "--val-labels: a file named twice or a line without its class is refused (it would double or drop an image)"
else not_ok "labels file checks ($rc $rc2 $rc3)"; { echo "$out"; echo "$out2"; echo "$out3"; } | tail -6 | diag; fi

# ---- 7: words
out=$("$DLTRAIN" --help)
cols=$(grep -E '^  [a-z]' <<<"$out" | awk '{ match($0, /^  [a-z]+( pack)? +/); print RLENGTH }' | sort -u | wc -l)
if [[ $out != *"(synthetic data)"* && $out == *"ImageFolder, a RecordIO file or synthetic"* && $cols == 1 ]]; then ok "dltrain --help: train is not 'synthetic data' only; every command's description (data pack's too) starts in one column"
else not_ok "dltrain --help wording/alignment (columns: $cols)"; echo "$out" | diag; fi
run out rc "$DLTRAIN" train "${SYN[@]}" --steps 1
run out2 rc2 "$DLTRAIN" bench "${SYN[@]}" --iters 1 --warmup 0
if [[ $out =~ \(702612\ parameters,\ 0\.00[1-9][0-9]*\ GFLOPs/image\) && $out2 =~ at\ 0\.0[0-9]*[1-9][0-9]*\ GFLOP\ per\ image ]]; then ok "GFLOPs of a small model in significant digits: $(grep -o '0\.0[0-9]* GFLOPs/image' <<<"$out")"
else not_ok "GFLOPs digits"; { echo "$out"; echo "$out2"; } | head -3 | diag; fi
man_lr=$(sed -n '/^\.BI \\-\\-lr " F"$/,/^\.TP/p' "$DLT_SRCDIR/man/dltrain.1")
warn=""
if command -v groff >/dev/null; then
  for w in 60 80 100 120; do warn+=$(groff -ww -man -Tutf8 -rLL=${w}n "$DLT_SRCDIR/man/dltrain.1" 2>&1 >/dev/null); done
fi
if [[ $man_lr == *"per 256 images of global batch"* && $man_lr == *"peak lr"* && -z $warn ]]; then ok "man dltrain: --lr is the base LR per 256 images (the log shows the scaled one); no troff warnings at 60-120 columns"
else not_ok "man page (--lr text or troff warnings)"; { echo "$man_lr"; echo "$warn"; } | head -6 | diag; fi
qs_last=$(grep -v '^\s*#' "$DLT_SRCDIR/contrib/quickstart.sh" | grep -c "trap 'bash tests/slurm/cluster.sh down")
if ((qs_last == 1)) && grep -q 'followed by `cluster.sh: down`' "$DLT_SRCDIR/README.md" && ! grep -q 'It ends with a line from a real `srun` step' "$DLT_SRCDIR/README.md"; then
  ok "README: quickstart's last lines are the eval result, then cluster.sh: down (its exit trap stops the cluster)"
else not_ok "README quickstart wording"; fi
out=$("$DLTRAIN" data pack --help)
if [[ $(grep -E '^  --' <<<"$out" | awk '{ match($0, /^  --[a-z]+( [A-Z_]+)? +/); print RLENGTH }' | sort -u | wc -l) == 1 ]]; then ok "data pack --help: its options in one aligned column"; else not_ok "data pack help"; echo "$out" | diag; fi
exit 0
