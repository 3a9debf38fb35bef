#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bootstrap_bench.sh [REPS]: median bootstrap time (rank info + 128-byte id from rank 0 to all)
# through libdltpmix vs OpenMPI's MPI_Init + MPI_Bcast, at 2, 4 and 8 ranks over 2-4 nodes.
# Starts its own 4-node local cluster unless SLURM_CONF is already set.
set -euo pipefail
REPS=${1:-7}
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=${DLT_BUILDDIR:-$(cd "$HERE/../.." && pwd)}
BENCH=$BUILD/tests/bench/bootstrap_bench
[[ -x $BENCH ]] || { echo "build it first: make tests/bench/bootstrap_bench" >&2; exit 1; }
if [[ -z ${SLURM_CONF:-} ]]; then
  export DLT_CLUSTER_NODES=4 DLT_CLUSTER_DIR=/tmp/dltrain-bench-$$ DLT_CLUSTER_PORT=18700
  trap 'bash "$HERE/../slurm/cluster.sh" down >/dev/null 2>&1; rm -rf "$DLT_CLUSTER_DIR"' EXIT
  bash "$HERE/../slurm/cluster.sh" up
  eval "$(bash "$HERE/../slurm/cluster.sh" env)"
fi

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
run() {  # run NODES RANKS ARGS...: prints the median bootstrap_s over REPS runs
  local n=$1 r=$2; shift 2
  for _ in $(seq "$REPS"); do
    timeout 60 srun -N"$n" -n"$r" --mpi=pmix "$BENCH" "$@" 2>/dev/null | sed -n 's/.*"bootstrap_s":\([0-9.]*\).*/\1/p'
  done | median
}

printf '%-6s %-6s %-18s %-18s %s\n' ranks nodes "dltpmix median s" "MPI median s" "MPI/dltpmix"
for cfg in "2 2" "2 4" "4 8"; do
  set -- $cfg
  d=$(run "$1" "$2")
  m=$(run "$1" "$2" --mpi)
  printf '%-6s %-6s %-18s %-18s %s\n' "$2" "$1" "$d" "$m" "$(awk -v a="$m" -v b="$d" 'BEGIN{ if (b > 0) printf "%.1fx", a/b; else print "n/a" }')"
done
