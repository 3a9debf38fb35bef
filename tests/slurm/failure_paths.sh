#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Failure paths across ranks (2 nodes x 2 ranks): evaluation of a validation set smaller than one
# batch per rank (no SIGFPE: every image scored exactly once, the same top-1 as one rank), training
# with too little data refused on every rank with the fix, and a damaged checkpoint (eval, --resume
# auto) stopping every rank promptly with the cause instead of some ranks waiting for the others,
# a single rank's checkpoint resumed on 4 ranks (refused naming the rank count, or allowed by
# --resume-override ranks);
# a periodic checkpoint failing on rank 0 ending every rank at the next step with its words;
# a few seeded random damage runs (tests/local/random_damage.py) across the ranks.
. "$(dirname "$0")/lib.sh"
data_test_start 2 9 13
"$MK" folder "$WORK/ds" 2 2 40 40 plain # 4 train and 4 val images
"$MK" folder "$WORK/ds5" 1 5 40 40 plain; mkdir -p "$WORK/ds5/val/c01"; cp "$WORK"/ds/val/c01/img_0000.JPEG "$WORK/ds5/val/c01/" # 6 val, 2 classes
TINY=(--arch resnet18 --width 0.25 --image-size 32 --workers 1 --log-every 0 --classes 2)
SRUN=(srun --quiet -N2 --ntasks-per-node=2 --gpus-per-node=2 --mpi=pmix --dl-train)
"$DLTRAIN" train --synthetic "${TINY[@]}" --batch 4 --synthetic-size 16 --epochs 1 --checkpoint-dir "$WORK/ck" >/dev/null 2>&1
CK=$WORK/ck/ckpt-00000004.safetensors
[[ -f $CK ]] || echo "# no checkpoint written: $(ls "$WORK/ck" 2>&1)"

start=$SECONDS
out=$(timeout 120 "${SRUN[@]}" "$DLTRAIN" eval --data "$WORK/ds" "${TINY[@]}" --checkpoint "$CK" 2>&1); rc=$?
el=$((SECONDS - start))
one=$(timeout 60 "$DLTRAIN" eval --data "$WORK/ds" "${TINY[@]}" --checkpoint "$CK" 2>&1)
t4=$(sed -n 's/.*: 4 images, top-1 \([0-9.]*\),.*/\1/p' <<<"$out"); t1=$(sed -n 's/.*: 4 images, top-1 \([0-9.]*\),.*/\1/p' <<<"$one")
if ((rc == 0)) && [[ -n $t4 && $t4 == "$t1" && $out != *nan* && $out != *"Floating point"* ]]; then
  ok "eval of 4 images on 4 ranks with batch 32: 4 images scored, top-1 $t4 as on one rank, in ${el}s"
else not_ok "eval smaller than a batch per rank (rc=$rc, top-1 '$t4' vs '$t1')"; echo "$out" | tail -5 | diag; fi
out=$(timeout 120 "${SRUN[@]}" "$DLTRAIN" eval --data "$WORK/ds5" "${TINY[@]}" --batch 1 --checkpoint "$CK" 2>&1); rc=$?
one=$(timeout 60 "$DLTRAIN" eval --data "$WORK/ds5" "${TINY[@]}" --batch 4 --checkpoint "$CK" 2>&1)
t4=$(sed -n 's/.*: 6 images, top-1 \([0-9.]*\), top-5.*/\1/p' <<<"$out"); t1=$(sed -n 's/.*: 6 images, top-1 \([0-9.]*\), top-5.*/\1/p' <<<"$one")
if ((rc == 0)) && [[ -n $t4 && $t4 == "$t1" ]]; then ok "6 images over 4 ranks (2, 2, 1, 1): every image once, top-1 $t4 as one rank with batch 4"
else not_ok "uneven eval shares (rc=$rc, top-1 '$t4' vs '$t1')"; { echo "$out"; echo "$one"; } | tail -5 | diag; fi

