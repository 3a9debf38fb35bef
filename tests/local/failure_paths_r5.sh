#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Failure paths on one rank, round 5: non-finite logits scored as misses and counted (eval,
# validation, the metrics, no target reached on them), a damaged newest checkpoint named before an
# older one is taken, files named like checkpoints that are FIFOs or devices never opened for
# reading, a stop signal ending a start-up blocked in the kernel, the stall watchdog and the
# time-to-target on the monotonic clock when the wall clock is off (an LD_PRELOAD shim shifts it),
# a rollback keeping the abandoned line's checkpoint of a step it saves again, and the divergence
# stop saying whether a checkpoint exists.
. "$(dirname "$0")/../slurm/lib.sh"
local_test_start 13
SYN=(--synthetic --arch resnet18 --width 0.25 --image-size 32 --classes 4 --batch 8 --synthetic-size 64 --log-every 0 --warmup-epochs 0)
run() { local -n _o=$1 _r=$2; shift 2; _o=$(timeout -k 5 60 "$@" 2>&1); _r=$?; }
cd "$WORK" || exit 1

# ---- 1: a model whose fc.weight is NaN scores 0, not 1, and says how many logits were not finite
"$DLTRAIN" train "${SYN[@]}" --steps 2 --checkpoint-dir "$WORK/ck" >/dev/null 2>&1
python3 - "$WORK/ck/ckpt-00000002.safetensors" "$WORK/nan.safetensors" <<'EOF'
import json, struct, sys
b = bytearray(open(sys.argv[1], 'rb').read())
n = struct.unpack('<Q', b[:8])[0]
s, e = json.loads(b[8:8 + n])['fc.weight']['data_offsets']
for i in range(8 + n + s, 8 + n + e, 4):
    b[i:i + 4] = struct.pack('<f', float('nan'))
open(sys.argv[2], 'wb').write(b)
EOF
run out rc "$DLTRAIN" eval --synthetic --arch resnet18 --width 0.25 --image-size 32 --classes 4 --eval-size 64 --checkpoint "$WORK/nan.safetensors"
if ((rc == 0)) && [[ $out == *": 64 images, top-1 0.0000, top-5 0.0000"* && $out == *"64 of the 64 images gave logits that are not finite"* ]]; then
  ok "eval of a NaN classifier: top-1 0.0000 and top-5 0.0000 (not 1.0), and 64 of 64 non-finite said"
else not_ok "eval of a NaN classifier (rc=$rc)"; echo "$out" | tail -4 | diag; fi

# ---- 2: a diverging run: validation scores its NaN logits as misses, never reaches a target
run out rc "$DLTRAIN" train "${SYN[@]}" --eval-size 16 --lr 1e9 --momentum 0.99 --eval-every 1 --target-top1 0.9 \
  --metrics "$WORK/m.jsonl" --epochs 3 --checkpoint-dir "$WORK/div"
ev=$(grep '"key":"eval_accuracy"' "$WORK/m.jsonl" 2>/dev/null | head -1)
if ((rc == 1)) && [[ $out == *"epoch 1 val top-1 0.0000"* && $out == *"16 of the 16 images gave logits that are not finite"* &&
  $out != *"target top-1 0.9000 reached"* && $ev == *'"value":0.000000'*'"val_nonfinite":16'* &&
  $out == *"no checkpoint was written (none before the loss went bad)"* && $out != *"intact"* ]]; then
  ok "--lr 1e9: val top-1 0.0000 with 16 non-finite (metrics val_nonfinite 16), no target reached, the stop says no checkpoint exists"
else not_ok "diverging run's validation (rc=$rc)"; { echo "$out" | grep -v ' step '; echo "$ev"; } | tail -8 | diag; fi

