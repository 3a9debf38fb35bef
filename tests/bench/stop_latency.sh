#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# stop_latency.sh: seconds from a stop signal (scancel --signal=USR1, as Slurm's --signal=USR1@T
# sends it) to the step's end with its checkpoint written, during training and during validation,
# at 1 and 4 ranks (CPU backend, ResNet-18 at 32x32, a validation of 2048 generated images), with
# one training step's time beside it for scale. Starts its own local cluster unless SLURM_CONF is set.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
DLTRAIN=${DLTRAIN:-$HERE/../../trainer/dltrain}
if [[ -z ${SLURM_CONF:-} ]]; then
  export DLT_CLUSTER_NODES=2 DLT_CLUSTER_DIR=/tmp/dltrain-stoplat-$$ DLT_CLUSTER_PORT=19700
  trap 'bash "$HERE/../slurm/cluster.sh" down >/dev/null 2>&1; rm -rf "$DLT_CLUSTER_DIR"' EXIT
  bash "$HERE/../slurm/cluster.sh" up >/dev/null
  eval "$(bash "$HERE/../slurm/cluster.sh" env)"
fi
W=$(mktemp -d /tmp/dltrain-stoplat.XXXXXX)
cd /tmp
echo "stop_latency: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"
for ranks in 1 4; do
  for when in training validation; do
    case $ranks in 1) L=(-N1 -n1) ;; *) L=(-N2 --ntasks-per-node=2) ;; esac
    rm -rf "$W/ck" "$W/m.jsonl"
    srun --quiet "${L[@]}" --gpus-per-node=1 --mpi=pmix --dl-train "$DLTRAIN" train --arch resnet18 --width 0.25 \
      --image-size 32 --classes 4 --warmup-epochs 0 --log-every 1 --batch 8 --synthetic-size $((64 * ranks)) \
      --epochs 100 --eval-every 1 --eval-size 2048 --checkpoint-dir "$W/ck" --metrics "$W/m.jsonl" >"$W/out" 2>&1 &
    pid=$!
    # training: a signal at step 3; validation: one second into the first validation (after step 8).
    at=3; [[ $when == validation ]] && at=8
    for _ in $(seq 1200); do grep -q "\"step\":$at," "$W/m.jsonl" 2>/dev/null && break; sleep 0.05; done
    [[ $when == validation ]] && sleep 1
    job=$(squeue -h -o %i | head -1)
    t0=$(date +%s.%N); scancel --signal=USR1 "$job"
    for _ in $(seq 2400); do ls "$W"/ck/ckpt-*.state.safetensors >/dev/null 2>&1 && break; sleep 0.02; done
    t1=$(date +%s.%N)
    wait "$pid"; rc=$?
    step=$(python3 -c 'import json,sys; v=[json.loads(l) for l in open(sys.argv[1]) if "\"step\":" in l]; t=[b["time"]-a["time"] for a,b in zip(v,v[1:]) if b["step"]==a["step"]+1]; print("%.3f" % sorted(t)[len(t)//2] if t else "-")' "$W/m.jsonl")
    printf 'stop_latency: %d rank(s), signal during %-10s -> checkpoint written %.2f s later (exit %d; one training step %s s)\n' \
      "$ranks" "$when" "$(awk -v a="$t0" -v b="$t1" 'BEGIN{print b - a}')" "$rc" "$step"
  done
done
rm -rf "$W"