start=$SECONDS
out=$(timeout 120 "${SRUN[@]}" "$DLTRAIN" train --data "$WORK/ds" "${TINY[@]}" --batch 2 --epochs 1 2>&1); rc=$?
el=$((SECONDS - start))
n=$(grep -c 'give no full batch of 2 on each of 4 rank(s)' <<<"$out")
if ((rc != 0 && rc != 124 && el < 60 && n >= 1)) && [[ $out == *"4 image(s) give no full batch of 2 on each of 4 rank(s) (8 needed): use --batch 1"* ]]; then
  ok "train on 4 images with batch 2 on 4 ranks: refused in ${el}s naming count, batch, ranks and --batch 1"
else not_ok "too little training data across ranks (rc=$rc, ${el}s)"; echo "$out" | tail -5 | diag; fi

cp -r "$WORK/ck" "$WORK/bad"
python3 - "$WORK/bad/ckpt-00000004.safetensors" <<'PY'
import sys
f = open(sys.argv[1], "r+b"); f.seek(-1024, 2); f.write(b"\x00" * 16)
PY
start=$SECONDS
out=$(timeout 120 "${SRUN[@]}" "$DLTRAIN" eval --synthetic "${TINY[@]}" --batch 4 --eval-size 64 --checkpoint "$WORK/bad/ckpt-00000004.safetensors" 2>&1); rc=$?
el=$((SECONDS - start))
if ((rc == 1 && el < 60)) && [[ $out == *"CRC-32"*"recorded"* && $out != *"top-1"* ]]; then ok "eval of a damaged model file on 4 ranks: every rank stops in ${el}s with the CRC mismatch, nothing scored"
else not_ok "damaged checkpoint, 4-rank eval (rc=$rc, ${el}s)"; echo "$out" | tail -5 | diag; fi
start=$SECONDS
out=$(timeout 120 "${SRUN[@]}" "$DLTRAIN" train --synthetic "${TINY[@]}" --batch 4 --synthetic-size 64 --epochs 1 --checkpoint-dir "$WORK/bad" --resume auto 2>&1); rc=$?
el=$((SECONDS - start))
if ((rc == 1 && el < 60)) && [[ $(grep -c "none is valid" <<<"$out") == 1 && $out == *"has 1 checkpoint(s) and none is valid"* && $out == *"ckpt-00000004.safetensors has CRC-32"* && $out != *"training resnet18"* ]]; then
  ok "--resume auto over a damaged checkpoint on 4 ranks: all stop in ${el}s, the file and why listed once"
else not_ok "--resume auto, damaged, 4 ranks (rc=$rc, ${el}s)"; echo "$out" | tail -5 | diag; fi
# A single rank's checkpoint resumed on 4 ranks: refused on every rank alike (status 2, said once)
# naming the rank count with both values; --resume-override ranks continues at the step that has
# seen the same images (global batch 4 -> 16).
out=$(timeout 120 "${SRUN[@]}" "$DLTRAIN" train --synthetic "${TINY[@]}" --batch 4 --synthetic-size 16 --epochs 2 --resume "$CK" 2>&1); rc=$?
if ((rc == 2)) && [[ $(grep -c "the rank count: checkpoint 1, now 4" <<<"$out") == 1 && $out != *"training resnet18"* && $out != *MPI_ABORT* ]]; then
  ok "a 1-rank checkpoint resumed on 4 ranks: every rank exits 2, the rank count named once with both values"
else not_ok "resume on another rank count (rc=$rc)"; echo "$out" | tail -6 | diag; fi
out=$(timeout 120 "${SRUN[@]}" "$DLTRAIN" train --synthetic "${TINY[@]}" --batch 4 --synthetic-size 16 --epochs 2 --resume "$CK" --resume-override ranks --checkpoint-dir "$WORK/ck4" 2>&1); rc=$?
if ((rc == 0)) && [[ $out == *"the rank count 1 -> 4"* && $out == *"step 4 of the checkpoint (16 images) continues as step 1"* && -f $WORK/ck4/ckpt-00000002.safetensors ]] &&
  "$DLTRAIN" info --checkpoint "$WORK/ck4/ckpt-00000002.safetensors" --verify | grep -q "changed on resume: step 4: the rank count 1 -> 4"; then
  ok "--resume-override ranks: the change said and recorded, the step follows the global batch"