# ---- 3: a truncated newest state file is named before the older checkpoint is taken
"$DLTRAIN" train "${SYN[@]}" --steps 32 --checkpoint-every 16 --checkpoint-dir "$WORK/tr" >/dev/null 2>&1
truncate -s 4 "$WORK/tr/ckpt-00000032.state.safetensors"
run out rc "$DLTRAIN" train "${SYN[@]}" --steps 40 --checkpoint-dir "$WORK/tr" --resume auto
if ((rc == 0)) && [[ $out == *"skipping checkpoint $WORK/tr/ckpt-00000032.safetensors: "*"too short"* &&
  $out == *"resumed from $WORK/tr/ckpt-00000016.safetensors"* && $out == *"start a new line"* ]]; then
  ok "a 4-byte newest state file: 'skipping checkpoint ...32 ... too short', resumed from 16 on a new line"
else not_ok "damaged newest checkpoint (rc=$rc)"; echo "$out" | head -5 | diag; fi

# ---- 4: a rollback keeps the abandoned line's checkpoint of a step the new line saves again
"$DLTRAIN" train "${SYN[@]}" --steps 32 --checkpoint-every 16 --checkpoint-dir "$WORK/rb" >/dev/null 2>&1
sum=$(md5sum <"$WORK/rb/ckpt-00000032.safetensors")
run out rc "$DLTRAIN" train "${SYN[@]}" --steps 40 --checkpoint-every 16 --checkpoint-dir "$WORK/rb" \
  --resume "$WORK/rb/ckpt-00000016.safetensors" --resume-override lr --lr 0.05
run out2 rc2 "$DLTRAIN" eval --synthetic --eval-size 8 --checkpoint "$WORK/rb/ckpt-00000032.line1.safetensors"
if ((rc == 0 && rc2 == 0)) && [[ $(md5sum <"$WORK/rb/ckpt-00000032.line1.safetensors") == "$sum" &&
  -s $WORK/rb/ckpt-00000032.line1.state.safetensors && $out == *"kept under another name, not overwritten"* && $out2 == *"verified against"* ]]; then
  ok "rollback to 16 saving 32 again: line 1's ckpt-32 kept as ckpt-00000032.line1.safetensors (same bytes, verifies), said"
else not_ok "rollback over an abandoned checkpoint (rc=$rc/$rc2)"; { echo "$out" | grep -v ' step '; echo "$out2"; ls "$WORK/rb"; } | tail -8 | diag; fi

# ---- 4b: --resume auto names the abandoned line's higher checkpoint it passes over
"$DLTRAIN" train "${SYN[@]}" --steps 32 --checkpoint-every 16 --checkpoint-dir "$WORK/rb2" >/dev/null 2>&1
"$DLTRAIN" train "${SYN[@]}" --steps 24 --checkpoint-every 8 --checkpoint-dir "$WORK/rb2" --resume "$WORK/rb2/ckpt-00000016.safetensors" >/dev/null 2>&1
run out rc "$DLTRAIN" train "${SYN[@]}" --steps 28 --checkpoint-dir "$WORK/rb2" --resume auto
if ((rc == 0)) && [[ $out == *"passing over checkpoint $WORK/rb2/ckpt-00000032.safetensors, of line 1, which a rollback left (--resume auto follows line 2)"* &&
  $out == *"resumed from $WORK/rb2/ckpt-00000024.safetensors"* ]]; then
  ok "--resume auto after a rollback: resumes line 2's step 24 and names line 1's step 32 it passes over"
else not_ok "passing over an abandoned line (rc=$rc)"; echo "$out" | head -4 | diag; fi

# ---- 5: a FIFO and links to devices named like checkpoints: named and skipped, nothing blocks
mkfifo "$WORK/tr/ckpt-00000200.state.safetensors"; touch "$WORK/tr/ckpt-00000200.safetensors"
ln -s /dev/zero "$WORK/tr/ckpt-00000300.safetensors"; ln -s /dev/urandom "$WORK/tr/ckpt-00000300.state.safetensors"
t0=$SECONDS
run out rc "$DLTRAIN" train "${SYN[@]}" --steps 48 --stall-timeout 5 --checkpoint-dir "$WORK/tr" --resume auto
if ((rc == 0 && SECONDS - t0 < 30)) && [[ $out == *"ckpt-00000300.state.safetensors: a character device, not a regular file"* &&
  $out == *"ckpt-00000200.state.safetensors: a FIFO, not a regular file"* && $out == *"resumed from $WORK/tr/ckpt-00000040.safetensors"* ]]; then
  ok "a FIFO and /dev/zero, /dev/urandom links named like checkpoints: each named and skipped, resumed from 40 in $((SECONDS - t0)) s"
