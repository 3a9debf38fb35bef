#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Images read by their content: an ImageFolder mixing JPEG and PNG (8-bit RGB, gray, palette,
# RGBA, 16-bit RGB and gray, named .png) with a PNG named .JPEG and a JPEG named .png. The files'
# first bytes, read here, are the reference: one epoch trains on every image with none bad, the
# summary and the metrics count the renamed files as the bytes say, --verbose names each, and
# `dltrain eval` says the same count;
# `dltrain data pack` keeps PNG records as PNG (or re-encodes them with --resize) and training
# reads the .rec back. PIL, where /opt/torchvenv has it, checks the PNGs the fixture wrote.
. "$(dirname "$0")/../slurm/lib.sh"
local_test_start 10
"$MK" folder "$WORK/ds" 3 8 48 40 png || { echo "Bail out! mkjpegs failed"; exit 1; }
MODEL=(--arch resnet18 --width 0.25 --image-size 32 --batch 8 --workers 2)
SMALL=("${MODEL[@]}" --warmup-epochs 0 --epochs 1)

# The reference: what each training file is, by its first bytes.
png_sig=$(printf '\x89PNG\r\n\x1a\n' | od -An -tx1 | tr -d ' \n')
png_named_jpeg=0 jpeg_named_png=0 png_files=0 all=0 renamed=()
for f in "$WORK"/ds/train/*/*; do
  all=$((all + 1))
  head8=$(head -c 8 "$f" | od -An -tx1 | tr -d ' \n')
  if [[ $head8 == "$png_sig" ]]; then
    png_files=$((png_files + 1))
    [[ ${f,,} == *.jpeg || ${f,,} == *.jpg ]] && { png_named_jpeg=$((png_named_jpeg + 1)); renamed+=("$f"); }
  elif [[ $head8 == ffd8ff* && ${f,,} == *.png ]]; then
    jpeg_named_png=$((jpeg_named_png + 1)); renamed+=("$f")
  fi
done
if ((png_named_jpeg == 1 && jpeg_named_png == 1 && png_files >= 6)); then
  ok "fixture: $all training files, $png_files PNG by content, $png_named_jpeg PNG named .JPEG, $jpeg_named_png JPEG named .png"
else not_ok "fixture: $png_files PNG, $png_named_jpeg PNG named .JPEG, $jpeg_named_png JPEG named .png"; fi

PY=/opt/torchvenv/bin/python
if [[ -x $PY ]] && "$PY" -c 'import PIL' 2>/dev/null; then
  res=$("$PY" - "$WORK/ds" <<'PYEOF' 2>&1
import glob, sys
from PIL import Image
n = 0
for f in sorted(glob.glob(sys.argv[1] + "/*/*/*")):
    with open(f, "rb") as fh:
        if fh.read(8) != b"\x89PNG\r\n\x1a\n":
            continue
    im = Image.open(f)
    im.load()
    assert im.format == "PNG" and im.size in ((48, 40), (96, 23)), (f, im.format, im.size)
    n += 1
print(n)
PYEOF
  )
  if [[ $res =~ ^[0-9]+$ ]] && ((res >= png_files)); then ok "PIL reads the $res PNG files the fixture wrote"
  else not_ok "PIL on the fixture's PNGs"; echo "$res" | tail -5 | diag; fi
else ok "# SKIP no PIL in /opt/torchvenv to check the fixture's PNGs"; fi

out=$(timeout 120 "$DLTRAIN" train --data "$WORK/ds" "${SMALL[@]}" --verbose --metrics "$WORK/m.jsonl" --checkpoint-dir "$WORK/ck" 2>&1); rc=$?
if ((rc == 0)) && [[ $out == *"$WORK/ds/train: $all images, 3 classes"* && $out == *"val top-1"*"(24 images,"* && $out != *"bad image"* ]]; then
  ok "one epoch over $all JPEG and PNG images, validation on 24, no bad image"
else not_ok "training on mixed JPEG and PNG (rc=$rc)"; echo "$out" | tail -8 | diag; fi
want="$((png_named_jpeg + jpeg_named_png)) image(s) were decoded by their content, not their name: $png_named_jpeg PNG named .jpg/.jpeg, $jpeg_named_png JPEG named .png"
if [[ $(grep -c "decoded by their content" <<<"$out") == 1 && $out == *"$want"* ]]; then ok "the summary counts them once: $want"
else not_ok "summary of renamed files"; grep -E "content" <<<"$out" | diag; fi
named=0
for f in "${renamed[@]}"; do grep -q "^dltrain: $f: its content is" <<<"$out" && named=$((named + 1)); done
ev=$(grep '"key":"images_by_content"' "$WORK/m.jsonl" 2>/dev/null)
if ((named == ${#renamed[@]})) && [[ $ev == *"\"value\":$((png_named_jpeg + jpeg_named_png)),"*"\"png_named_jpeg\":$png_named_jpeg,\"jpeg_named_png\":$jpeg_named_png"* ]]; then
  ok "--verbose names each of the ${#renamed[@]} files; the metrics event has the counts"
else not_ok "verbose lines ($named of ${#renamed[@]}) or metrics event"; { grep content <<<"$out"; echo "$ev"; } | diag; fi
out=$(timeout 120 "$DLTRAIN" train --data "$WORK/ds" "${SMALL[@]}" --checkpoint-dir "$WORK/ck2" 2>&1); rc=$?
if ((rc == 0)) && [[ $out == *"$want"* && $out != *": its content is"* ]]; then ok "without --verbose: the count, no line per file"
else not_ok "default level (rc=$rc)"; echo "$out" | tail -5 | diag; fi
out=$(timeout 120 "$DLTRAIN" eval --data "$WORK/ds" --val-data "$WORK/ds/train" "${MODEL[@]}" --checkpoint "$WORK/ck/ckpt-00000003.safetensors" 2>&1); rc=$?
if ((rc == 0)) && [[ $out == *": $all images, top-1"* && $out == *"${want#* }"* ]]; then ok "dltrain eval on the training folder: all $all scored, the same count"
else not_ok "eval count (rc=$rc)"; echo "$out" | tail -5 | diag; fi

# RecordIO: stored as read (PNG stays PNG), read back by content; --resize re-encodes as JPEG.
count_png() { python3 -c 'import sys; print(open(sys.argv[1], "rb").read().count(b"\x89PNG\r\n\x1a\n"))' "$1"; }
out=$(timeout 120 "$DLTRAIN" data pack "$WORK/ds/train" "$WORK/t.rec" 2>&1); rc=$?
n=$(count_png "$WORK/t.rec" 2>/dev/null)
out2=$(timeout 120 "$DLTRAIN" train --data "$WORK/t.rec" "${SMALL[@]}" --checkpoint-dir "$WORK/ck3" 2>&1); rc2=$?
if ((rc == 0 && rc2 == 0)) && [[ $n == "$png_files" && $out == *"packed $all images"* && $out == *"$want"*"stored as they are"* && $out2 == *"$all images"* && $out2 != *"bad image"* ]]; then
  ok "data pack keeps the $png_files PNGs as PNG records; training reads all $all back"
else not_ok "pack without --resize (rc=$rc/$rc2, $n PNG records)"; { echo "$out"; echo "$out2"; } | tail -8 | diag; fi
out=$(timeout 120 "$DLTRAIN" data pack "$WORK/ds/train" "$WORK/r.rec" --resize 40 2>&1); rc=$?
n=$(count_png "$WORK/r.rec" 2>/dev/null)
out2=$(timeout 120 "$DLTRAIN" train --data "$WORK/r.rec" "${SMALL[@]}" --checkpoint-dir "$WORK/ck4" 2>&1); rc2=$?
if ((rc == 0 && rc2 == 0)) && [[ $n == 0 && $out == *"re-encoded as JPEG"* && $out2 == *"$all images"* && $out2 != *"bad image"* ]]; then
  ok "data pack --resize re-encodes them as JPEG; training reads all $all back"
else not_ok "pack with --resize (rc=$rc/$rc2, $n PNG records)"; { echo "$out"; echo "$out2"; } | tail -8 | diag; fi

# A damaged PNG and a GIF named .JPEG go the bad-image way, said with what they are.
head -c 200 "$WORK/ds/train/c00/img_0001.png" > "$WORK/cut.png"; mv "$WORK/cut.png" "$WORK/ds/train/c00/img_0001.png"
printf 'GIF89a\001\000\001\000\000\000\000;' > "$WORK/ds/train/c02/img_0000.JPEG"
out=$(timeout 120 "$DLTRAIN" train --data "$WORK/ds" "${SMALL[@]}" --max-bad-share 0.2 --checkpoint-dir "$WORK/ck5" 2>&1); rc=$?
if ((rc == 0)) && [[ $out == *"skipping bad image $WORK/ds/train/c00/img_0001.png: corrupt PNG data"* && $out == *"skipping bad image $WORK/ds/train/c02/img_0000.JPEG: a GIF image, which is not read here (JPEG and PNG are): convert it to JPEG"* ]]; then
  ok "a cut PNG and a GIF named .JPEG are skipped as bad images, saying what they are"
else not_ok "damaged PNG / GIF (rc=$rc)"; grep -E "bad image|rror" <<<"$out" | diag; fi
exit 0