else not_ok "resume with --resume-override ranks (rc=$rc)"; echo "$out" | tail -6 | diag; fi
# And back to 2 ranks: the 4-rank checkpoint's step 2 (global batch 16, 32 images) continues as
# step 4 of global batch 8: the old rank count counts, not only the batch.
out=$(timeout 120 srun --quiet -N2 --ntasks-per-node=1 --gpus-per-node=1 --mpi=pmix --dl-train "$DLTRAIN" train --synthetic "${TINY[@]}" \
  --batch 4 --synthetic-size 16 --epochs 3 --resume "$WORK/ck4/ckpt-00000002.safetensors" --resume-override ranks 2>&1); rc=$?
if ((rc == 0)) && [[ $out == *"the rank count 4 -> 2"* && $out == *"global batch 16 -> 8: step 2 of the checkpoint (32 images) continues as step 4"* ]]; then
  ok "4 ranks resumed on 2: step 2 of global batch 16 continues as step 4 of global batch 8"
else not_ok "resume from 4 ranks on 2 (rc=$rc)"; echo "$out" | tail -6 | diag; fi
# The gradient all-reduce is a mean: one step on 2 ranks of batch 8 moves the weights as far as one
# step on 1 rank of batch 16 over the same 16 images (rank r takes images r, r+2, ... of the shuffled
# order; the learning rate follows the global batch, 16 in both), from the same weights (--init):
# a ratio near 1 (1.2 here: per-rank batch-norm statistics move it); a sum would make it twice that.
"$DLTRAIN" train --synthetic "${TINY[@]}" --batch 8 --synthetic-size 64 --steps 1 --checkpoint-dir "$WORK/w0" >/dev/null 2>&1
ONE=(train --synthetic "${TINY[@]}" --synthetic-size 64 --steps 1 --wd 0 --warmup-epochs 0 --init "$WORK/w0/ckpt-00000001.safetensors")
"$DLTRAIN" "${ONE[@]}" --batch 16 --checkpoint-dir "$WORK/u1" >"$WORK/u1.out" 2>&1; rc1=$?
timeout 120 srun --quiet -N2 --ntasks-per-node=1 --gpus-per-node=1 --mpi=pmix --dl-train "$DLTRAIN" "${ONE[@]}" --batch 8 \
  --checkpoint-dir "$WORK/u2" >"$WORK/u2.out" 2>&1; rc2=$?
