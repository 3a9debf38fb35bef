#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# scale.sh [RANKS...]: launch, plugin and bootstrap cost from 8 to 1,024 ranks (8 per node, up to
# 128 nodes) on a simulated cluster: slurmd on loopback addresses of this machine, every node the
# 8-GPU dgx1 fixture (tests/slurm/cluster.sh). Per size, medians of REPS runs taken in alternation:
#   srun         srun true
#   dl-train     srun --dl-train true (the plugin's whole per-step cost: topology, XML, binding)
#   pmix floor   PMIx_Init and one fence, from the step's start to the last rank out of it
#   dltpmix      libdltpmix's bootstrap (init + a 128-byte id from rank 0), from the step's start to
#                the last rank holding the id (every rank's clock: they are one machine's)
#   mpi          MPI_Init + MPI_Bcast, the same way, up to SCALE_MPI_MAX ranks (default 64)
# then the rank contract of every rank checked at the largest size (tests/bench/scale_check.py),
# dltrain env and a dltrain train start-up (2 steps) at SCALE_TRAIN_RANKS (default 16), each
# phase timed. Prints a table with the growth per doubling, writes it as TSV to SCALE_OUT (default
# scale.tsv) and a log-log plot beside it (.svg), and fits t = a + b*nodes + c*ranks (from extra
# points of 1 rank per node) to predict 512 nodes x 8. What a 2-core loopback cluster can tell:
# serial and quadratic costs, and what grows with nodes or ranks; not network latency, NIC or
# switch behaviour, or a real controller's load (every daemon and rank shares the same 2 cores).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=${DLT_BUILDDIR:-$(cd "$HERE/../.." && pwd)}
SIZES=("$@")
((${#SIZES[@]})) || SIZES=(8 64 256 512 1024)
REPS=${REPS:-3}
PER_NODE=8
MPI_MAX=${SCALE_MPI_MAX:-64}
TRAIN_RANKS=${SCALE_TRAIN_RANKS:-16}
OUT=${SCALE_OUT:-scale.tsv}
BENCH=$BUILD/tests/bench/bootstrap_bench
DLTRAIN=$BUILD/trainer/dltrain
[[ -x $BENCH && -x $DLTRAIN ]] || { echo "scale.sh: build first (make && make tests/bench/bootstrap_bench)" >&2; exit 2; }
max=0
for r in "${SIZES[@]}"; do
  [[ $r =~ ^[0-9]+$ ]] && ((r % PER_NODE == 0 && r / PER_NODE <= 128)) || { echo "scale.sh: $r ranks: a multiple of $PER_NODE, at most 1024" >&2; exit 2; }
  ((r > max)) && max=$r
done
NODES_MAX=$((max / PER_NODE))
export DLT_CLUSTER_NODES=$NODES_MAX DLT_CLUSTER_CPUS=$PER_NODE DLT_CLUSTER_TOPO=dgx1
export DLT_CLUSTER_DIR=${SCALE_CLUSTER_DIR:-/tmp/dltrain-scale-$$} DLT_CLUSTER_PORT=${SCALE_PORT:-26000}
export DLT_PLUGIN=${DLT_PLUGIN:-$BUILD/plugin/.libs/spank_dltrain.so}
trap 'bash "$HERE/../slurm/cluster.sh" down >/dev/null 2>&1; rm -rf "$DLT_CLUSTER_DIR"' EXIT
t0=$(date +%s.%N)
bash "$HERE/../slurm/cluster.sh" up 2>&1 | tail -1 || exit 1
eval "$(bash "$HERE/../slurm/cluster.sh" env)"
printf 'scale.sh: %d nodes up in %.1f s; slurmd+slurmctld RSS %d MB\n' "$NODES_MAX" "$(echo "$(date +%s.%N) - $t0" | bc)" \
  "$(ps -C slurmd,slurmctld -o rss= | awk '{s+=$1} END {print int(s/1024)}')"
cd /tmp || exit 1
now() { date +%s.%N; }
median() { sort -g | awk '{a[NR]=$1} END {if (!NR) print "nan"; else print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
# A step's wall time as srun sees it: N TASKS_PER_NODE ARGS...
wall() {
  local n=$1 t=$2 s; shift 2
  s=$(now)
  timeout 300 srun --quiet -N"$n" --ntasks-per-node="$t" --gpus-per-node=8 "$@" >/dev/null 2>&1 || { echo nan; return; }
  echo "$(now) - $s" | bc
}
# From the step's start to the last rank's "held T": N TASKS ARGS...
held() {
  local n=$1 t=$2 s out; shift 2
  s=$(now)
  out=$(BOOTSTRAP_BENCH_HELD=1 timeout 300 srun --quiet -N"$n" --ntasks-per-node="$t" --mpi=pmix "$BENCH" "$@" 2>/dev/null)
  [[ $(grep -c '^held ' <<<"$out") == $((n * t)) ]] || { echo nan; return; }
  grep '^held ' <<<"$out" | awk -v s="$s" '$2 > m {m = $2} END {printf "%.3f\n", m - s}'
}

: >"$OUT.raw"
row() { # size nodes tasks_per_node: REPS alternated rounds of every measurement
  local r=$1 n=$2 t=$3 i
  for ((i = 0; i < REPS; i++)); do
    echo "$r $n srun $(wall "$n" "$t" true)"
    echo "$r $n dltrain $(wall "$n" "$t" --dl-train true)"
    echo "$r $n floor $(held "$n" "$t" --pmix-fence)"
    echo "$r $n dltpmix $(held "$n" "$t")"
    ((r <= MPI_MAX)) && echo "$r $n mpi $(held "$n" "$t" --mpi)"
  done >>"$OUT.raw"
}
for r in "${SIZES[@]}"; do
  row "$r" $((r / PER_NODE)) "$PER_NODE"
  echo "scale.sh: $r ranks done" >&2
done
# one rank per node at the largest node counts: the per-node term apart from the per-rank one
for r in "${SIZES[@]}"; do
  n=$((r / PER_NODE))
  ((n >= 8)) && row "$n" "$n" 1
done

# The rank contract of every rank at the largest size.
contract=$(timeout 300 srun --quiet -N"$NODES_MAX" --ntasks-per-node="$PER_NODE" --gpus-per-node=8 --dl-train bash -c \
  'echo "$SLURM_PROCID $RANK $LOCAL_RANK $WORLD_SIZE $LOCAL_WORLD_SIZE $GROUP_RANK $SLURMD_NODENAME $MASTER_ADDR $MASTER_PORT $CUDA_VISIBLE_DEVICES $NCCL_TOPO_FILE"' 2>&1)
check=$(python3 "$HERE/scale_check.py" "$max" "$PER_NODE" <<<"$contract" 2>&1) && crc=0 || crc=1
echo "scale.sh: rank contract at $max ranks: $check"

# dltrain env and a dltrain train start-up at TRAIN_RANKS, each phase timed.
tn=$((TRAIN_RANKS / PER_NODE))
s=$(now)
envout=$(timeout 600 srun --quiet -N"$tn" --ntasks-per-node="$PER_NODE" --gpus-per-node=8 --mpi=pmix --dl-train "$DLTRAIN" env 2>&1)
erc=$?
printf 'scale.sh: dltrain env at %d ranks: %.1f s, exit %d, %d lines on rank 0'"'"'s outputs\n' "$TRAIN_RANKS" "$(echo "$(now) - $s" | bc)" "$erc" "$(grep -c . <<<"$envout")"
s=$(now)
trout=$(timeout 900 srun --quiet -N"$tn" --ntasks-per-node="$PER_NODE" --gpus-per-node=8 --mpi=pmix --dl-train "$DLTRAIN" train \
  --synthetic --arch resnet18 --image-size 32 --batch 2 --classes 10 --steps 2 --log-every 1 2>&1 | while IFS= read -r l; do
  printf '%.1f %s\n' "$(echo "$(now) - $s" | bc)" "$l"; done)
for pat in "training resnet18" "step 1/2" "step 2/2" "done: 2 steps"; do
  printf 'scale.sh: dltrain train at %d ranks: "%s" at %s s\n' "$TRAIN_RANKS" "$pat" "$(grep -F "$pat" <<<"$trout" | head -1 | cut -d' ' -f1)"
done

python3 - "$OUT" "$PER_NODE" <<'PY'
import math, sys, collections
out, per = sys.argv[1], int(sys.argv[2])
vals = collections.defaultdict(list)
for line in open(out + ".raw"):
    r, n, what, v = line.split()
    if v != "nan":
        vals[(int(r), int(n), what)].append(float(v))
med = {k: sorted(v)[len(v) // 2] if len(v) % 2 else sum(sorted(v)[len(v) // 2 - 1:len(v) // 2 + 1]) / 2 for k, v in vals.items()}
cols = ["srun", "dltrain", "floor", "dltpmix", "mpi"]
rows = sorted({(r, n) for (r, n, _) in med if r == n * per})
with open(out, "w") as f:
    f.write("ranks\tnodes\t" + "\t".join(cols) + "\n")
    for r, n in rows:
        f.write(f"{r}\t{n}\t" + "\t".join(f"{med.get((r, n, c), float('nan')):.3f}" for c in cols) + "\n")
print("| ranks | nodes | srun true | --dl-train true | PMIx floor | libdltpmix bootstrap | MPI_Init+Bcast |")
print("|---|---|---|---|---|---|---|")
for r, n in rows:
    print(f"| {r} | {n} | " + " | ".join(f"{med[(r, n, c)]:.2f} s" if (r, n, c) in med else "-" for c in cols) + " |")
print("growth per doubling of the ranks (from 64 on):")
for c in cols:
    pts = [(r, med[(r, n, c)]) for r, n in rows if (r, n, c) in med and r >= 64]
    if len(pts) >= 2:
        (r0, t0), (r1, t1) = pts[0], pts[-1]
        g = (t1 / t0) ** (1 / math.log2(r1 / r0)) if t0 > 0 and r1 > r0 else float("nan")
        print(f"  {c}: x{g:.2f}")
ratio = [(r, med[(r, n, 'dltrain')] / med[(r, n, 'srun')]) for r, n in rows if (r, n, 'dltrain') in med and (r, n, 'srun') in med]
print("--dl-train / srun: " + ", ".join(f"{r}: {x:.2f}" for r, x in ratio))
boot = [(r, med[(r, n, 'dltpmix')] / med[(r, n, 'srun')]) for r, n in rows if (r, n, 'dltpmix') in med and (r, n, 'srun') in med]
print("bootstrap / srun: " + ", ".join(f"{r}: {x:.2f}" for r, x in boot))
# t = a + b*nodes + c*ranks by least squares over every point (1 and 8 ranks per node)
def fit(c):
    pts = [(n, r, v) for (r, n, w), v in med.items() if w == c]
    if len(pts) < 3:
        return None
    import itertools
    X = [[1.0, n, r] for n, r, _ in pts]
    y = [v for _, _, v in pts]
    A = [[sum(X[k][i] * X[k][j] for k in range(len(X))) for j in range(3)] for i in range(3)]
    b = [sum(X[k][i] * y[k] for k in range(len(X))) for i in range(3)]
    for i in range(3):  # Gauss-Jordan
        p = max(range(i, 3), key=lambda q: abs(A[q][i]))
        A[i], A[p], b[i], b[p] = A[p], A[i], b[p], b[i]
        if abs(A[i][i]) < 1e-12:
            return None
        for q in range(3):
            if q != i:
                f = A[q][i] / A[i][i]
                A[q] = [A[q][j] - f * A[i][j] for j in range(3)]
                b[q] -= f * b[i]
    return [b[i] / A[i][i] for i in range(3)]
print("model t = a + b*nodes + c*ranks, and its prediction for 512 nodes x 8 = 4,096 ranks:")
for c in cols:
    m = fit(c)
    if m:
        print(f"  {c}: a={m[0]:.3f} s, b={m[1]*1000:.2f} ms/node, c={m[2]*1000:.2f} ms/rank -> {m[0] + 512*m[1] + 4096*m[2]:.1f} s")
# log-log plot, hand-made SVG (no plotting library needed)
W, H, L, B = 560, 360, 60, 40
xs = [r for r, _ in rows]
ys = [v for (r, n, c), v in med.items() if r == n * per and v > 0]
if xs and ys:
    lx0, lx1 = math.log2(min(xs)), math.log2(max(xs)) or 1
    ly0, ly1 = math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys)))
    px = lambda r: L + (W - L - 20) * ((math.log2(r) - lx0) / ((lx1 - lx0) or 1))
    py = lambda v: H - B - (H - B - 20) * ((math.log10(v) - ly0) / ((ly1 - ly0) or 1))
    colors = dict(srun="#444", dltrain="#d62728", floor="#999", dltpmix="#1f77b4", mpi="#2ca02c")
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="11">',
           f'<text x="{W/2}" y="14" text-anchor="middle">seconds against ranks (8 per node), log-log</text>']
    for r in xs:
        svg.append(f'<text x="{px(r):.0f}" y="{H-B+15}" text-anchor="middle">{r}</text>')
    for e in range(ly0, ly1 + 1):
        svg.append(f'<text x="{L-5}" y="{py(10**e)+4:.0f}" text-anchor="end">{10**e:g}</text>')
        svg.append(f'<line x1="{L}" x2="{W-20}" y1="{py(10**e):.0f}" y2="{py(10**e):.0f}" stroke="#eee"/>')
    for i, c in enumerate(cols):
        pts = [(px(r), py(med[(r, n, c)])) for r, n in rows if (r, n, c) in med and med[(r, n, c)] > 0]
        if pts:
            svg.append(f'<polyline fill="none" stroke="{colors[c]}" stroke-width="2" points="' + " ".join(f"{x:.0f},{y:.0f}" for x, y in pts) + '"/>')
            svg.append(f'<text x="{L+10}" y="{30+14*i}" fill="{colors[c]}">{c}</text>')
    svg.append("</svg>")
    open(out.rsplit(".", 1)[0] + ".svg", "w").write("\n".join(svg) + "\n")
PY
exit $crc
