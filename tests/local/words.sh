#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# What a user is told, for inputs that used to get the wrong words or none: a class folder whose
# name holds a newline is refused by train and data pack alike, naming it (it used to train and
# drop the class names from the state file silently); a .JPEG that is a FIFO is "not a regular
# file" (not "convert them to JPEG"); --metrics or --dump-batch naming a checkpoint file is refused;
# an option given twice with different values is said; --data naming a plain file says a .rec is
# accepted.
. "$(dirname "$0")/../slurm/lib.sh"
DLTRAIN=$DLT_BUILDDIR/trainer/dltrain
MK=$DLT_BUILDDIR/tests/fixtures/mkjpegs
[[ -x $DLTRAIN && -x $MK ]] || skip_all "dltrain or mkjpegs not built"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
tap_plan 8
rm -rf "${WORK:?}" && mkdir -p "$WORK"
SMALL=(--arch resnet18 --width 0.25 --image-size 32 --batch 2 --steps 1 --log-every 0 --warmup-epochs 0 --eval-every 0)

"$MK" folder "$WORK/nl" 2 4 40 40 plain >/dev/null
mv "$WORK/nl/train/c01" "$WORK/nl/train/bad"$'\n'"name"
out=$(timeout 60 "$DLTRAIN" train --data "$WORK/nl" "${SMALL[@]}" 2>&1); rc=$?
out2=$(timeout 60 "$DLTRAIN" data pack "$WORK/nl/train" "$WORK/nl.rec" 2>&1); rc2=$?
if ((rc != 0 && rc2 != 0)) && [[ $out == *'class folder '*'/bad\nname: its name holds a control character'* &&
      $out2 == *'bad\nname: its name holds a control character'* ]]; then
  ok "a class folder named with a newline: train and data pack refuse it alike, naming it (exit $rc, $rc2)"
else not_ok "newline in a class name (rc=$rc, rc2=$rc2)"; { echo "$out"; echo "$out2"; } | tail -6 | diag; fi

"$MK" folder "$WORK/ff" 2 4 40 40 plain >/dev/null
mkfifo "$WORK/ff/train/c00/piped.JPEG"
out=$(timeout 60 "$DLTRAIN" train --data "$WORK/ff" "${SMALL[@]}" 2>&1); rc=$?
if [[ $out == *"named as images that are not regular files (a FIFO, a device, a socket) (first: $WORK/ff/train/c00/piped.JPEG)"* &&
      $out != *"convert them to JPEG"* ]]; then ok "a .JPEG that is a FIFO is said to be no regular file (exit $rc)"
else not_ok "FIFO named .JPEG (rc=$rc)"; echo "$out" | tail -4 | diag; fi

out=$(timeout 60 "$DLTRAIN" train "${SMALL[@]}" --metrics "$WORK/ck/ckpt-00000008.safetensors" 2>&1); rc=$?
out2=$(timeout 60 "$DLTRAIN" train "${SMALL[@]}" --dump-batch "$WORK/ck/ckpt-00000008.state.safetensors" 2>&1); rc2=$?
if ((rc == 2 && rc2 == 2)) && [[ $out == *"--metrics $WORK/ck/ckpt-00000008.safetensors: a .safetensors file (a checkpoint or its state)"* &&
      $out2 == *"--dump-batch"*"would overwrite"* ]]; then ok "--metrics and --dump-batch naming a checkpoint file are refused (exit 2)"
else not_ok "metrics/dump at a checkpoint (rc=$rc, rc2=$rc2)"; { echo "$out"; echo "$out2"; } | tail -4 | diag; fi

out=$(timeout 60 "$DLTRAIN" train "${SMALL[@]}" --steps 2 --steps 3 --classes 4 --synthetic-size 16 2>&1); rc=$?
if ((rc == 0)) && [[ $out == *"warning: --steps given twice (2, then 3): the last is used"* && $out == *"3 steps"* ]]; then
  ok "an option given twice with different values is said (the last is used)"
else not_ok "repeated option (rc=$rc)"; echo "$out" | head -3 | diag; fi

out=$(timeout 60 "$DLTRAIN" train --data /etc/hostname "${SMALL[@]}" 2>&1); rc=$?
if ((rc == 2)) && [[ $out == *"a regular file, not a directory (give an image folder, or an MXNet RecordIO file named .rec"* ]]; then
  ok "--data naming a plain file says that a .rec is accepted"
