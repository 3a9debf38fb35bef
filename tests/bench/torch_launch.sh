#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# torch_launch.sh [REPS]: what the plugin's rank contract costs or saves a PyTorch job: median wall
# time of `srun -N2 --ntasks-per-node=2 --dl-train=gpus=none python -c 'init_process_group("gloo");
# barrier()'` against plain srun of the same program behind the usual hand-written snippet
# (MASTER_ADDR from `scontrol show hostnames | head -1` resolved by Slurm, a fixed MASTER_PORT,
# RANK/WORLD_SIZE/LOCAL_RANK from SLURM_*), interleaved, and the ratio. Starts its own local
# cluster unless SLURM_CONF is set. Needs DLT_TORCH_PYTHON with torch.
set -euo pipefail
REPS=${1:-11}
PY=${DLT_TORCH_PYTHON:-/opt/torchvenv/bin/python}
HERE=$(cd "$(dirname "$0")" && pwd)
if [[ -z ${SLURM_CONF:-} ]]; then
  export DLT_CLUSTER_NODES=2 DLT_CLUSTER_DIR=/tmp/dltrain-torchlaunch-$$ DLT_CLUSTER_PORT=19600
  trap 'bash "$HERE/../slurm/cluster.sh" down >/dev/null 2>&1; rm -rf "$DLT_CLUSTER_DIR"' EXIT
  bash "$HERE/../slurm/cluster.sh" up
  eval "$(bash "$HERE/../slurm/cluster.sh" env)"
fi
export GLOO_SOCKET_IFNAME=lo
cd /tmp
PROG='import torch.distributed as d; d.init_process_group("gloo"); d.barrier(); d.destroy_process_group()'
# The snippet users paste today: the first node's address as Slurm has it, a fixed port.
first=$(scontrol show hostnames "$(sinfo -h -o %N | head -1)" | head -1)
addr=$(scontrol show node "$first" | grep -o 'NodeAddr=[^ ]*' | cut -d= -f2)
SNIPPET="export MASTER_ADDR=$addr MASTER_PORT=29400 RANK=\$SLURM_PROCID WORLD_SIZE=\$SLURM_NTASKS LOCAL_RANK=\$SLURM_LOCALID; exec $PY -c '$PROG'"
t() { local s e; s=$(date +%s.%N); timeout 120 "$@" >/dev/null; e=$(date +%s.%N); awk -v a="$s" -v b="$e" 'BEGIN{printf "%.4f\n", b - a}'; }
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
DL=(srun --quiet -N2 --ntasks-per-node=2 --mpi=pmix --dl-train=gpus=none "$PY" -c "$PROG")
PLAIN=(srun --quiet -N2 --ntasks-per-node=2 --mpi=pmix bash -c "$SNIPPET")
t "${DL[@]}" >/dev/null; t "${PLAIN[@]}" >/dev/null # warm caches
dl=() plain=()
for _ in $(seq "$REPS"); do dl+=("$(t "${DL[@]}")"); plain+=("$(t "${PLAIN[@]}")"); done
md=$(printf '%s\n' "${dl[@]}" | median) mp=$(printf '%s\n' "${plain[@]}" | median)
echo "torch_launch: init_process_group + barrier, 2 nodes x 2 tasks, median of $REPS, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "torch_launch: srun --dl-train=gpus=none ${md} s; plain srun + hand-written snippet ${mp} s; ratio $(awk -v a="$md" -v b="$mp" 'BEGIN{printf "%.3f", a / b}')"