else not_ok "non-regular checkpoint files (rc=$rc, $((SECONDS - t0)) s)"; echo "$out" | head -5 | diag; fi

# ---- 6: SIGTERM while start-up is blocked in the kernel (a FIFO's open that signals do not end,
# as on a hard NFS mount): the process ends --stall-timeout (5 s) later, saying the stage, status 75
if have_test_hooks; then
  mkfifo "$WORK/block"
  DLT_TEST_BLOCK_IN_SCAN=$WORK/block timeout -k 5 60 "$DLTRAIN" train "${SYN[@]}" --steps 48 --stall-timeout 5 --checkpoint-dir "$WORK/tr" --resume auto >"$WORK/blk.out" 2>&1 &
  for _ in $(seq 100); do pid=$(pgrep -f "^[^ ]*/dltrain train --synthetic .*--stall-timeout 5 --checkpoint-dir $WORK/tr --resume auto"); [[ -n $pid ]] && break; sleep 0.1; done
  sleep 1
  t0=$(date +%s.%N); kill -TERM "$pid" 2>/dev/null; wait $!; rc=$?; t=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  out=$(cat "$WORK/blk.out")
  if ((rc == 75)) && awk -v t="$t" 'BEGIN { exit !(t < 8) }' && [[ $out == *"SIGTERM came 5 s ago, during start-up (reading the checkpoints of --checkpoint-dir $WORK/tr), which has not reached a point where it can stop: ending now"* ]]; then
    ok "SIGTERM with start-up blocked reading the checkpoint folder: ended after $t s (--stall-timeout 5), naming the stage, status 75"
  else not_ok "SIGTERM in a blocked start-up (rc=$rc, $t s)"; echo "$out" | tail -3 | diag; fi
else ok "$NO_HOOKS: DLT_TEST_BLOCK_IN_SCAN"; fi

# ---- 7-8: the wall clock off by a day or stepped: an LD_PRELOAD shim shifts CLOCK_REALTIME
if [[ ${DLT_SANITIZED:-} ]]; then
  ok "# SKIP sanitizer build: the clock shim cannot be preloaded before the ASan runtime"
  ok "# SKIP sanitizer build: the clock shim cannot be preloaded before the ASan runtime"
elif ! ${CC:-cc} -shared -fPIC -o "$WORK/clock_shim.so" "$DLT_SRCDIR/tests/local/clock_shim.c" -ldl 2>"$WORK/cc.err"; then
  not_ok "building the clock shim"; diag <"$WORK/cc.err"; not_ok "building the clock shim"
else
  SHIM=$WORK/clock_shim.so
  # The watchdog waits on the monotonic clock: a wall clock 10 minutes ahead does not stretch its tick.
  if have_test_hooks; then
    t0=$SECONDS
    run out rc env LD_PRELOAD="$SHIM" DLT_SHIM_REALTIME_OFFSET=600 DLT_TEST_STALL=compute:3:20 "$DLTRAIN" train "${SYN[@]}" --steps 6 --stall-timeout 2
    if ((rc == 86 && SECONDS - t0 < 15)) && [[ $out == *"stuck in forward/backward for 2 s at step 3"* ]]; then
      ok "wall clock 600 s off: a 20 s stall is caught by --stall-timeout 2 (exit 86 in $((SECONDS - t0)) s)"
    else not_ok "watchdog with the wall clock off (rc=$rc, $((SECONDS - t0)) s)"; echo "$out" | tail -3 | diag; fi
  else ok "$NO_HOOKS: DLT_TEST_STALL"; fi
  # A checkpoint stamped by a node whose clock is a day ahead, resumed on this one.
  LD_PRELOAD=$SHIM DLT_SHIM_REALTIME_OFFSET=86400 "$DLTRAIN" train "${SYN[@]}" --steps 16 --checkpoint-dir "$WORK/skew" >/dev/null 2>&1
  run out rc "$DLTRAIN" train "${SYN[@]}" --steps 24 --eval-every 1 --eval-size 8 --target-top1 0.01 --checkpoint-dir "$WORK/skew" \
    --resume auto --metrics "$WORK/skew.jsonl"
  walls=$(grep -o '"train_time":[-0-9.]*,"wall_time":[-0-9.]*' "$WORK/skew.jsonl" | tr '\n' ' ')
  if ((rc == 0)) && [[ -n $walls && $walls != *":-"* && $out == *"s since the first start"* && $out != *"-86"* ]] &&
    python3 -c 'import sys, re