else not_ok "--data FILE (rc=$rc)"; echo "$out" | diag; fi
# The learning rate in the step line keeps its significant digits at small batch sizes (it read
# "lr 0.00000" after the milestones): 0.001 x 8/256 = 3.125e-05.
out=$(timeout 60 "$DLTRAIN" train "${SMALL[@]/--steps/--steps}" --synthetic --classes 4 --batch 8 --lr 0.001 --steps 2 --log-every 1 2>&1); rc=$?
if ((rc == 0)) && grep -q 'step 2/2 .* lr 3.125e-05 img/s' <<<"$out"; then ok "the step line's lr keeps its digits: $(grep -o 'lr [^ ]*' <<<"$out" | tail -1)"
else not_ok "lr digits (rc=$rc)"; grep 'step 2/' <<<"$out" | diag; fi

# Resuming at or past the run's end says there is nothing to train (it said "3 steps", saved the
# checkpoint again and then "done: 6 steps").
rm -rf "$WORK/past"
timeout 60 "$DLTRAIN" train "${SMALL[@]}" --synthetic --classes 4 --batch 8 --steps 6 --checkpoint-dir "$WORK/past" >/dev/null 2>&1
before=$(stat -c %Y.%s "$WORK/past/ckpt-00000006.safetensors" 2>/dev/null)
sleep 1
out=$(timeout 60 "$DLTRAIN" train "${SMALL[@]}" --synthetic --classes 4 --batch 8 --steps 3 --checkpoint-dir "$WORK/past" --resume auto 2>&1); rc=$?
if ((rc == 0)) && [[ $out == *"resumed at step 6, at or past the end of this run (3 steps): nothing to train, nothing written"* && $out != *"done:"* ]] &&
   [[ -n $before && $(stat -c %Y.%s "$WORK/past/ckpt-00000006.safetensors") == "$before" ]]; then
  ok "a resume at or past --steps says nothing is left to train and writes nothing"
else not_ok "resume past the end (rc=$rc)"; echo "$out" | tail -3 | diag; fi
# A class folder named in Latin-1 (not UTF-8): the state file's header stays UTF-8 JSON for other
# readers (Python's strict decoder and json; Rust's safetensors where installed), the names stored
# percent-encoded and flagged, and dltrain reads them back: eval matches the folder by name.
"$MK" folder "$WORK/l1" 3 8 40 40 plain >/dev/null
(cd "$WORK/l1/train" && mv c00 "$(printf 'caf\xe9')"; cd "$WORK/l1/val" && mv c00 "$(printf 'caf\xe9')")
timeout 120 "$DLTRAIN" train --data "$WORK/l1" "${SMALL[@]}" --batch 4 --steps 2 --checkpoint-dir "$WORK/l1ck" >/dev/null 2>&1
py=$(python3 - "$WORK/l1ck/ckpt-00000002.state.safetensors" <<'PY' 2>&1
import json, struct, sys, urllib.parse
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
meta = json.loads(b[8:8 + n].decode("utf-8"))["__metadata__"]
names = [urllib.parse.unquote_to_bytes(x) for x in meta["class_names"].split("\n")]
assert names == [b"c01", b"c02", b"caf\xe9"], names
assert meta["class_names_encoding"].startswith("percent-encoded"), meta
print("ok")
PY
)
st=ok
for p in "${DLT_TORCH_PYTHON:-}" /opt/torchvenv/bin/python; do
  [[ -x $p ]] && "$p" -c 'import safetensors' 2>/dev/null || continue
  "$p" -c "from safetensors import safe_open; safe_open('$WORK/l1ck/ckpt-00000002.state.safetensors', 'np').metadata()" 2>/dev/null || st=refused
  st="$st (safetensors read it)"; break
done
out=$(timeout 120 "$DLTRAIN" eval --data "$WORK/l1" "${SMALL[@]}" --batch 4 --checkpoint "$WORK/l1ck/ckpt-00000002.safetensors" 2>&1); rc=$?
if [[ $py == ok && $st != refused* && $rc == 0 && $out == *": 24 images, top-1"* ]]; then
  ok "a Latin-1 class folder name: the state header is UTF-8 JSON with the names percent-encoded, $st; eval matches it by name"
else not_ok "non-UTF-8 class name (python: $py; $st; eval rc=$rc)"; echo "$out" | tail -2 | diag; fi
exit 0
