#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# --metrics when the file cannot grow (a full disk; here a file-size limit, ulimit -f, with SIGXFSZ
# ignored, which fails the write the same way at a byte boundary): the run still ends 0, says so
# once, and the file holds whole JSON lines only (it used to be cut in the middle of a line at a
# stdio buffer boundary, with no word). contrib/report.py skips a torn last line, saying so.
. "$(dirname "$0")/../slurm/lib.sh"
DLTRAIN=$DLT_BUILDDIR/trainer/dltrain
[[ -x $DLTRAIN ]] || skip_all "dltrain not built"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
tap_plan 3
rm -rf "${WORK:?}" && mkdir -p "$WORK"
M=$WORK/m.jsonl
out=$( (trap '' XFSZ; ulimit -f 4; exec timeout 120 "$DLTRAIN" train --arch resnet18 --width 0.25 --image-size 32 \
  --classes 4 --warmup-epochs 0 --batch 8 --synthetic-size 64 --steps 40 --log-every 1 --metrics "$M") 2>&1); rc=$?
size=$(stat -c %s "$M")
whole=$(python3 - "$M" <<'PYEOF'
import json, sys
data = open(sys.argv[1]).read()
lines = data.split("\n")
ok = data.endswith("\n") and all(json.loads(l) is not None for l in lines[:-1] if l)
print("%d whole lines" % (len(lines) - 1) if ok else "TORN")
PYEOF
)
warned=$(grep -c -- "--metrics: write failed: File too large; metrics lines stop here" <<<"$out")
if ((rc == 0 && size <= 4096 && warned == 1)) && [[ $whole == *"whole lines" ]]; then
  ok "a file that cannot grow: exit 0, one warning, $size bytes of $whole, none cut"
else not_ok "metrics on a full file (rc=$rc, size=$size, $whole, warned=$warned)"; echo "$out" | tail -5 | diag; fi

# report.py reads a metrics file whose last line was cut (a run killed while writing it).
R=$WORK/r.jsonl
for i in 1 2 3 4; do echo "{\"step\":$i,\"loss\":1.0,\"images_per_s\":100.0,\"ranks\":1,\"batch\":8,\"time\":$i.0}"; done >"$R"
printf '{"step":5,"loss":1.0,"images_p' >>"$R"
out=$(python3 "$DLT_SRCDIR/contrib/report.py" "$R" 2>&1); rc=$?
if ((rc == 0)) && [[ $out == *"skipping a torn last line"* ]]; then ok "report.py skips a torn last line, saying so"
else not_ok "report.py on a torn last line (rc=$rc)"; echo "$out" | diag; fi

# report.py divides totals: after the warm-up interval, 10 steps of 32 images in 1 s, then 1 step
# in 10 s, are 352 images in 11 s = 32.0 images/s (the mean of the two rates, 161.6, was printed);
# a resumed run appending to the file (a new run_id, its clock from 0) leaves out its own warm-up
# interval and adds 2 steps in 2 s: 416 images in 13 s = 32.0; the wait share is time-weighted.
R=$WORK/rates.jsonl
{ echo '{"step":10,"images_per_s":10,"ranks":1,"batch":32,"time":10,"run_id":"a","data_wait":0.5,"wait":0.5}'
  echo '{"step":20,"images_per_s":320,"ranks":1,"batch":32,"time":11,"run_id":"a","data_wait":0,"wait":0}'
  echo '{"step":21,"images_per_s":3.2,"ranks":1,"batch":32,"time":21,"run_id":"a","data_wait":0,"wait":1.0}'
  echo '{"step":20,"images_per_s":1,"ranks":1,"batch":32,"time":30,"run_id":"b","data_wait":0,"wait":0}'
  echo '{"step":22,"images_per_s":32,"ranks":1,"batch":32,"time":32,"run_id":"b","data_wait":0,"wait":0}'; } >"$R"
out=$(python3 "$DLT_SRCDIR/contrib/report.py" "$R" 2>&1); rc=$?
if ((rc == 0)) && grep -qE '^run +1 +32\.0 +32\.0 .* 76\.9%$' <<<"$out"; then
  ok "report.py: images/s as totals divide (32.0, not the mean of the intervals' rates), per run of a resumed file"
else not_ok "report.py throughput from totals (rc=$rc)"; echo "$out" | diag; fi
exit 0
