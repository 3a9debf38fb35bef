#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Training on images that cannot be read: a folder whose every .JPEG is random bytes used to train
# for 30 epochs on black filler images labelled class 0 and exit 0 ("top1 1.000", "skipped and
# replaced", a checkpoint). Now more distinct unreadable files than --max-bad-share (default 1%) of
# the data set stop the run with the count and the first causes, before anything is written; a
# share under the bound trains on the readable images (each bad one replaced by another real
# image); the option raises the bound; and `dltrain eval` that can score no image fails.
. "$(dirname "$0")/../slurm/lib.sh"
local_test_start 5
SMALL=(--arch resnet18 --width 0.25 --image-size 32 --batch 4 --workers 1 --warmup-epochs 0 --log-every 0)

# 4 classes x 8 files of random bytes.
for c in c0 c1 c2 c3; do
  mkdir -p "$WORK/noise/train/$c"
  for i in 1 2 3 4 5 6 7 8; do head -c 3000 /dev/urandom >"$WORK/noise/train/$c/img_$i.JPEG"; done
done
out=$(timeout 120 "$DLTRAIN" train --data "$WORK/noise" "${SMALL[@]}" --epochs 30 --checkpoint-dir "$WORK/ck" 2>&1); rc=$?
if ((rc != 0 && rc != 124)) && [[ $out == *"of the 32 images of $WORK/noise/train are unreadable"*"more than --max-bad-share 0.01 allows"*"First: $WORK/noise/train/c"*"not a readable JPEG"* ]] &&
   [[ $out != *"top1"* && -z $(ls "$WORK/ck" 2>/dev/null) ]]; then
  ok "all 32 images unreadable: stops at once naming the share and the first cause, nothing written (exit $rc)"
else not_ok "all images unreadable (rc=$rc)"; echo "$out" | tail -4 | diag; fi

# 128 good images, then 1 (0.8%) or 3 (2.3%) of them replaced by garbage.
"$MK" folder "$WORK/ds" 4 32 40 40 plain >/dev/null
cp -r "$WORK/ds" "$WORK/one"; head -c 500 /dev/urandom >"$WORK/one/train/c01/img_0003.JPEG"
out=$(timeout 300 "$DLTRAIN" train --data "$WORK/one" "${SMALL[@]}" --epochs 2 2>&1); rc=$?
if ((rc == 0)) && [[ $out == *"1 bad image(s) were skipped and replaced"* ]]; then
  ok "1 unreadable of 128 (under 1%): trains on the rest, each use of it replaced by a readable image"
else not_ok "one bad image (rc=$rc)"; echo "$out" | tail -4 | diag; fi

cp -r "$WORK/ds" "$WORK/three"
for f in c00/img_0001 c02/img_0005 c03/img_0007; do head -c 500 /dev/urandom >"$WORK/three/train/$f.JPEG"; done
out=$(timeout 300 "$DLTRAIN" train --data "$WORK/three" "${SMALL[@]}" --epochs 2 2>&1); rc=$?
out2=$(timeout 300 "$DLTRAIN" train --data "$WORK/three" "${SMALL[@]}" --epochs 2 --max-bad-share 0.05 2>&1); rc2=$?
if ((rc != 0 && rc != 124)) && [[ $out == *"of the 128 images of $WORK/three/train are unreadable"*"--max-bad-share"* ]] &&
   ((rc2 == 0)) && [[ $out2 == *"3 bad image(s) were skipped and replaced"* ]]; then
  ok "3 unreadable of 128: stops by default; --max-bad-share 0.05 trains on the rest"
else not_ok "bound and option (rc=$rc, rc2=$rc2)"; { echo "$out"; echo "$out2"; } | tail -6 | diag; fi

if ((rc2 == 0)) && [[ $(grep -c 'skipping bad image' <<<"$out2") == 3 ]]; then
  ok "each unreadable file named once in the run"
else not_ok "bad files named $(grep -c 'skipping bad image' <<<"$out2") times"; grep 'skipping bad' <<<"$out2" | diag; fi

# eval where no image can be read.
timeout 300 "$DLTRAIN" train --data "$WORK/ds" "${SMALL[@]}" --steps 2 --checkpoint-dir "$WORK/ck2" >/dev/null 2>&1
for c in c00 c01 c02 c03; do mkdir -p "$WORK/noval/$c"; head -c 100 /dev/urandom >"$WORK/noval/$c/v.JPEG"; done
out=$(timeout 120 "$DLTRAIN" eval --val-data "$WORK/noval" "${SMALL[@]}" --checkpoint "$WORK/ck2/ckpt-00000002.safetensors" 2>&1); rc=$?
if ((rc != 0 && rc != 124)) && [[ $out == *"no image could be scored (every one of the 4 was unreadable"* && $out != *nan* ]]; then
  ok "eval with no readable image: fails saying nothing was scored (exit $rc), no NaN printed"
else not_ok "eval on unreadable images (rc=$rc)"; echo "$out" | tail -3 | diag; fi
