#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Training and evaluation from real JPEG files: an ImageFolder generated here (grayscale, CMYK,
# progressive and odd-sized images, plus planted damaged files), packed into RecordIO by
# `dltrain data pack`, read back by training; bad images reported once and skipped, or fatal
# with --strict.
. "$(dirname "$0")/../slurm/lib.sh"
DLTRAIN=$DLT_BUILDDIR/trainer/dltrain
MK=$DLT_BUILDDIR/tests/fixtures/mkjpegs
[[ -x $DLTRAIN && -x $MK ]] || skip_all "dltrain or mkjpegs not built"
tap_plan 10
rm -rf "$WORK"/*
"$MK" folder "$WORK/ds" 4 32 64 48 variants
# 3 of the 130 training images are planted bad: above the default --max-bad-share of 1%.
SMALL=(--arch resnet18 --width 0.25 --image-size 32 --batch 16 --warmup-epochs 0 --lr 0.4 --label-smoothing 0 --workers 2
       --max-bad-share 0.05)

out=$(timeout 600 "$DLTRAIN" train --data "$WORK/ds" "${SMALL[@]}" --epochs 8 --log-every 8 --metrics "$WORK/m.jsonl" --checkpoint-dir "$WORK/ck" 2>&1); rc=$?
first=$(grep '"images_per_s"' "$WORK/m.jsonl" 2>/dev/null | head -1 | sed -n 's/.*"loss":\([0-9.]*\).*/\1/p'); last=$(grep '"images_per_s"' "$WORK/m.jsonl" 2>/dev/null | tail -1 | sed -n 's/.*"loss":\([0-9.]*\).*/\1/p')
if ((rc == 0)) && [[ $out == *"$WORK/ds/train: 130 images, 4 classes"* ]] && awk -v a="$first" -v b="$last" 'BEGIN{exit !(b < a)}'; then
  ok "ImageFolder ROOT/train: classes from the tree, the loss falls ($first -> $last)"
else not_ok "ImageFolder training (rc=$rc)"; echo "$out" | tail -5 | diag; fi
n=$(grep -c 'skipping bad image' <<<"$out")
if [[ $n == 3 ]] && grep -q 'img_0000.JPEG: not a readable JPEG' <<<"$out" && grep -q 'empty.JPEG: empty or truncated file' <<<"$out" && grep -q 'notajpeg.jpg: corrupt PNG data' <<<"$out"; then
  ok "the 3 planted bad files are each reported once, with path and reason, and skipped"
else not_ok "bad file reports ($n)"; grep -E 'bad image' <<<"$out" | diag; fi
if grep -q 'bad image(s) were skipped and replaced' <<<"$out"; then ok "the run ends with the count of skipped images"; else not_ok "bad image count"; fi
ck=$(ls "$WORK/ck" | grep -v state | tail -1)
out=$(timeout 300 "$DLTRAIN" eval --data "$WORK/ds" "${SMALL[@]}" --checkpoint "$WORK/ck/$ck" 2>&1); rc=$?
t1=$(sed -n 's/.*top-1 \([0-9.]*\).*/\1/p' <<<"$out")
if ((rc == 0)) && [[ $out == *"$WORK/ds/val: 128 images, 4 classes"* ]] && awk -v a="$t1" 'BEGIN{exit !(a >= 0.35)}'; then ok "eval reads ROOT/val with centre crops, above chance (0.25): $(sed -n 's/.*\(top-1 [0-9.]*\).*/\1/p' <<<"$out")"; else not_ok "eval on ROOT/val (rc=$rc)"; echo "$out" | tail -3 | diag; fi

