#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Synchronous data-parallel training across two slurmd with srun --mpi=pmix --dl-train (CPU
# backend, MPI all-reduce): the loss falls, the ranks' weights stay identical (checked every 4
# steps by the trainer), and a run preempted with SIGUSR1 checkpoints, exits with status 75, and
# resumed with --resume auto ends with the same weights, byte for byte, as an uninterrupted run;
# a SIGUSR1 that reaches one rank during start-up stops every rank before the first step, status 75;
# a job suspended (scontrol suspend) for longer than --stall-timeout goes on when resumed; the
# gradient buckets (summed while backward goes on) change no bit of the result at two ranks.
. "$(dirname "$0")/lib.sh"
cluster_up 2 4
tap_plan 9
DLTRAIN=$DLT_BUILDDIR/trainer/dltrain
cd /tmp
rm -rf "$WORK/a" "$WORK/b" "$WORK"/*.jsonl "$WORK/b.out" "$WORK/b.rc"
RUN=(--synthetic --arch resnet18 --width 0.25 --image-size 32 --classes 4 --batch 8 --synthetic-size 512 --epochs 4
     --steps 48 --warmup-epochs 0 --lr 0.8 --label-smoothing 0 --seed 5 --log-every 4 --check-every 4)
SRUN=(srun --quiet -N2 --ntasks-per-node=2 --gpus-per-node=2 --mpi=pmix --dl-train)

out=$(timeout 300 "${SRUN[@]}" "$DLTRAIN" train "${RUN[@]}" --checkpoint-dir "$WORK/a" --metrics "$WORK/a.jsonl" 2>&1); rc=$?
first=$(grep '"images_per_s"' "$WORK/a.jsonl" 2>/dev/null | head -1 | sed -n 's/.*"loss":\([0-9.]*\).*/\1/p'); last=$(grep '"images_per_s"' "$WORK/a.jsonl" 2>/dev/null | tail -1 | sed -n 's/.*"loss":\([0-9.]*\).*/\1/p')
# The linear scaling rule (Goyal et al.): peak lr = --lr x global batch / 256 = 0.8 x 8 x 4 / 256.
peak=$(awk 'BEGIN { printf "%.4g", 0.8 * 8 * 4 / 256 }')
if ((rc == 0)) && [[ $out == *"on 4 rank(s), batch 8 x 4 = 32"* && $out == *"peak lr $peak,"* ]] && awk -v a="$first" -v b="$last" 'BEGIN{exit !(b < a / 3)}'; then
  ok "2 nodes x 2 ranks train synchronously (peak lr $peak: --lr x the global batch / 256): loss $first -> $last"
else not_ok "multi-node training (rc=$rc)"; echo "$out" | tail -8 | diag; fi
if ((rc == 0)) && ! grep -q 'weights differ' <<<"$out" && [[ $(grep -c '"ranks":4' "$WORK/a.jsonl") -ge 12 ]]; then ok "weights identical on every rank at each of the 12 checks"; else not_ok "replica checks"; fi
if [[ $(grep -o '"images_per_s":[0-9.]*' "$WORK/a.jsonl" | wc -l) -ge 12 && $(grep -c '"allreduce":' "$WORK/a.jsonl") -ge 12 ]]; then ok "metrics: global images/s and all-reduce share per interval"; else not_ok "metrics"; fi

