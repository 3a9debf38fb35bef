#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# What a data set is checked for when it is opened, said in the user's terms: a damaged RecordIO
# pair (the .rec cut short, the .idx cut mid-line, a garbage or duplicated line) refused naming the
# index line and why, never trained as fewer classes; a labels file's gaps (a line naming no file,
# an image without a line) counted and said, every image scored once; an empty class folder
# refused; nested folders, .webp files and dangling links counted and said (refused by --strict);
# a one-class data set and a 10-byte JPEG said in the user's terms; validation classes matched
# by name to the checkpoint's class names (a subset allowed, unknown names and 1-based numbers
# refused, 0-based numbers mapped), a resume on other classes refused, a checkpoint without names
# evaluated as before and said.
. "$(dirname "$0")/../slurm/lib.sh"
DLTRAIN=$DLT_BUILDDIR/trainer/dltrain
MK=$DLT_BUILDDIR/tests/fixtures/mkjpegs
[[ -x $DLTRAIN && -x $MK ]] || skip_all "dltrain or mkjpegs not built"
tap_plan 20
rm -rf "$WORK"/*
mkdir -p "$WORK"
"$MK" folder "$WORK/ds" 10 6 40 36 plain
SMALL=(--arch resnet18 --width 0.25 --image-size 32 --batch 8 --warmup-epochs 0 --workers 1 --log-every 0 --eval-every 0)
train1() { timeout 120 "$DLTRAIN" train "${SMALL[@]}" --epochs 1 "$@" 2>&1; }

# RecordIO: a truncated .rec with its .idx intact.
"$DLTRAIN" data pack "$WORK/ds/train" "$WORK/r.rec" >/dev/null 2>&1
size=$(stat -c %s "$WORK/r.rec")
cp "$WORK/r.rec" "$WORK/cut.rec"; cp "$WORK/r.idx" "$WORK/cut.idx"
truncate -s $((size / 2)) "$WORK/cut.rec"
out=$(train1 --data "$WORK/cut.rec"); rc=$?
if ((rc != 0 && rc != 124)) && [[ $out == *"cut.idx, line "*"the .rec was truncated; refusing the pair $WORK/cut.rec + $WORK/cut.idx"* && $out != *"classes"*"batches per rank"* ]]; then
  ok "a .rec cut in half is refused naming the first index line past its end (rc=$rc)"
else not_ok "truncated .rec (rc=$rc)"; echo "$out" | tail -4 | diag; fi
# The index cut mid-line.
cp "$WORK/r.rec" "$WORK/mid.rec"; head -c -3 "$WORK/r.idx" >"$WORK/mid.idx"
out=$(train1 --data "$WORK/mid.rec"); rc=$?
if ((rc != 0 && rc != 124)) && [[ $out == *"mid.idx, line 60: cut short (no end of line)"* ]]; then ok "an index cut mid-line is refused naming its last line"
else not_ok "index cut mid-line (rc=$rc)"; echo "$out" | tail -4 | diag; fi
# A garbage line, and a duplicated line.
cp "$WORK/r.rec" "$WORK/gar.rec"; sed '5s/.*/garbage here/' "$WORK/r.idx" >"$WORK/gar.idx"
out=$(train1 --data "$WORK/gar.rec"); rc=$?
if ((rc != 0 && rc != 124)) && [[ $out == *"gar.idx, line 5: 'garbage here' is not \"KEY<TAB>OFFSET\""* ]]; then ok "a garbage index line is refused naming it"
else not_ok "garbage index line (rc=$rc)"; echo "$out" | tail -4 | diag; fi
cp "$WORK/r.rec" "$WORK/dup.rec"; sed '7p' "$WORK/r.idx" >"$WORK/dup.idx"
out=$(train1 --data "$WORK/dup.rec"); rc=$?
if ((rc != 0 && rc != 124)) && [[ $out == *"dup.idx, line 8: the same offset as the line before (a duplicated line)"* ]]; then ok "a duplicated index line is refused naming it"
else not_ok "duplicated index line (rc=$rc)"; echo "$out" | tail -4 | diag; fi

