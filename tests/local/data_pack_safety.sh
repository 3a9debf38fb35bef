#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `dltrain data pack` never destroys what it reads or what a job reads: it used to write OUT in
# place, so packing into SRC/c00/img_0001.JPEG overwrote that image with RecordIO, re-packing a
# file a job trained on fed the job "bad magic" records, and a pack killed mid-way left an index
# cut at a line boundary that training accepted. Now: OUT inside SRC_DIR is refused, an existing
# OUT is replaced only with --force, the files are written under temporary names and take their
# names at the end (index last), and a reader refuses an index that stops short of the .rec's end.
. "$(dirname "$0")/../slurm/lib.sh"
local_test_start 6
"$MK" folder "$WORK/src" 4 24 40 40 plain >/dev/null
SRC=$WORK/src/train
SMALL=(--arch resnet18 --width 0.25 --image-size 32 --batch 4 --workers 1 --log-every 0 --warmup-epochs 0)

cp "$SRC/c00/img_0001.JPEG" "$WORK/orig.JPEG"
out=$("$DLTRAIN" data pack "$SRC" "$SRC/c00/img_0001.JPEG" --quiet 2>&1); rc=$?
if [[ $rc == 2 && $out == *"$SRC/c00/img_0001.JPEG is inside $SRC: packing would read (or overwrite) its own output"* ]] &&
   cmp -s "$SRC/c00/img_0001.JPEG" "$WORK/orig.JPEG" && [[ -z $(ls "$SRC/c00" | grep -v '\.JPEG$') ]]; then
  ok "OUT inside SRC_DIR (one of its images): refused (exit 2), the image untouched"
else not_ok "OUT inside SRC (rc=$rc)"; echo "$out" | diag; fi

"$DLTRAIN" data pack "$SRC" "$WORK/p.rec" --quiet >/dev/null 2>&1
cp "$WORK/p.rec" "$WORK/p.rec.before"
out=$("$DLTRAIN" data pack "$SRC" "$WORK/p.rec" --quiet --resize 32 2>&1); rc=$?
if [[ $rc == 2 && $out == *"$WORK/p.rec exists: --force replaces it"* ]] && cmp -s "$WORK/p.rec" "$WORK/p.rec.before"; then
  ok "an existing OUT is refused without --force (exit 2), left as it was"
else not_ok "overwrite without --force (rc=$rc)"; echo "$out" | diag; fi

# A job trains on p.rec while it is packed again with --force: the job reads the files it opened.
timeout 300 "$DLTRAIN" train --data "$WORK/p.rec" "${SMALL[@]}" --epochs 1000 --steps 300 --metrics "$WORK/m.jsonl" >"$WORK/job.out" 2>&1 &
JOB=$!
for _ in $(seq 600); do [[ -s $WORK/m.jsonl ]] && break; sleep 0.05; done
out=$("$DLTRAIN" data pack "$SRC" "$WORK/p.rec" --quiet --force --resize 36 2>&1); rc=$?
wait "$JOB"; jrc=$?
if [[ $rc == 0 && $jrc == 0 ]] && ! grep -q 'bad\|magic' "$WORK/job.out" && ! cmp -s "$WORK/p.rec" "$WORK/p.rec.before" &&
   [[ -z $(ls "$WORK" | grep '\.tmp\.') ]]; then
  ok "--force while a job trains on the file: replaced, and the job reads on undisturbed (no bad record)"
else not_ok "re-pack under a running job (pack rc=$rc, job rc=$jrc)"; grep -m3 'bad\|magic' "$WORK/job.out" | diag; fi

# An index cut at a line boundary (as a pack or copy that did not finish leaves it).
cp "$WORK/p.rec" "$WORK/cut.rec"; cp "$WORK/p.classes" "$WORK/cut.classes"; head -n 20 "$WORK/p.idx" >"$WORK/cut.idx"
out=$("$DLTRAIN" train --data "$WORK/cut.rec" "${SMALL[@]}" --steps 1 2>&1); rc=$?
if [[ $rc != 0 && $out == *"index $WORK/cut.idx lists records up to byte "*"the index is cut short"* ]]; then
  ok "an index that stops short of the .rec's end is refused, said so"
else not_ok "cut index (rc=$rc)"; echo "$out" | tail -2 | diag; fi

# A pack killed mid-way leaves no file under OUT's names (only its temporary files).
for c in 1 2 3 4 5 6; do cp -r "$SRC/c00" "$SRC/c0$((c + 3))x"; done
"$DLTRAIN" data pack "$SRC" "$WORK/k.rec" --quiet --resize 200 >/dev/null 2>&1 &
P=$!
for _ in $(seq 500); do ls "$WORK" | grep -q '^k\.rec\.tmp\.' && break; sleep 0.005; done
KID=$(pgrep -f "^[^ ]*/\.libs/(lt-)?dltrain data pack .*$WORK/k\.rec" | head -1); kill -KILL "${KID:-$P}" 2>/dev/null; wait "$P" 2>/dev/null
if [[ ! -e $WORK/k.rec && ! -e $WORK/k.idx && ! -e $WORK/k.classes ]]; then
  ok "a pack killed mid-way leaves nothing under OUT's names ($(ls "$WORK" | grep -c '^k\.rec\.tmp\.') temporary file(s))"
else not_ok "killed pack left $(ls "$WORK" | grep '^k\.' | tr '\n' ' ')"; fi

out=$("$DLTRAIN" data foo 2>&1); rc=$?
if [[ $rc == 2 && $out == *"unknown subcommand 'foo' (the ones there are: pack, index)"* ]]; then ok "dltrain data foo names foo as unknown"
else not_ok "data foo (rc=$rc)"; echo "$out" | diag; fi
