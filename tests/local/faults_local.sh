#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Faults on one rank: a stalled phase ends in the watchdog's abort naming phase/rank/step; a
# checkpoint write that fails (file size limit, as a full disk) keeps the previous checkpoint
# valid and says so; diverging training (non-finite loss) skips updates, then stops with the last
# good checkpoint intact.
. "$(dirname "$0")/../slurm/lib.sh"
DLTRAIN=$DLT_BUILDDIR/trainer/dltrain
[[ -x $DLTRAIN ]] || skip_all "dltrain not built"
tap_plan 6
SMALL=(--arch resnet18 --width 0.25 --image-size 32 --classes 4 --batch 16 --synthetic-size 512 --warmup-epochs 0 --log-every 0)
rm -rf "$WORK"/*

if have_test_hooks; then
start=$SECONDS
# The bound leaves room for a loaded machine: step 1 (oneDNN's primitives made) once took 2 s there.
# The watchdog looks once a second: it says 5 or 6 s.
out=$(DLT_TEST_STALL=compute:3:60 timeout 120 "$DLTRAIN" train "${SMALL[@]}" --epochs 1 --stall-timeout 5 2>&1); rc=$?
el=$((SECONDS - start))
if ((rc == 86 && el < 25)) && [[ $out == *"watchdog: rank 0 on "*" stuck in forward/backward for "[56]" s at step 3 (limit 5 s"* ]]; then ok "a stalled phase: the watchdog aborts in ${el}s naming phase, rank, host and step (exit 86)"; else not_ok "watchdog (rc=$rc, ${el}s)"; echo "$out" | tail -3 | diag; fi
else
  ok "$NO_HOOKS: DLT_TEST_STALL"
fi

"$DLTRAIN" train "${SMALL[@]}" --steps 8 --epochs 1 --checkpoint-dir "$WORK/ck" >/dev/null 2>&1
size=$(stat -c %s "$WORK/ck/ckpt-00000008.safetensors" 2>/dev/null || echo 0)
# The file size limit stands in for a full disk: writes beyond it fail with EFBIG (SIGXFSZ ignored).
out=$(bash -c "trap '' XFSZ; ulimit -f $((size / 2048)); exec '$DLTRAIN' train ${SMALL[*]} --epochs 1 --steps 16 --checkpoint-dir '$WORK/ck' --resume auto" 2>&1); rc=$?
if ((rc != 0 && size > 0)) && [[ $out == *"checkpoint at step 16 FAILED (the previous checkpoint is untouched)"* && $out == *"File too large"* ]]; then ok "a checkpoint that cannot be written fails the run and says the previous one is untouched"; else not_ok "failed checkpoint write (rc=$rc)"; echo "$out" | tail -3 | diag; fi
left=$(ls "$WORK/ck" | grep -c -E 'tmp|00000016' || true)
out=$("$DLTRAIN" eval "${SMALL[@]}" --eval-size 64 --checkpoint "$WORK/ck/ckpt-00000008.safetensors" 2>&1); rc=$?
if ((rc == 0 && left == 0)); then ok "the previous checkpoint still loads, no partial or temporary file left"; else not_ok "previous checkpoint after failure (rc=$rc, leftovers=$left)"; { echo "$out"; ls "$WORK/ck"; } | diag; fi

# A healthy start, then the same run resumed with a learning rate that makes it diverge.
"$DLTRAIN" train "${SMALL[@]}" --epochs 2 --steps 8 --checkpoint-dir "$WORK/diverge" >/dev/null 2>&1
out=$(timeout 120 "$DLTRAIN" train "${SMALL[@]}" --epochs 2 --lr 1e6 --checkpoint-dir "$WORK/diverge" --resume auto --resume-override lr --checkpoint-every 4 --max-bad-steps 3 2>&1); rc=$?
if ((rc != 0)) && [[ $out == *"checkpoint not written (the previous one stays)"* && $out == *"update skipped (1 of 3 allowed in a row)"* && $out == *"loss not finite for 4 consecutive steps"* ]]; then ok "diverging run: no checkpoint of non-finite weights, updates skipped, then it stops naming the step"; else not_ok "non-finite loss handling (rc=$rc)"; echo "$out" | tail -4 | diag; fi
lastck=$(ls "$WORK/diverge" | grep -v state | sort | tail -1)
out=$("$DLTRAIN" eval "${SMALL[@]}" --eval-size 64 --checkpoint "$WORK/diverge/$lastck" 2>&1); rc=$?
if ((rc == 0)) && [[ $out == *"top-1 "* && $out != *"nan"* ]]; then ok "the last checkpoint before divergence is intact ($lastck: $(sed -n 's/.*\(top-1 [0-9.]*\).*/\1/p' <<<"$out"))"; else not_ok "checkpoint after divergence"; echo "$out" | diag; fi
python3 - "$WORK/diverge/$lastck" <<'PY' && ok "no NaN in any tensor of that checkpoint (BN statistics included)" || not_ok "NaN in the checkpoint"
import json, math, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
for k, v in h.items():
    if k == "__metadata__" or v["dtype"] != "F32":
        continue
    s, e = v["data_offsets"]
    vals = struct.unpack("<%df" % ((e - s) // 4), b[8 + n + s:8 + n + e])
    if any(math.isnan(x) or math.isinf(x) for x in vals):
        sys.exit(1)
PY
exit 0
