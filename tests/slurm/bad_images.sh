#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# One damaged image that only one rank of 2 nodes x 2 ranks reads: under --strict that rank says
# which file and why, and every rank stops at the same step within seconds (not at the stall
# watchdog, not waiting in the all-reduce); without --strict the file is reported once in the
# whole run, whichever rank meets it in whichever epoch, and the run ends with one total. A PNG
# named .JPEG among them is read by its content and counted once over the ranks and epochs.
. "$(dirname "$0")/lib.sh"
data_test_start 2 10 5
"$MK" folder "$WORK/ds" 2 17 40 40 plain
# 36 training images, 9 per rank and a batch of 9: each image read by exactly one rank per epoch
# (no sampler padding, nothing dropped); one of them damaged.
: >"$WORK/ds/train/c01/zz_damaged.JPEG"
"$MK" folder "$WORK/png" 1 3 40 40 png # its train/c00/img_0002.JPEG is a PNG
cp "$WORK/png/train/c00/img_0002.JPEG" "$WORK/ds/train/c00/zz_extra.JPEG"
SMALL=(--arch resnet18 --width 0.25 --image-size 32 --batch 9 --workers 1 --log-every 0 --warmup-epochs 0 --stall-timeout 600)
SRUN=(srun --quiet -N2 --ntasks-per-node=2 --gpus-per-node=2 --mpi=pmix --dl-train)

start=$SECONDS
out=$(timeout 300 "${SRUN[@]}" "$DLTRAIN" train --data "$WORK/ds" "${SMALL[@]}" --epochs 2 --strict 2>&1); rc=$?
el=$((SECONDS - start))
if ((rc != 0 && el < 60)) && [[ $out == *"zz_damaged.JPEG (--strict): empty or truncated file (every rank stops at step"* && $out != *watchdog* ]]; then
  ok "--strict, one damaged image on one rank: that rank names file and cause, all stop in ${el}s (no watchdog)"
else not_ok "--strict across ranks (rc=$rc, ${el}s)"; echo "$out" | tail -8 | diag; fi
others=$(grep -c 'other rank(s) could not load their batch' <<<"$out")
if ((others == 3)) && [[ $(grep -c 'ending every rank' <<<"$out") == 0 ]]; then
  ok "the three other ranks stop at the same step, saying another rank could not go on (no abort needed)"
else not_ok "other ranks' stop ($others)"; echo "$out" | diag; fi

out=$(timeout 300 "${SRUN[@]}" "$DLTRAIN" train --data "$WORK/ds" "${SMALL[@]}" --epochs 4 --max-bad-share 0.05 2>&1); rc=$?
n=$(grep -c 'skipping bad image .*zz_damaged.JPEG' <<<"$out")
if ((rc == 0 && n == 1)); then ok "without --strict: the damaged file is reported once in 4 epochs over 4 ranks"; else not_ok "once per run (rc=$rc, $n reports)"; echo "$out" | grep -E 'bad image|rank' | diag; fi
if [[ $out == *"1 bad image(s) were skipped and replaced (distinct files, over all 4 rank(s))"* ]]; then
  ok "the run ends with one total over all ranks"
else not_ok "total over ranks"; echo "$out" | tail -4 | diag; fi
want="1 image(s) were decoded by their content, not their name: 1 PNG named .jpg/.jpeg, 0 JPEG named .png (distinct files, over all 4 rank(s)"
if [[ $(head -c 8 "$WORK/ds/train/c00/zz_extra.JPEG" | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a &&
  $(grep -c "decoded by their content" <<<"$out") == 1 && $out == *"$want"* &&
  $(grep -c 'bad image .*zz_extra' <<<"$out") == 0 ]]; then
  ok "the PNG named .JPEG: read, counted once over 4 epochs and 4 ranks"
else not_ok "PNG named .JPEG across ranks"; grep -E 'content|zz_extra' <<<"$out" | diag; fi
exit 0