# A labels file with gaps: one line names a file that is not there, one image has no line.
"$DLTRAIN" train --data "$WORK/ds" "${SMALL[@]}" --epochs 1 --checkpoint-dir "$WORK/ck" >/dev/null 2>&1
ck=$(ls "$WORK"/ck/ckpt-*.safetensors 2>/dev/null | grep -v state | tail -1)
mkdir -p "$WORK/flat"; : >"$WORK/flat.txt"
for f in "$WORK"/ds/val/*/*.JPEG; do c=$(basename "$(dirname "$f")"); b="${c}_$(basename "$f")"; cp "$f" "$WORK/flat/$b"; echo "$b $c" >>"$WORK/flat.txt"; done
nval=$(wc -l <"$WORK/flat.txt")
sed -i '1d' "$WORK/flat.txt"            # its image stays in the folder without a line
echo "c03_not_there.JPEG c03" >>"$WORK/flat.txt"
out=$(timeout 120 "$DLTRAIN" eval --data "$WORK/ds" --val-data "$WORK/flat" --val-labels "$WORK/flat.txt" "${SMALL[@]}" --checkpoint "$ck" 2>&1); rc=$?
if ((rc == 0)) && [[ $out == *": $((nval - 1)) images, top-1"* && $out == *"left out: 1 labels-file line(s) naming a file that is not there (first: $WORK/flat/c03_not_there.JPEG); 1 image(s) without a line in the labels file"* && $out != *"bad image"* ]]; then
  ok "labels-file gaps: the missing file and the image without a line are counted and said; $((nval - 1)) images scored once each"
else not_ok "labels-file gaps (rc=$rc)"; echo "$out" | tail -5 | diag; fi

# An empty class folder.
cp -r "$WORK/ds" "$WORK/empty"; rm -f "$WORK"/empty/train/c04/*
out=$(train1 --data "$WORK/empty"); rc=$?
if ((rc != 0 && rc != 124)) && [[ $out == *"class folder $WORK/empty/train/c04 holds no .JPEG/.jpg/.png images"* ]]; then ok "an empty class folder is refused naming it"
else not_ok "empty class folder (rc=$rc)"; echo "$out" | tail -4 | diag; fi
# Nested folders, a .webp, a dangling symbolic link: counted and said; --strict refuses them.
cp -r "$WORK/ds" "$WORK/odd"
mkdir -p "$WORK/odd/train/c01/more"; cp "$WORK/odd/train/c01/img_0000.JPEG" "$WORK/odd/train/c01/more/"
cp "$WORK/odd/train/c02/img_0000.JPEG" "$WORK/odd/train/c02/pic.webp"
ln -s /nonexistent/img.JPEG "$WORK/odd/train/c03/link.JPEG"
out=$(train1 --data "$WORK/odd"); rc=$?
if ((rc == 0)) && [[ $out == *"$WORK/odd/train: left out: 1 folder(s) inside class folders (only one level is read) (first: $WORK/odd/train/c01/more); 1 image file(s) not in .JPEG/.jpg/.png"*"(first: $WORK/odd/train/c02/pic.webp); 1 dangling symbolic link(s), unreadable entries or paths longer than PATH_MAX (first: $WORK/odd/train/c03/link.JPEG)"* ]]; then
  ok "a nested folder, a .webp and a dangling link are counted and named"
else not_ok "left-out entries (rc=$rc)"; echo "$out" | tail -4 | diag; fi
out=$(train1 --data "$WORK/odd" --strict); rc=$?
if ((rc != 0 && rc != 124)) && [[ $out == *"left out: 1 folder(s)"*"(--strict refuses a data set that leaves images out"* ]]; then ok "--strict refuses a data set that leaves images out"
else not_ok "--strict with left-out entries (rc=$rc)"; echo "$out" | tail -4 | diag; fi

# One class: what is wrong with the data, not the model's limits.
mkdir -p "$WORK/one/train"; cp -r "$WORK/ds/train/c00" "$WORK/one/train/"
out=$(train1 --data "$WORK/one" --batch 4); rc=$?
if ((rc != 0 && rc != 124)) && [[ $out == *"$WORK/one/train has 1 class, c00: training a classifier needs at least 2"* && $out != *"invalid model"* ]]; then ok "a one-class data set is refused in the data's terms"
else not_ok "one class (rc=$rc)"; echo "$out" | tail -4 | diag; fi
# A 10-byte JPEG: truncated, not "dimensions out of range".
cp -r "$WORK/ds" "$WORK/ten"; head -c 10 "$WORK/ds/train/c00/img_0001.JPEG" >"$WORK/ten/train/c00/img_0000.JPEG"
out=$(train1 --data "$WORK/ten" --max-bad-share 0.05); rc=$?  # 1 of the small set: above the 1% default
if ((rc == 0)) && [[ $out == *"skipping bad image $WORK/ten/train/c00/img_0000.JPEG: "*@(truncated or not a JPEG|not a readable JPEG)* && $out != *"dimensions out of range"* ]]; then ok "a 10-byte JPEG is said to be truncated: $(grep -o 'img_0000.JPEG: .*' <<<"$out" | head -1)"
else not_ok "10-byte JPEG (rc=$rc)"; echo "$out" | grep -E 'bad image|error' | tail -4 | diag; fi

# Validation classes by name. The checkpoint's state file records the training class names.
st=${ck%.safetensors}.state.safetensors
if grep -aq '"class_names":"c00\\u000ac01\\u000ac02' "$st"; then ok "the state file records the class names"; else not_ok "class names in the state file"; head -c 1500 "$st" | strings | diag; fi
ref=$(timeout 120 "$DLTRAIN" eval --data "$WORK/ds" "${SMALL[@]}" --checkpoint "$ck" 2>&1 | sed -n 's/.*top-1 \([0-9.]*\).*/\1/p')
# A validation subset missing a class: scored, not "has 9 classes but --classes 10 was given".
mkdir -p "$WORK/sub"; cp -r "$WORK"/ds/val/c0[0-8] "$WORK/sub/"
out=$(timeout 120 "$DLTRAIN" eval --data "$WORK/ds" --val-data "$WORK/sub" "${SMALL[@]}" --checkpoint "$ck" 2>&1); rc=$?
if ((rc == 0)) && [[ $out == *"$WORK/sub: 54 images, 10 classes"*": 54 images, top-1"* ]]; then ok "a validation subset (9 of 10 classes) is scored against the 10 trained classes"
else not_ok "validation subset (rc=$rc)"; echo "$out" | tail -4 | diag; fi
# Folders named in another order than training's: matched by name, same top-1 as the plain set.
mkdir -p "$WORK/renamed"; for d in "$WORK"/ds/val/c*; do cp -r "$d" "$WORK/renamed/"; done
mv "$WORK/renamed/c00" "$WORK/renamed/zz"; mv "$WORK/renamed/c09" "$WORK/renamed/c00"; mv "$WORK/renamed/zz" "$WORK/renamed/c09"
out=$(timeout 120 "$DLTRAIN" eval --data "$WORK/ds" --val-data "$WORK/renamed" "${SMALL[@]}" --checkpoint "$ck" 2>&1); rc=$?
# (c00 and c09 swapped their images: a folder's name, not its position, says its class)
sw=$(sed -n 's/.*top-1 \([0-9.]*\).*/\1/p' <<<"$out")
mkdir -p "$WORK/unknown"; cp -r "$WORK/ds/val/c00" "$WORK/unknown/"; cp -r "$WORK/ds/val/c01" "$WORK/unknown/cat"
out2=$(timeout 120 "$DLTRAIN" eval --data "$WORK/ds" --val-data "$WORK/unknown" "${SMALL[@]}" --checkpoint "$ck" 2>&1); rc2=$?
if ((rc == 0 && rc2 != 0 && rc2 != 124)) && [[ -n $sw && $out2 == *"1 of its 2 class(es) are not among the 10 classes it is scored against (c00...c09): 'cat'"* ]]; then ok "class folders are matched by name (two swapped folders scored: top-1 $sw, the plain set $ref); an unknown folder name is refused naming it"
else not_ok "by-name folders (rc=$rc, $rc2)"; { echo "$out"; echo "$out2"; } | tail -4 | diag; fi
# Labels files: 1-based numbers refused; 0-based numbers mapped with a note; unknown names refused.
awk '{c=substr($2,2)+0; print $1, c+1}' "$WORK/flat.txt" | grep -v not_there >"$WORK/one_based.txt"
out=$(timeout 120 "$DLTRAIN" eval --data "$WORK/ds" --val-data "$WORK/flat" --val-labels "$WORK/one_based.txt" "${SMALL[@]}" --checkpoint "$ck" 2>&1); rc=$?
if ((rc != 0 && rc != 124)) && [[ $out == *"'10'"*"numbers count from 0"* ]]; then ok "a labels file with 1-based class numbers is refused, saying numbers count from 0"
else not_ok "1-based labels (rc=$rc)"; echo "$out" | tail -4 | diag; fi
awk '{c=substr($2,2)+0; print $1, c}' "$WORK/flat.txt" | grep -v not_there >"$WORK/zero_based.txt"
grep -v not_there "$WORK/flat.txt" >"$WORK/names.txt"
out=$(timeout 120 "$DLTRAIN" eval --data "$WORK/ds" --val-data "$WORK/flat" --val-labels "$WORK/zero_based.txt" "${SMALL[@]}" --checkpoint "$ck" 2>&1); rc=$?
out2=$(timeout 120 "$DLTRAIN" eval --data "$WORK/ds" --val-data "$WORK/flat" --val-labels "$WORK/names.txt" "${SMALL[@]}" --checkpoint "$ck" 2>&1); rc2=$?
t0=$(sed -n 's/.*top-1 \([0-9.]*\).*/\1/p' <<<"$out"); tn=$(sed -n 's/.*top-1 \([0-9.]*\).*/\1/p' <<<"$out2")
if ((rc == 0 && rc2 == 0)) && [[ -n $t0 && $t0 == "$tn" && $out == *"10 class(es) given as numbers are taken as positions 0..9"* ]]; then ok "0-based class numbers are positions in the training classes, said once (top-1 $t0 as with names)"
else not_ok "0-based labels (rc=$rc, $rc2: $t0 vs $tn)"; { echo "$out"; echo "$out2"; } | tail -4 | diag; fi
sed 's/ c03$/ dog/' "$WORK/names.txt" >"$WORK/dog.txt"
out=$(timeout 120 "$DLTRAIN" eval --data "$WORK/ds" --val-data "$WORK/flat" --val-labels "$WORK/dog.txt" "${SMALL[@]}" --checkpoint "$ck" 2>&1); rc=$?
if ((rc != 0 && rc != 124)) && [[ $out == *"'dog'"* && $out != *"top-1"* ]]; then ok "an unknown class name in a labels file is refused naming it"
else not_ok "unknown label name (rc=$rc)"; echo "$out" | tail -4 | diag; fi
# A resume on the same data, the class count not given: the data's count is not compared with a
# default, and the names match the checkpoint's.
out=$(train1 --data "$WORK/ds" --resume "$ck" --epochs 2); rc=$?
if ((rc == 0)) && [[ $out != *"settings differ"* && $out == *"resum"* ]]; then ok "a resume on the same data without --classes continues"
else not_ok "resume on the same data (rc=$rc)"; echo "$out" | tail -4 | diag; fi
# A resume on data with other classes is refused.
cp -r "$WORK/ds" "$WORK/other"; mv "$WORK/other/train/c05" "$WORK/other/train/c55"
out=$(train1 --data "$WORK/other" --resume "$ck" --epochs 2); rc=$?
if ((rc != 0 && rc != 124)) && [[ $out == *"does not have the classes of the checkpoint"*"class 5 is 'c06' here, 'c05' in the checkpoint"* ]]; then ok "a resume on data with other classes is refused, naming the first difference"
else not_ok "resume on other classes (rc=$rc)"; echo "$out" | tail -4 | diag; fi
# A checkpoint without class names (trained on RecordIO without its .classes file): as before, said.
rm -f "$WORK/r.classes"
"$DLTRAIN" train --data "$WORK/r.rec" "${SMALL[@]}" --epochs 1 --checkpoint-dir "$WORK/ckr" >/dev/null 2>&1
ckr=$(ls "$WORK"/ckr/ckpt-*.safetensors 2>/dev/null | grep -v state | tail -1)
out=$(timeout 120 "$DLTRAIN" eval --data "$WORK/ds" "${SMALL[@]}" --checkpoint "$ckr" 2>&1); rc=$?
if ((rc == 0)) && [[ $out == *"the checkpoint records no class names (a torchvision export, or a checkpoint of an older dltrain), so the validation classes are numbered in their own sorted order"* && $(grep -c 'class names' <<<"$out") == 1 && $out == *"top-1"* ]]; then ok "a checkpoint without class names is evaluated as before, and that is said once"
else not_ok "checkpoint without names (rc=$rc)"; echo "$out" | tail -4 | diag; fi
# An unreadable validation image is left unscored, never replaced by another (scored twice): the
# same count and top-1 as the folder without it.
cp -r "$WORK/ds/val" "$WORK/vbad"; cp -r "$WORK/ds/val" "$WORK/vless"
victim=$(ls "$WORK"/vbad/c03/*.JPEG | head -1)
head -c 10 "$victim" >"$victim.tmp" && mv "$victim.tmp" "$victim"; rm "$WORK/vless/c03/$(basename "$victim")"
out=$(timeout 120 "$DLTRAIN" eval --data "$WORK/ds" --val-data "$WORK/vbad" "${SMALL[@]}" --checkpoint "$ck" 2>&1); rc=$?
out2=$(timeout 120 "$DLTRAIN" eval --data "$WORK/ds" --val-data "$WORK/vless" "${SMALL[@]}" --checkpoint "$ck" 2>&1); rc2=$?
r1=$(sed -n 's/.*: \([0-9]*\) images, top-1 \([0-9.]*\), top-5 \([0-9.]*\).*/\1 \2 \3/p' <<<"$out")
r2=$(sed -n 's/.*: \([0-9]*\) images, top-1 \([0-9.]*\), top-5 \([0-9.]*\).*/\1 \2 \3/p' <<<"$out2")
if ((rc == 0 && rc2 == 0)) && [[ -n $r1 && $r1 == "$r2" && $out == *"skipping bad image $victim"* ]]; then ok "an unreadable validation image is named and left unscored: images, top-1, top-5 as without it ($r1)"
else not_ok "unreadable validation image (rc=$rc/$rc2: '$r1' vs '$r2')"; { echo "$out"; echo "$out2"; } | tail -6 | diag; fi
exit 0
