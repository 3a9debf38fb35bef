#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# bucket_overlap.sh [REPS] [STEPS]: the gradient all-reduce left exposed after backward, per step,
# at two ranks (srun -N2 -n2 --mpi=pmix, the CPU backend and MPI, one thread per rank), for
#   one     --bucket-mib 4096 --bottom-bucket-mib 4096: one bucket summed after backward (no overlap,
#           what the CPU path did before it had buckets)
#   default the buckets (cut from the bottom, 1 MiB growing to 25 MiB), each summed while backward
#           computes the layers below
#   M       --bottom-bucket-mib M --bucket-mib M for each M in $DLT_BENCH_EXTRA (e.g. "25": equal
#           buckets, the bottom one as large as the rest)
# ResNet-50 (97.5 MiB of gradients), 64x64 synthetic images, batch 4 per rank; the runs interleave.
# From rank 0's metrics: the host's wait for the step's results (the all-reduce's exposed part) per
# step, the step time, their medians over the steps after the first 3 and over the repetitions;
# prints each and the ratios against "one". Starts its own local cluster unless SLURM_CONF is set.
set -euo pipefail
REPS=${1:-3}
STEPS=${2:-12}
HERE=$(cd "$(dirname "$0")" && pwd)
B=${DLT_BUILDDIR:-$(cd "$HERE/../.." && pwd)}
DLTRAIN=$B/trainer/dltrain
[[ -x $DLTRAIN ]] || { echo "bucket_overlap: $DLTRAIN not built" >&2; exit 1; }
W=$(mktemp -d /tmp/dlt-bucket-overlap.XXXXXX)
if [[ -z ${SLURM_CONF:-} ]]; then
  export DLT_CLUSTER_NODES=2 DLT_CLUSTER_DIR=$W/cluster DLT_CLUSTER_PORT=${DLT_CLUSTER_PORT:-18900}
  trap 'bash "$HERE/../slurm/cluster.sh" down >/dev/null 2>&1; rm -rf "$W"' EXIT
  bash "$HERE/../slurm/cluster.sh" up
  eval "$(bash "$HERE/../slurm/cluster.sh" env)"
else
  trap 'rm -rf "$W"' EXIT
fi
chmod 755 "$W"
export OMP_NUM_THREADS=1
declare -A MODE=([one]="--bucket-mib 4096 --bottom-bucket-mib 4096" [default]="")
ORDER=(one default)
for m in ${DLT_BENCH_EXTRA:-}; do MODE[$m]="--bucket-mib $m --bottom-bucket-mib $m"; ORDER+=("$m"); done
median() { sort -g | awk '{a[NR]=$1} END {if (NR) print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
# run MODE REP: one two-rank run; appends "exposed_s step_s" per measured step to W/MODE.steps.
run() {
  local m=$1 r=$2 out=$W/$1-$2
  mkdir -p "$out" && chmod 777 "$out"
  # shellcheck disable=SC2086
  timeout 600 srun -N2 -n2 --mpi=pmix "$DLTRAIN" train --synthetic --arch resnet50 --image-size 64 --classes 10 \
    --batch 4 --synthetic-size 64 --steps "$STEPS" --warmup-epochs 0 --log-every 1 --quiet \
    --checkpoint-dir "$out/ck" --metrics "$out/m.jsonl" ${MODE[$m]} >"$out/log" 2>&1 ||
    { echo "bucket_overlap: the $m run failed:" >&2; tail -5 "$out/log" >&2; exit 1; }
  python3 - "$out/m.jsonl" >>"$W/$m.steps" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    d = json.loads(line)
    if "step" in d and "wait" in d and d["step"] > 3:
        step_s = d["batch"] * d["ranks"] / d["images_per_s"]
        print("%.6f %.6f" % (d["wait"] * step_s, step_s))
PY
}
for r in $(seq "$REPS"); do for m in "${ORDER[@]}"; do run "$m" "$r"; done; done
cpu=$(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)
echo "bucket_overlap: ResNet-50, 2 ranks x 1 thread, batch 4 x 2, 64x64, $REPS x $((STEPS - 3)) steps each; CPU: $cpu"
e1=$(awk '{print $1}' "$W/one.steps" | median); s1=$(awk '{print $2}' "$W/one.steps" | median)
for m in "${ORDER[@]}"; do
  e=$(awk '{print $1}' "$W/$m.steps" | median); s=$(awk '{print $2}' "$W/$m.steps" | median)
  printf '  %-8s exposed all-reduce %7.1f ms/step   step %7.1f ms   exposed vs one %.3f   step vs one %.3f\n' \
    "$m" "$(awk -v x="$e" 'BEGIN{print x * 1000}')" "$(awk -v x="$s" 'BEGIN{print x * 1000}')" \
    "$(awk -v a="$e" -v b="$e1" 'BEGIN{print (b > 0) ? a / b : 0}')" "$(awk -v a="$s" -v b="$s1" 'BEGIN{print a / b}')"
done