ratio=$(python3 - "$WORK/w0/ckpt-00000001.safetensors" "$WORK/u1/ckpt-00000001.safetensors" "$WORK/u2/ckpt-00000001.safetensors" <<'PYEOF'
import json, math, struct, sys
def load(p):
    b = open(p, 'rb').read()
    n = struct.unpack('<Q', b[:8])[0]
    h = json.loads(b[8:8 + n])
    out = {}
    for k, v in h.items():
        if k == '__metadata__' or v['dtype'] != 'F32' or 'running' in k:
            continue
        s, e = v['data_offsets']
        out[k] = struct.unpack('<%df' % ((e - s) // 4), b[8 + n + s:8 + n + e])
    return out
w0, a, b = (load(p) for p in sys.argv[1:4])
da = math.sqrt(sum((x - y) ** 2 for k in w0 for x, y in zip(a[k], w0[k])))
db = math.sqrt(sum((x - y) ** 2 for k in w0 for x, y in zip(b[k], w0[k])))
print('%.3f' % (db / da if da > 0 else float('nan')))
PYEOF
)
if ((rc1 == 0 && rc2 == 0)) && awk -v r="$ratio" 'BEGIN { exit !(r > 0.7 && r < 1.7) }'; then
  ok "one step on 2 ranks of batch 8 moves the weights ${ratio}x as far as one on 1 rank of batch 16 (the mean gradient; a sum gives 2x)"
else not_ok "2-rank step against the 1-rank step (rc $rc1/$rc2, ratio ${ratio:-?})"; tail -3 "$WORK/u2.out" | diag; fi
# A periodic checkpoint that fails on rank 0 (its folder full: a 64 KiB tmpfs), the one rank that
# writes: the next step stops every rank together, and all end with rank 0's words (status 1), none
# left in a collective for a rank that left.
mkdir -p "$WORK/full"
if mount -t tmpfs -o size=64k tmpfs "$WORK/full" 2>/dev/null; then
  start=$SECONDS
  out=$(timeout 120 "${SRUN[@]}" "$DLTRAIN" train --synthetic "${TINY[@]}" --batch 4 --synthetic-size 64 --epochs 2 \
    --checkpoint-every 2 --checkpoint-dir "$WORK/full" 2>&1); rc=$?
  el=$((SECONDS - start))
  umount "$WORK/full"
  if ((rc == 1 && el < 60)) && [[ $out == *"checkpoint at step 2 FAILED"*"; every rank stops after the next step"* &&
    $out == *"step 3: every rank stops, the last checkpoint having failed"* && $out != *"step 4/"* ]]; then
    ok "a periodic checkpoint failing on rank 0 (a full folder): every rank stops at the next step in ${el}s with its words"
  else not_ok "failed periodic checkpoint on 4 ranks (rc=$rc, ${el}s)"; echo "$out" | grep -v '^step' | tail -8 | diag; fi
else ok "# SKIP cannot mount a tmpfs here"; fi
# A --checkpoint-dir that is not one folder for every node (here each node is given its own, as a
# node-local /tmp would be): refused before training, every rank alike, since a job requeued onto
# other nodes would find nothing there and start over.
out=$(WORK_CK=$WORK/nodeck timeout 120 "${SRUN[@]}" bash -c 'exec "$0" train --synthetic "$@" --checkpoint-dir "$WORK_CK-$SLURMD_NODENAME"' \
  "$DLTRAIN" "${TINY[@]}" --batch 4 --synthetic-size 16 --epochs 1 2>&1 < /dev/null); rc=$?
if ((rc == 2)) && [[ $out == *"on node n2, --checkpoint-dir $WORK/nodeck-n2 does not hold the file rank 0 just made there"* &&
      $out == *"2 rank(s) do not see what rank 0 writes in --checkpoint-dir $WORK/nodeck-n1: it must be one directory that every node shares"* &&
      $out != *"training resnet18"* ]]; then
  ok "a --checkpoint-dir of one node only: every rank refuses before training, naming the ranks' node and the fix"
else not_ok "node-local checkpoint directory (rc=$rc)"; echo "$out" | tail -8 | diag; fi
# A few random damage runs across the 4 ranks (the single-rank test runs hundreds; --strict is left
# out: a rank stopped by --strict still leaves its peers to the stall watchdog).
res=$(timeout 300 python3 "$DLT_SRCDIR/tests/local/random_damage.py" --dltrain "$DLTRAIN" --mkjpegs "$MK" --work "$WORK/random" \
  --seed "${DLT_RANDOM_SEED:-2}" --runs 16 --seconds 120 --no-strict --srun "${SRUN[*]}" 2>&1); rc=$?
line=$(grep '^RESULT' <<<"$res")
if ((rc == 0)) && [[ $line == *" violations=0 "* ]]; then ok "random damage on 4 ranks: ${line#RESULT }"
else not_ok "random damage on 4 ranks (rc=$rc)"; grep '^# ' <<<"$res" | head -40 | diag; fi
sleep 1
check "every node idle afterwards" bash -c '[[ $(sinfo -h -N -o "%t" | sort -u) == idle ]]'
exit 0
