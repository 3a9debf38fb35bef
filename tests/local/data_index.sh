#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `dltrain data index DIR` keeps an image folder's list in DIR/train/.dltrain-index (and val/):
# a later run reads it instead of listing the folder, and says so; an image or a class folder
# added since, an index damaged by one byte or cut short, or one of an earlier version (which
# listed no .png) is never used silently: the run says why and lists the folder (and sees the new
# images).
. "$(dirname "$0")/../slurm/lib.sh"
local_test_start 8
"$MK" folder "$WORK/d" 4 12 40 40 plain >/dev/null
SMALL=(--arch resnet18 --width 0.25 --image-size 32 --batch 4 --workers 1 --log-every 0 --warmup-epochs 0 --steps 1)
IDX=$WORK/d/train/.dltrain-index
run() { "$DLTRAIN" train --data "$WORK/d" "${SMALL[@]}" 2>&1; }

out=$("$DLTRAIN" data index "$WORK/d" 2>&1); rc=$?
if ((rc == 0)) && [[ -f $IDX && -f $WORK/d/val/.dltrain-index && $out == *"indexed $WORK/d/train: 48 images"* ]]; then
  ok "data index writes train/ and val/ indexes"
else not_ok "data index (rc=$rc)"; echo "$out" | diag; fi
out=$(run); rc=$?
if ((rc == 0)) && [[ $out == *"$WORK/d/train: read from its index .dltrain-index (it matches the folder): not listed"* &&
      $out == *"$WORK/d/train: 48 images, 4 classes"* && $out != *"not used"* ]]; then
  ok "a run reads the index instead of listing, and says so"
else not_ok "index used (rc=$rc)"; echo "$out" | diag; fi

cp "$WORK/d/train/c01/img_0000.JPEG" "$WORK/d/train/c01/added.JPEG"
out=$(run); rc=$?
if ((rc == 0)) && [[ $out == *"its index .dltrain-index is not used (stale: class folder c01 changed since it was made): listing the folder instead"* &&
      $out == *"$WORK/d/train: 49 images, 4 classes"* ]]; then
  ok "an image added since: the index is stale, said, the folder listed (49 images)"
else not_ok "stale after an added image (rc=$rc)"; echo "$out" | diag; fi

"$DLTRAIN" data index "$WORK/d" >/dev/null 2>&1
mkdir "$WORK/d/train/c04"; cp "$WORK/d/train/c00/img_0000.JPEG" "$WORK/d/train/c04/"
out=$(run); rc=$?
if ((rc == 0)) && [[ $out == *"not used (stale: $WORK/d/train holds 5 class folder(s), the index 4)"* && $out == *"50 images, 5 classes"* ]]; then
  ok "a class folder added since: stale, said, listed"
else not_ok "stale after an added class (rc=$rc)"; echo "$out" | diag; fi

"$DLTRAIN" data index "$WORK/d" >/dev/null 2>&1
# Flip every bit of byte 60 (writing a fixed byte would change nothing if it were already there:
# byte 60 is part of a folder's mtime in ns, which passes through every value).
b=$(od -An -tu1 -j60 -N1 "$IDX" | tr -d ' ')
printf "\\$(printf '%03o' $((255 - b)))" | dd of="$IDX" bs=1 seek=60 conv=notrunc 2>/dev/null
cmp -s <(od -An -tu1 -j60 -N1 "$IDX" | tr -d ' ') <(echo $((255 - b))) || echo "byte 60 not flipped" >&2
out=$(run); rc=$?
if ((rc == 0)) && [[ $out == *"not used (damaged: checksum mismatch)"* && $out == *"50 images, 5 classes"* ]]; then
  ok "one byte of the index changed: damaged, said, listed"
else not_ok "damaged index (rc=$rc)"; echo "$out" | diag; fi
"$DLTRAIN" data index "$WORK/d" >/dev/null 2>&1
truncate -s -20 "$IDX"
out=$(run); rc=$?
if ((rc == 0)) && [[ $out == *"not used (damaged: "* && $out == *"50 images, 5 classes"* ]]; then
  ok "an index cut short: damaged, said, listed"
else not_ok "cut index (rc=$rc)"; echo "$out" | diag; fi
rm -f "$IDX"; mkfifo "$IDX"
out=$(timeout 60 "$DLTRAIN" train --data "$WORK/d" "${SMALL[@]}" 2>&1); rc=$?
rm -f "$IDX"
if ((rc == 0)) && [[ $out == *"its index .dltrain-index is not used (cannot be read: "* && $out == *"50 images, 5 classes"* ]]; then
  ok "a FIFO under the index's name: refused at once, said, the folder listed (no wait)"
else not_ok "FIFO index (rc=$rc)"; echo "$out" | diag; fi
# An index of an earlier version (magic DLTIDX01), which listed no .png: stale, never used.
"$DLTRAIN" data index "$WORK/d" >/dev/null 2>&1
printf '1' | dd of="$IDX" bs=1 seek=7 conv=notrunc status=none
out=$(run); rc=$?
if ((rc == 0)) && [[ $(head -c 8 "$IDX") == DLTIDX01 && $out == *"its index .dltrain-index is not used (stale: made by an earlier dltrain, which listed no .png files; dltrain data index renews it): listing the folder instead"* && $out == *"50 images, 5 classes"* ]]; then
  ok "an index of an earlier version (no .png listed): stale, said, the folder listed"
else not_ok "earlier version's index (rc=$rc)"; echo "$out" | diag; fi
exit 0
