#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# dltrain train --tensorboard DIR read back by the tensorboard package (tests/torch/tb_readback.py):
# every scalar, tag and step equal to the --metrics file's, the CRCs valid, a flipped byte
# rejected by tensorboard's reader, a killed run missing at most its last interval, an unwritable
# DIR refused before training. Needs DLT_TORCH_PYTHON with tensorboard (contrib/install-torch.sh);
# skipped without.
. "$(dirname "$0")/../slurm/lib.sh"
PY=${DLT_TORCH_PYTHON:-/opt/torchvenv/bin/python}
DLTRAIN=$DLT_BUILDDIR/trainer/dltrain
MK=$DLT_BUILDDIR/tests/fixtures/mkjpegs
READ=$DLT_SRCDIR/tests/torch/tb_readback.py
[[ -x $DLTRAIN && -x $MK ]] || skip_all "dltrain or mkjpegs not built"
[[ -x $PY ]] && "$PY" -c 'import tensorboard.backend.event_processing.event_file_loader' 2>/dev/null ||
  skip_all "no Python with tensorboard (set DLT_TORCH_PYTHON; contrib/install-torch.sh)"
tap_plan 5
rm -rf "${WORK:?}"/*
"$MK" folder "$WORK/ds" 4 24 48 40 plain
SMALL=(--arch resnet18 --width 0.25 --image-size 32 --batch 20 --warmup-epochs 0 --lr 0.4 --workers 2)

out=$(timeout 300 "$DLTRAIN" train --data "$WORK/ds" "${SMALL[@]}" --epochs 2 --log-every 2 --metrics "$WORK/m.jsonl" \
  --tensorboard "$WORK/tb" 2>&1); rc=$?
res=$(timeout 120 "$PY" "$READ" compare "$WORK/m.jsonl" "$WORK/tb" 2>&1); rrc=$?
if ((rc == 0 && rrc == 0)) && [[ $res == *"val/top1"* || $res == *"under 9 tags"* ]]; then ok "read back by tensorboard: $res"
else
  # the reason goes into the result line itself: CI summaries keep that line and not the diagnostics
  why=$(printf '%s' "$res" | tr '\n' ' ' | cut -c1-300); warn=$(grep -m1 -i 'warn\|tensorboard' <<<"$out" | cut -c1-200)
  not_ok "TensorBoard file against the metrics file (train rc=$rc, reader rc=$rrc): ${why:-no reader output} ${warn:+[dltrain: $warn]}"
  { echo "$out" | tail -4; echo "$res"; ls -la "$WORK/tb"; } | diag
fi

res=$(timeout 120 "$PY" "$READ" damage "$WORK/tb" "$WORK" 2>&1); rrc=$?
if ((rrc == 0)); then ok "a flipped byte (data, length, CRC) is rejected by tensorboard's record reader and by an independent CRC-32C"
else not_ok "damaged records"; echo "$res" | diag; fi
echo "$res" | diag

# A killed run: every interval is one append, so the file holds whole records and lacks at most
# the interval the kill fell in. dltrain itself gets the SIGKILL (libtool's wrapper execs it; no
# timeout(1) in between, which would leave it running), bounded by the loop below.
"$DLTRAIN" train --synthetic "${SMALL[@]}" --batch 8 --synthetic-size 800 --steps 100000 --log-every 1 \
  --eval-every 0 --metrics "$WORK/k.jsonl" --tensorboard "$WORK/tbk" >"$WORK/k.out" 2>&1 &
pid=$!
alive=0
for _ in $(seq 1200); do
  n=$(grep -c '"step"' "$WORK/k.jsonl" 2>/dev/null)
  kill -0 "$pid" 2>/dev/null && alive=1 || { alive=0; break; }
  ((${n:-0} >= 6)) && break
  sleep 0.1
done
kill -KILL "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; st=$?
sleep 0.2
res=$(timeout 120 "$PY" "$READ" killed "$WORK/k.jsonl" "$WORK/tbk" 2>&1); rrc=$?
if ((rrc == 0 && alive == 1 && st == 137)) && ! kill -0 "$pid" 2>/dev/null; then ok "$res"
else not_ok "killed run (alive=$alive, status $st)"; { echo "$res"; tail -3 "$WORK/k.out"; } | diag; fi

: >"$WORK/afile"
out=$(timeout 60 "$DLTRAIN" train --data "$WORK/ds" "${SMALL[@]}" --epochs 1 --tensorboard "$WORK/afile/tb" 2>&1); rc=$?
if ((rc != 0)) && [[ $out == *"TensorBoard directory (--tensorboard) $WORK/afile/tb"* && $out != *"step "* && $out != *"dltrain: training "* ]]; then
  ok "an unwritable --tensorboard DIR is refused before training: ${out%%$'\n'*}"
else not_ok "unwritable --tensorboard (rc=$rc)"; echo "$out" | tail -4 | diag; fi

out=$(timeout 60 "$DLTRAIN" eval --data "$WORK/ds" "${SMALL[@]}" --checkpoint "$WORK/none.safetensors" --tensorboard "$WORK/tbe" 2>&1); rc=$?
if ((rc == 2)) && [[ $out == *"--tensorboard belongs to train"* && ! -e $WORK/tbe ]]; then ok "--tensorboard on eval is refused, not ignored"
else not_ok "--tensorboard on eval (rc=$rc)"; echo "$out" | tail -3 | diag; fi
