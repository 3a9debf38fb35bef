#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# launch_overhead.sh [REPS]: what --dl-train adds to step launch: median wall time of
# `srun -N2 -n8 --gpus-per-node=4 true` with and without --dl-train (interleaved), and the ratio.
# Starts its own local cluster unless SLURM_CONF is set.
set -euo pipefail
REPS=${1:-21}
HERE=$(cd "$(dirname "$0")" && pwd)
if [[ -z ${SLURM_CONF:-} ]]; then
  export DLT_CLUSTER_NODES=2 DLT_CLUSTER_DIR=/tmp/dltrain-launch-$$ DLT_CLUSTER_PORT=18800
  trap 'bash "$HERE/../slurm/cluster.sh" down >/dev/null 2>&1; rm -rf "$DLT_CLUSTER_DIR"' EXIT
  bash "$HERE/../slurm/cluster.sh" up
  eval "$(bash "$HERE/../slurm/cluster.sh" env)"
fi
cd /tmp
t() { local s e; s=$(date +%s.%N); timeout 60 srun -N2 -n8 --gpus-per-node=4 "$@" true; e=$(date +%s.%N); awk -v a="$s" -v b="$e" 'BEGIN{printf "%.6f\n", b - a}'; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
t >/dev/null; t --dl-train >/dev/null   # warm caches
plain=(); dl=()
for _ in $(seq "$REPS"); do plain+=("$(t)"); dl+=("$(t --dl-train)"); done
mp=$(printf '%s\n' "${plain[@]}" | median); md=$(printf '%s\n' "${dl[@]}" | median)
printf 'srun -N2 -n8 true, median of %d: plain %.4f s, --dl-train %.4f s, ratio %.3f\n' "$REPS" "$mp" "$md" "$(awk -v a="$md" -v b="$mp" 'BEGIN{print a / b}')"