# The same validation images as one flat folder with a labels file: the same top-1.
mkdir -p "$WORK/flat"; : > "$WORK/flat.txt"
for f in "$WORK"/ds/val/*/*.JPEG; do c=$(basename "$(dirname "$f")"); b="${c}_$(basename "$f")"; cp "$f" "$WORK/flat/$b"; echo "$b $c" >> "$WORK/flat.txt"; done
out2=$(timeout 300 "$DLTRAIN" eval --data "$WORK/ds" --val-data "$WORK/flat" --val-labels "$WORK/flat.txt" "${SMALL[@]}" --checkpoint "$WORK/ck/$ck" 2>&1); rc=$?
t2=$(sed -n 's/.*top-1 \([0-9.]*\).*/\1/p' <<<"$out2")
if ((rc == 0)) && [[ -n $t1 && $t1 == "$t2" && $out2 == *"$WORK/flat: 128 images, 4 classes"* ]]; then ok "flat validation folder + labels file: same top-1 as the class folders ($t2)"; else not_ok "flat val (rc=$rc, $t1 vs $t2)"; echo "$out2" | tail -3 | diag; fi

out=$(timeout 300 "$DLTRAIN" data pack "$WORK/ds/train" "$WORK/train.rec" --resize 40 2>&1); rc=$?
if ((rc == 0)) && [[ $out == *"packed 127 images of 4 classes into $WORK/train.rec (3 unreadable images left out)"* && -s $WORK/train.idx ]]; then ok "data pack: 127 good images into RecordIO, the 3 bad ones left out and named"; else not_ok "packer (rc=$rc)"; echo "$out" | tail -4 | diag; fi
out=$(timeout 600 "$DLTRAIN" train --data "$WORK/train.rec" "${SMALL[@]}" --epochs 2 --log-every 4 2>&1); rc=$?
if ((rc == 0)) && [[ $out == *"train.rec: 127 images, 4 classes, 7 batches per rank per epoch"* && $out != *"bad image"* ]]; then ok "training reads the RecordIO file (labels from the records)"; else not_ok "RecordIO training (rc=$rc)"; echo "$out" | tail -4 | diag; fi

out=$(timeout 300 "$DLTRAIN" train --data "$WORK/ds" "${SMALL[@]}" --epochs 1 --strict 2>&1); rc=$?
if ((rc != 0)) && [[ $out == *"(--strict)"* && $out == *"$WORK/ds/train/c0"* ]]; then ok "--strict: the first bad image stops the run, naming it"; else not_ok "--strict (rc=$rc)"; echo "$out" | tail -3 | diag; fi
# The data directory disappears mid-epoch: a clear error naming it, not a stream of skipped images.
cp -r "$WORK/ds" "$WORK/vanish"
( timeout 300 "$DLTRAIN" train --data "$WORK/vanish" "${SMALL[@]}" --epochs 200 --log-every 4 --eval-every 0 > "$WORK/vanish.out" 2>&1; echo $? > "$WORK/vanish.rc" ) &
for _ in $(seq 300); do grep -q 'step 8/' "$WORK/vanish.out" 2>/dev/null && break; sleep 0.1; done
mv "$WORK/vanish" "$WORK/vanished"
wait
rc=$(cat "$WORK/vanish.rc")
if [[ $rc != 0 && $rc != 124 ]] && grep -q "the data at $WORK/vanish/train is gone (removed or unmounted during the run)" "$WORK/vanish.out"; then ok "the data directory vanishing mid-run ends it with an error naming the directory"; else not_ok "vanishing data (rc=$rc)"; tail -3 "$WORK/vanish.out" | diag; fi
# bench --feed: a new decoded batch every step through the training's input path (the loader's
# ring, held and released around each step), over more steps than an epoch has (130 images at
# batch 16: 8 steps; 3 + 12 steps here); the loaded-once figure beside it.
out=$(timeout 300 "$DLTRAIN" bench --data "$WORK/ds" "${SMALL[@]}" --warmup 3 --iters 12 --feed 2>&1); rc=$?
out1=$(timeout 300 "$DLTRAIN" bench --data "$WORK/ds" "${SMALL[@]}" --warmup 3 --iters 12 2>&1); rc1=$?
if ((rc == 0 && rc1 == 0)) && [[ $out == *"a new batch every step:"*"images/s"* && $out1 != *"a new batch"* ]]; then
  ok "bench --feed decodes a new batch every step across epochs: $(grep -o '[0-9.]* images/s' <<<"$out") vs $(grep -o '[0-9.]* images/s' <<<"$out1") loaded once"
else not_ok "bench --feed (rc=$rc, $rc1)"; echo "$out" | tail -3 | diag; fi
exit 0
