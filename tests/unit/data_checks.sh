#!/usr/bin/env bash
# What a data set is checked for when it is opened, said in the user's terms: a damaged RecordIO
# pair (the .rec cut short, the .idx cut mid-line, a garbage or duplicated line) refused naming the
# index line and why, never trained as fewer classes.
. "$(dirname "$0")/../slurm/lib.sh"
DLTRAIN=$DLT_BUILDDIR/trainer/dltrain
MK=$DLT_BUILDDIR/tests/unit/mkjpegs
[[ -x $DLTRAIN && -x $MK ]] || skip_all "dltrain or mkjpegs not built"
tap_plan 4
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
exit 0