# Preemption: USR1 mid-run.
( timeout 300 "${SRUN[@]}" "$DLTRAIN" train "${RUN[@]}" --checkpoint-dir "$WORK/b" --metrics "$WORK/b.jsonl" > "$WORK/b.out" 2>&1; echo $? > "$WORK/b.rc" ) &
for _ in $(seq 300); do grep -q '"step":8,' "$WORK/b.jsonl" 2>/dev/null && break; sleep 0.1; done
job=$(squeue -h -o %i | head -1)
[[ -n $job ]] || echo "# no running job found to signal"
scancel --signal=USR1 "$job"
wait
rc=$(cat "$WORK/b.rc")
stopped=$(sed -n 's/.*stop requested (signal) at step \([0-9]*\).*/\1/p' "$WORK/b.out")
if [[ $rc == 75 && -n $stopped && $stopped -lt 48 && -f $WORK/b/ckpt-$(printf %08d "$stopped").safetensors ]]; then ok "SIGUSR1 at step ~8: every rank stops at step $stopped, rank 0 checkpoints, exit status 75"; else not_ok "preemption (rc=$rc, stopped=$stopped)"; tail -5 "$WORK/b.out" | diag; fi
out=$(timeout 300 "${SRUN[@]}" "$DLTRAIN" train "${RUN[@]}" --checkpoint-dir "$WORK/b" --resume auto 2>&1); rc=$?
if ((rc == 0)) && [[ $out == *"resumed from $WORK/b/ckpt-"* ]]; then ok "--resume auto continues from the preemption checkpoint"; else not_ok "resume after preemption (rc=$rc)"; echo "$out" | tail -5 | diag; fi
if cmp -s "$WORK/a/ckpt-00000048.safetensors" "$WORK/b/ckpt-00000048.safetensors"; then ok "preempted + resumed run ends with the uninterrupted run's weights, byte for byte"; else not_ok "final weights differ after resume"; fi
# A stop during start-up that reaches one rank only (ResNet-50's start-up at 4 ranks takes seconds
# here): the ranks agree on it before the first step and all exit 75, nothing written. The signal
# goes to rank 2 once every rank shows its handler installed (/proc/PID/status SigCgt).
rm -rf "$WORK/c"
( timeout 300 "${SRUN[@]}" "$DLTRAIN" train --batch 2 --steps 3 --synthetic-size 64 --checkpoint-dir "$WORK/c" > "$WORK/c.out" 2>&1; echo $? > "$WORK/c.rc" ) &
target=
for _ in $(seq 600); do
  pids=$(pgrep -f "checkpoint-dir $WORK/c\$" | while read -r p; do grep -q '^SLURM_PROCID=' /proc/$p/environ 2>/dev/null && echo "$p"; done)
  n=0
  for p in $pids; do
    c=$(awk '/^SigCgt:/ {print $2}' /proc/$p/status 2>/dev/null)
    [[ -n $c ]] && (((16#$c >> 9) & 1)) && n=$((n + 1))
    tr '\0' '\n' </proc/$p/environ 2>/dev/null | grep -qx 'SLURM_PROCID=2' && target=$p
  done
  ((n == 4)) && [[ -n $target ]] && break
  sleep 0.05
done
kill -USR1 "$target" 2>/dev/null
wait
rc=$(cat "$WORK/c.rc")
if [[ $rc == 75 && $(grep -c 'stop requested (signal) during start-up, before the first step' "$WORK/c.out") == 1 ]] &&
   ! grep -q 'step 1/' "$WORK/c.out" && [[ -z $(ls "$WORK/c"/ckpt-* 2>/dev/null) ]]; then
  ok "SIGUSR1 to rank 2 alone during start-up: every rank stops before the first step, exit 75, nothing written"
else not_ok "stop during start-up on one rank (rc=$rc, target pid ${target:-none})"; tail -5 "$WORK/c.out" | diag; fi
# scontrol suspend for 25 s with --stall-timeout 8: every rank was stopped, none counts it.
rm -rf "$WORK/d"
( timeout 300 "${SRUN[@]}" "$DLTRAIN" train "${RUN[@]}" --steps 400 --epochs 1000 --stall-timeout 8 --metrics "$WORK/d.jsonl" \
    > "$WORK/d.out" 2>&1; echo $? > "$WORK/d.rc" ) &
for _ in $(seq 600); do grep -q '"step":8,' "$WORK/d.jsonl" 2>/dev/null && break; sleep 0.1; done
job=$(squeue -h -o %i | head -1)
scontrol suspend "$job"; sleep 25; scontrol resume "$job"
wait
rc=$(cat "$WORK/d.rc")
if [[ $rc == 0 ]] && grep -q 'done: 400 steps' "$WORK/d.out" && grep -q 'did not run for [0-9]* s (stopped or suspended)' "$WORK/d.out" &&
   ! grep -q 'watchdog: rank' "$WORK/d.out"; then
  ok "suspended 25 s with --stall-timeout 8: resumed, every rank goes on to the end"
else not_ok "job suspend (rc=$rc)"; grep -v 'step [0-9]*/' "$WORK/d.out" | tail -5 | diag; fi

# Buckets at two ranks: each gradient is a + b whatever the bucket it crosses in, so the default
# buckets, 43 buckets of 64 KiB with many in flight at once, and one bucket summed after backward
# (no overlap) end with the same weights, byte for byte.
rm -rf "$WORK"/e-*
bad=""
for m in default small one; do
  case $m in
    default) opt=() ;;
    small) opt=(--bucket-mib 0.0625 --bottom-bucket-mib 0.0625) ;;
    one) opt=(--bucket-mib 4096 --bottom-bucket-mib 4096) ;;
  esac
  out=$(timeout 300 srun --quiet -N2 -n2 --mpi=pmix --dl-train=gpus=none "$DLTRAIN" train "${RUN[@]}" --steps 12 --log-every 0 \
        --checkpoint-dir "$WORK/e-$m" "${opt[@]}" 2>&1) || bad+=" [$m: $(tail -2 <<<"$out")]"
done
if [[ -z $bad ]] && cmp -s "$WORK/e-default/ckpt-00000012.safetensors" "$WORK/e-small/ckpt-00000012.safetensors" &&
   cmp -s "$WORK/e-default/ckpt-00000012.safetensors" "$WORK/e-one/ckpt-00000012.safetensors"; then
  ok "2 ranks, 12 steps: the default buckets, 64 KiB buckets and one bucket after backward end with the same weights, byte for byte"
else not_ok "bucketing changed the result at two ranks$bad"; fi
exit 0