p = re.findall(r"train_time\":([-0-9.]+),\"wall_time\":([-0-9.]+)", sys.argv[1])
sys.exit(0 if p and all(float(w) >= float(t) >= 0 for t, w in p) else 1)' "$walls"; then
    ok "resumed on a node a day behind the first start's: wall_time >= train_time >= 0 ($walls)"
  else not_ok "time since the first start across skewed clocks (rc=$rc)"; { echo "$out" | grep -E 'target|first start'; echo "$walls"; } | diag; fi
fi

# ---- 9: a 10000x10000 PNG (330 KB) decoded by 2 workers over 2 epochs: the decode's buffer is
# given back after the image and not copied (the peak was 924 MB in one epoch)
python3 - "$WORK/big" <<'EOF'
import os, struct, sys, zlib
def png(path, w, h):
    raw = b''.join(b'\x00' + bytes([(y * 7) & 255, 80, 160]) * w for y in range(h))
    def chunk(t, d): return struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d) & 0xffffffff)
    open(path, 'wb').write(b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, 8, 2, 0, 0, 0)) +
                           chunk(b'IDAT', zlib.compress(raw, 9)) + chunk(b'IEND', b''))
for c in ('a', 'b'):
    os.makedirs(f'{sys.argv[1]}/train/{c}')
png(f'{sys.argv[1]}/train/a/big.png', 10000, 10000)
for i in range(8):
    for c in ('a', 'b'):
        if c == 'b' or i < 7:
            png(f'{sys.argv[1]}/train/{c}/s{i}.png', 40, 40)
EOF
if [[ ${DLT_SANITIZED:-} ]]; then
  ok "# SKIP sanitizer build: ASan's shadow memory and quarantine make the peak RSS another figure"
else
peak=$(python3 -c 'import resource, subprocess, sys
r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)' \
  "$DLTRAIN" train --data "$WORK/big" --arch resnet18 --width 0.25 --image-size 32 --batch 4 --workers 2 --epochs 2 --log-every 0 --eval-every 0)
if [[ ${peak% *} == 0 ]] && ((${peak#* } < 800)); then ok "a 100-Mpixel PNG, 2 workers, 2 epochs: peak RSS ${peak#* } MB (under 800; 924 MB in one epoch before)"
else not_ok "100-Mpixel PNG memory (rc and peak MB: $peak)"; fi
fi

# ---- 10-12: the docs say it
grep -q 'val_nonfinite' "$DLT_SRCDIR/man/dltrain.1" && grep -q 'val/nonfinite' "$DLT_SRCDIR/man/dltrain.1" &&
  grep -q 'val_nonfinite' "$DLT_SRCDIR/doc/training.md" && ok "dltrain(1) and doc/training.md name val_nonfinite and val/nonfinite" || not_ok "docs: val_nonfinite"
grep -q 'line\\fIL\\fB.safetensors' "$DLT_SRCDIR/man/dltrain.1" && ok "dltrain(1) says where a rollback keeps the abandoned checkpoint" || not_ok "docs: rollback keeps"
grep -q 'stall\\-timeout\\fR after the signal' "$DLT_SRCDIR/man/dltrain.1" && ok "dltrain(1) says a blocked start-up ends --stall-timeout after the signal" || not_ok "docs: blocked start-up"
exit $((TAP_FAILED > 0))
