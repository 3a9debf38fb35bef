#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/device/run.sh: everything that needs a GPU, as one script for a lent GPU machine, inside a
# global deadline (default 480 s, DLT_DEVICE_DEADLINE): phases that would start past it are not
# started, a running command is ended at its phase's cap (timeout -k: TERM, then KILL 5 s later,
# since dltrain train only notes a TERM and stops at the next step), and the table of what ran
# (status and seconds of each phase) is printed whatever happens. Anything not run (a phase or a
# benchmark config past the deadline, the multi-rank phase without NCCL >= 2.30) is counted as cut,
# never as ok. The log and JSON results go under $OUT (default /tmp/dlt-device).
#   unpack/build  .devpack/ made here by tests/device/pack.sh (the GPU machine has no Slurm, PMIx,
#                 oneDNN headers), else a build in place
#   ops           cuda_ops_check: every CUDA op against the CPU backend in fp32, tf32, fp16, bf16
#                 (the math type cuDNN chose per direction, the Ex batch norm, fused BN+add+ReLU in
#                 fp16 and bf16, the stem padded to 4 channels, KRSC weights read in place or
#                 through the optimizer's low-precision twin, the flat sgd_step over three
#                 segments, its skip rule and its one launch (a CUDA graph of one node), the step
#                 results on the device, the input staging ring, the device checksum)
#                 then dltrain check: the GEMM's TFLOP/s (fp16, 8192^2, result exact) against
#                 torch.matmul's (cuBLAS) for the same size and dtype in the same run, as a ratio,
#                 and with two ranks (as multi-rank starts them) the all-reduce busbw up to 64 MiB
#   multi-rank    two real NCCL ranks on the one GPU (NCCL >= 2.30 with NCCL_MULTI_RANK_GPU_ENABLE=1,
#                 started by tests/device/two_ranks.sh through libdltpmix's test rendezvous; with
#                 one rank NCCL copies instead of summing, so nothing else here proves the sum):
#                 nccl_check's exact sums over sizes across the bucket boundaries, then ResNet-50
#                 fp32 --deterministic on 2 ranks x 64 images, plain and with --cuda-graphs, against
#                 1 rank x 128 images: every step's loss within 2% (the ranks normalise their batch
#                 statistics over 64 images, the single rank over 128: PyTorch DDP without SyncBN
#                 differs the same way), the two 2-rank runs' losses equal bit for bit, and the
#                 ranks' weights bit-identical at every step (--check-every 1). NCCL older than
#                 2.30: "multi-rank: NOT TESTED" (counted as cut)
#   train-*       ResNet-50 on one fixed batch through the full path (--comm nccl: bucketed
#                 all-reduce during backward): the loss must fall (fp32, fp16, bf16); fp32 through
#                 NCCL buckets and as a CUDA graph repeats the single-rank losses bit for bit; fp16
#                 with --allreduce-lowp must differ from fp16 with fp32 reduction (proof that SGD
#                 read the round-tripped gradients) yet stay within 2% of it
#   bench         dltrain bench vs torchvision ResNet-50 in PyTorch eager (channels_last, AMP) at
#                 the same batch, same run, as a ratio; the fp16 row is the verdict: PASS when
#                 dltrain's images/s are at least DLT_BENCH_MIN_RATIO (default 1.0) times
#                 PyTorch's. Further rows while time is left: fp16 with --cuda-graphs, bf16,
#                 fp16 --feed, tf32, fp32, fp16 --stem-pad off, bf16 --feed
# Options: --dry-run (print the phases and the deadline, run nothing), --ranks N (a machine with N
# GPUs: the multi-rank phase runs N ranks, one per GPU, through $DLT_LAUNCH, default
# "srun -n N --mpi=pmix").
# Without a GPU it says so and exits 0 (skipped). DLT_DEVICE_QUICK=1: fewer benchmark configs.
set -uo pipefail
cd "$(dirname "$0")/../.."
DRY=0 RANKS=1
while [ $# -gt 0 ]; do
  case $1 in
    --dry-run) DRY=1 ;;
    --ranks) RANKS=${2:?--ranks N}; shift ;;
    *) echo "usage: tests/device/run.sh [--dry-run] [--ranks N]" >&2; exit 2 ;;
  esac
  shift
done
OUT=${OUT:-/tmp/dlt-device}
DEADLINE=${DLT_DEVICE_DEADLINE:-480}
KILL_AFTER=5
mkdir -p "$OUT"
LOG=$OUT/device-run.log
exec > >(tee "$LOG") 2>&1
START=$SECONDS

# Phases in order of importance: name, the seconds it needs at least to be worth starting, its cap.
# The caps add up to the 480 s deadline.
PHASES=(
  "unpack 5 30" "ops 30 75" "multi-rank 30 90"
  "train-identity 30 50" "train-lowp 25 40" "train-fp32 15 25" "train-fp16 15 25" "train-bf16 15 25"
  "bench 40 120"
)
echo "device: deadline ${DEADLINE} s for all phases; ranks ${RANKS}"
if [ "$DRY" = 1 ]; then
  for p in "${PHASES[@]}"; do read -r n lo hi <<<"$p"; echo "device: phase $n (starts with >= ${lo} s left, at most ${hi} s)"; done
  if [ "$RANKS" -gt 1 ]; then echo "device: multi-rank: $RANKS ranks, one per GPU, through ${DLT_LAUNCH:-srun -n $RANKS --mpi=pmix}"
  else echo "device: multi-rank: two NCCL ranks on one GPU (tests/device/two_ranks.sh, NCCL >= 2.30 with NCCL_MULTI_RANK_GPU_ENABLE=1); with an older NCCL: multi-rank: NOT TESTED, counted as cut"; fi
  echo "device: every command ends at its phase's cap: timeout -k ${KILL_AFTER} (TERM, then KILL)"
  echo "device: dry run: nothing run"
  exit 0
fi
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "device: SKIP: no GPU visible (nvidia-smi -L failed)"
  exit 0
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
passed=0 failed=0 cut=0
declare -A STATUS ELAPSED
ok() { passed=$((passed + 1)); echo "device: ok   $*"; }
bad() { failed=$((failed + 1)); echo "device: FAIL $*"; }
left() { echo $((DEADLINE - (SECONDS - START))); }
# cap SECONDS: what a command of this phase may take (its cap, never past the deadline).
cap() { local l; l=$(left); echo $(($1 < l ? $1 : (l > 1 ? l : 1))); }
table() {
  echo "device: phase            status     seconds"
  for p in "${PHASES[@]}"; do
    read -r n _ _ <<<"$p"
    printf 'device: %-16s %-10s %s\n' "$n" "${STATUS[$n]:-not run}" "${ELAPSED[$n]:--}"
  done
  echo "device: $passed passed, $failed failed, $cut cut (phases or configs not run: deadline, or not testable here) in $((SECONDS - START)) s of ${DEADLINE} s (log: $LOG)"
}
# Exit 0 only when every phase ran and passed; 1 on a failure; 2 when the deadline cut phases.
finish() { table; [ "$failed" -gt 0 ] && exit 1; [ "$cut" -gt 0 ] && exit 2; exit 0; }
# run_phase NAME FUNCTION: runs it when enough time is left, records status and seconds.
run_phase() {
  local name=$1 fn=$2 lo hi t0 f0=$failed
  for p in "${PHASES[@]}"; do read -r n l h <<<"$p"; [ "$n" = "$name" ] && lo=$l hi=$h; done
  if [ "$(left)" -lt "$lo" ]; then
    STATUS[$name]="skipped: deadline"; cut=$((cut + 1)); echo "device: $name not started: $(left) s left"; return
  fi
  t0=$SECONDS
  PHASE_END=$((SECONDS + $(cap "$hi")))
  NOT_TESTED=
  "$fn"
  ELAPSED[$name]=$((SECONDS - t0))
  if [ "$failed" -gt "$f0" ]; then STATUS[$name]=FAIL
  elif [ -n "$NOT_TESTED" ]; then STATUS[$name]="NOT TESTED"; cut=$((cut + 1))
  else STATUS[$name]=ok; fi
}
# What a command may still take in this phase (timeout's argument; its KILL comes KILL_AFTER later).
tmo() { local t=$((PHASE_END - SECONDS - KILL_AFTER)); echo $((t > 1 ? t : 1)); }
# A command bounded by the phase's cap: TERM at the cap, KILL KILL_AFTER seconds later.
tm() { timeout -k "$KILL_AFTER" "$(tmo)" "$@"; }
# The multi-rank launcher: RANKS ranks (one per GPU) through DLT_LAUNCH, or two ranks on the one
# GPU through the test rendezvous when NCCL can (multi_launch sets MULTI and MULTI_N).
MULTI=() MULTI_N=0

phase_unpack() {
  if [ -f .devpack/dltrain-device.tar.gz ]; then
    PK=/tmp/dlt-devpack; rm -rf "$PK"; mkdir -p "$PK"
    tar -xzf .devpack/dltrain-device.tar.gz -C "$PK"
    # CUDA 13 libraries: the toolkit's and those of PyTorch's nvidia-* wheels (cuDNN, NCCL, cuBLAS).
    NV=$(python3 -c 'import glob, os, nvidia
print(":".join(sorted({os.path.dirname(p) for d in nvidia.__path__ for p in glob.glob(os.path.join(d, "**", "lib*.so*"), recursive=True)})))' 2>/dev/null || true)
    export LD_LIBRARY_PATH=$PK/lib${NV:+:$NV}:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    # An NCCL >= 2.30 carried in parts (pack.sh --nccl; too big for one carry): first in the path.
    if [ -f .devpack/nccl/MANIFEST ]; then
      local want have; want=$(wc -l <.devpack/nccl/MANIFEST); have=$(cd .devpack/nccl && ls part-* 2>/dev/null | wc -l)
      if [ "$have" = "$want" ] && (cd .devpack/nccl && sha256sum -c --quiet MANIFEST) && mkdir -p "$PK/nccl" &&
         cat .devpack/nccl/part-* | gzip -dc >"$PK/nccl/libnccl.so.2"; then
        export LD_LIBRARY_PATH=$PK/nccl:$LD_LIBRARY_PATH
        echo "device: NCCL from the pack: $(cat .devpack/nccl/VERSION 2>/dev/null)"
      else
        echo "device: the pack's NCCL parts are incomplete or damaged ($have of $want): using the machine's NCCL"
      fi
    fi
    DLT=$PK/bin/dltrain OPS=$PK/bin/cuda_ops_check NCCLCHK=$PK/bin/nccl_check
    local missing; missing=$(ldd "$DLT" "$OPS" "$NCCLCHK" | grep "not found" | sort -u)
    if [ -n "$missing" ]; then bad "packed programs miss libraries:"; echo "$missing"; return; fi
    ok "unpacked the build of commit $(cat "$PK/COMMIT" 2>/dev/null)"
  elif { [ -x configure ] || ./autogen.sh >/dev/null; } &&
       { [ -f Makefile ] || ./configure --enable-werror >"$OUT/configure.log" 2>&1; } &&
       tm make -j"$(nproc)" >"$OUT/make.log" 2>&1 &&
       tm make -j"$(nproc)" tests/device/nccl_check tests/device/cuda_ops_check >>"$OUT/make.log" 2>&1; then
    DLT=./trainer/dltrain OPS=./tests/device/cuda_ops_check NCCLCHK=./tests/device/nccl_check
    ok "build"
  else
    bad "build (see $OUT/configure.log, $OUT/make.log; without the packages of contrib/install-deps.sh, run tests/device/pack.sh beforehand and carry .devpack)"
    tail -20 "$OUT/make.log" 2>/dev/null || tail -20 "$OUT/configure.log"
  fi
}

# The NCCL the programs load: its version as NCCL encodes it (2.30.7 -> 23007), 0 when unknown.
nccl_version() {
  python3 -c 'import ctypes, sys
v = ctypes.c_int(0)
try:
    ctypes.CDLL("libnccl.so.2").ncclGetVersion(ctypes.byref(v))
except OSError:
    pass
print(v.value)' 2>/dev/null || echo 0
}

# Sets MULTI (the launcher) and MULTI_N, or returns 1 when this machine cannot run several ranks.
multi_launch() {
  local v
  if [ "$RANKS" -gt 1 ]; then
    read -r -a MULTI <<<"${DLT_LAUNCH:-srun -n $RANKS --mpi=pmix}"; MULTI_N=$RANKS; return 0
  fi
  v=$(nccl_version)
  if [ "${v:-0}" -ge 23000 ]; then
    MULTI=(env NCCL_MULTI_RANK_GPU_ENABLE=1 DLTPMIX_TIMEOUT=60 bash tests/device/two_ranks.sh 2); MULTI_N=2
    echo "device: multi-rank: NCCL $((v / 10000)).$((v / 100 % 100)).$((v % 100)): two ranks on one GPU"
    return 0
  fi
  echo "device: multi-rank: NOT TESTED (NCCL $((v / 10000)).$((v / 100 % 100)).$((v % 100)) here: two ranks on one GPU need NCCL >= 2.30; carry one with tests/device/pack.sh --nccl)"
  return 1
}

phase_ops() {
  if tm "$OPS" | tee "$OUT/cuda_ops_check.txt" && ! grep -q SKIP "$OUT/cuda_ops_check.txt"; then
    ok "cuda_ops_check ($(tail -1 "$OUT/cuda_ops_check.txt"))"
  else
    bad "cuda_ops_check ($(grep -c '^FAIL' "$OUT/cuda_ops_check.txt") failing checks)"
  fi
  check_line
}

# dltrain check on the GPU: one rank's GEMM against torch.matmul (cuBLAS) at the same size and
# dtype, then, where two ranks can run, the all-reduce sweep's busbw on the same communicator.
check_line() {
  local tf peak bus
  if tm "$DLT" check --backend cuda --precision fp16 --gemm-size 8192 --max-bytes 64M --json >"$OUT/check-1.json" 2>"$OUT/check-1.log" &&
     tf=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["compute"][0]["exact"]; print(d["compute"][0]["tflops"])' "$OUT/check-1.json") &&
     peak=$(tm "${DLT_TORCH_PYTHON:-python3}" -c 'import torch, time
a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16); b = torch.randn_like(a)
for _ in range(3): a @ b
torch.cuda.synchronize(); t = time.time(); n = 20
for _ in range(n): a @ b
torch.cuda.synchronize(); print(2 * 8192 ** 3 * n / (time.time() - t) / 1e12)' 2>>"$OUT/check-1.log"); then
    if python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) >= 0.7 * float(sys.argv[2]) else 1)' "$tf" "$peak"; then
      ok "dltrain check: GEMM fp16 8192^2 exact, ${tf} TFLOP/s vs torch.matmul (cuBLAS) ${peak} TFLOP/s"
    else bad "dltrain check: GEMM ${tf} TFLOP/s below 0.7 x torch.matmul's ${peak}"; fi
  else bad "dltrain check (one rank)"; tail -5 "$OUT/check-1.log"; fi
  multi_launch >/dev/null || { echo "device: dltrain check on two ranks: NOT TESTED (NCCL < 2.30)"; return; }
  if tm "${MULTI[@]}" "$DLT" check --backend cuda --gemm-size 4096 --max-bytes 64M --no-isolate --min-fraction 0 --json >"$OUT/check-2.log" 2>&1 &&
     bus=$(sed -n 's/^\(\[rank 0\] \)\{0,1\}\({"verdict".*\)/\2/p' "$OUT/check-2.log" | python3 -c 'import json,sys; d=json.loads(sys.stdin.readline()); assert d["ranks"] == 2 and all(p["wrong"] == 0 for p in d["allreduce"]); print(d["allreduce"][-1]["busbw_gbs"])'); then
    ok "dltrain check on $MULTI_N ranks: all-reduce sums exact, busbw ${bus} GB/s at 64 MiB"
  else bad "dltrain check on $MULTI_N ranks"; tail -5 "$OUT/check-2.log"; fi
}

# train LAUNCHER-ARRAY-NAME precision comm steps metrics-file [extra options]: ResNet-50 on
# synthetic images; the defaults below, then the extra options (a later --batch wins).
train() {
  local -n L=$1; local p=$2 c=$3 n=$4 m=$5; shift 5
  rm -f "$m"
  tm "${L[@]}" "$DLT" train --backend cuda --precision "$p" --comm "$c" --arch resnet50 --batch 64 \
    --synthetic-size 64 --steps "$n" --log-every 1 --warmup-epochs 0 --milestones 100000 --lr 0.4 \
    --check-every 0 --stall-timeout 60 --bucket-mib 4 --metrics "$m" "$@"
}
losses() { python3 -c 'import json,sys; print(" ".join("%.6f" % json.loads(l)["loss"] for l in open(sys.argv[1])))' "$1"; }
ONE=()

# Two ranks (or RANKS) through NCCL for real: exact sums, then training against one rank.
phase_multi_rank() {
  local a b g
  if ! multi_launch; then
    NOT_TESTED=1
    if tm "$NCCLCHK" >"$OUT/nccl-1rank.log" 2>&1; then echo "device: nccl_check on one rank ran (a copy, not a sum: proves the bootstrap only)"
    else bad "nccl_check (one rank)"; tail -5 "$OUT/nccl-1rank.log"; fi
    return
  fi
  if tm "${MULTI[@]}" "$NCCLCHK" >"$OUT/nccl-multi.log" 2>&1 && grep -q "all exact" "$OUT/nccl-multi.log"; then
    ok "nccl_check on $MULTI_N ranks: $(grep -o 'exact sums.*' "$OUT/nccl-multi.log" | head -1)"
  else
    bad "nccl_check on $MULTI_N ranks"; tail -8 "$OUT/nccl-multi.log"; return
  fi
  # The same 128 images per step: one rank x 128, MULTI_N ranks x 128/MULTI_N.
  local per=$((128 / MULTI_N)) common=(--deterministic --synthetic-size 128 --lr 0.1)
  if train ONE fp32 single 6 "$OUT/mr-one.jsonl" "${common[@]}" --batch 128 >"$OUT/mr-one.log" 2>&1 &&
     train MULTI fp32 nccl 6 "$OUT/mr-plain.jsonl" "${common[@]}" --batch "$per" --check-every 1 --verbose >"$OUT/mr-plain.log" 2>&1 &&
     train MULTI fp32 nccl 6 "$OUT/mr-graph.jsonl" "${common[@]}" --batch "$per" --check-every 1 --verbose --cuda-graphs >"$OUT/mr-graph.log" 2>&1; then
    a=$(losses "$OUT/mr-one.jsonl") b=$(losses "$OUT/mr-plain.jsonl") g=$(losses "$OUT/mr-graph.jsonl")
    if python3 - "$a" "$b" <<'EOF'; then
import sys
a = [float(v) for v in sys.argv[1].split()]; b = [float(v) for v in sys.argv[2].split()]
ok = len(a) == len(b) and len(a) > 0 and all(abs(x - y) <= 0.02 * max(abs(x), 1e-6) for x, y in zip(a, b))
print("device: losses 1 rank x 128 %s, ranks %s: %s" % (a, b, "each within 2%" if ok else "NOT within 2%"))
sys.exit(0 if ok else 1)
EOF
      ok "$MULTI_N ranks through NCCL train like one rank at the doubled batch (losses within 2%)"
    else bad "$MULTI_N-rank losses ($b) not within 2% of one rank at the doubled batch ($a)"; fi
    if [ "$b" = "$g" ]; then ok "$MULTI_N ranks replayed as a CUDA graph repeat the plain losses bit for bit"
    else bad "$MULTI_N-rank CUDA-graph losses ($g) differ from plain ($b)"; fi
    if [ "$(cat "$OUT/mr-plain.log" "$OUT/mr-graph.log" | grep -c 'bit-identical across')" -ge 12 ] &&
       ! grep -q 'not bit-identical' "$OUT/mr-plain.log" "$OUT/mr-graph.log"; then
      ok "the ranks' weights are bit-identical at every step (plain and CUDA graph)"
    else bad "the ranks' weights are not shown bit-identical at every step (see $OUT/mr-*.log)"; fi
  else
    bad "multi-rank training runs failed"; tail -5 "$OUT"/mr-*.log
  fi
}

# Same losses, bit for bit, with deterministic cuDNN algorithms: one rank plain, through NCCL
# buckets, and replayed as a CUDA graph (one rank: the sum over one rank is the identity).
phase_train_identity() {
  if train ONE fp32 single 6 "$OUT/id-single.jsonl" --deterministic >"$OUT/id-single.log" 2>&1 &&
     train ONE fp32 nccl 6 "$OUT/id-nccl.jsonl" --deterministic >"$OUT/id-nccl.log" 2>&1 &&
     train ONE fp32 nccl 6 "$OUT/id-graph.jsonl" --deterministic --cuda-graphs >"$OUT/id-graph.log" 2>&1; then
    local a b g
    a=$(losses "$OUT/id-single.jsonl") b=$(losses "$OUT/id-nccl.jsonl") g=$(losses "$OUT/id-graph.jsonl")
    if [ "$a" = "$b" ]; then ok "fp32 with NCCL buckets repeats the single-rank losses exactly ($a)"
    else bad "fp32 NCCL-bucket losses ($b) differ from single-rank ($a)"; fi
    if [ "$a" = "$g" ]; then ok "fp32 replayed as a CUDA graph repeats them too"
    else bad "fp32 CUDA-graph losses ($g) differ from plain ($a)"; fi
  else
    bad "identity runs failed"; tail -3 "$OUT"/id-*.log
  fi
}

phase_train_lowp() {
  if train ONE fp16 nccl 6 "$OUT/lowp-off.jsonl" --deterministic >"$OUT/lowp-off.log" 2>&1 &&
     train ONE fp16 nccl 6 "$OUT/lowp-on.jsonl" --deterministic --allreduce-lowp >"$OUT/lowp-on.log" 2>&1; then
    local a b
    a=$(losses "$OUT/lowp-off.jsonl") b=$(losses "$OUT/lowp-on.jsonl")
    if python3 - "$a" "$b" <<'EOF'; then
import sys
a = [float(v) for v in sys.argv[1].split()]; b = [float(v) for v in sys.argv[2].split()]
differ = a != b
close = len(a) == len(b) and all(abs(x - y) <= 0.02 * max(abs(x), 1e-6) for x, y in zip(a, b))
print("device: lowp losses %s vs fp32-reduced %s: %s, %s" % (b, a, "differ" if differ else "IDENTICAL", "within 2%" if close else "NOT within 2%"))
sys.exit(0 if differ and close else 1)
EOF
      ok "fp16 --allreduce-lowp: SGD read the round-tripped gradients (losses differ, within 2%)"
    else bad "fp16 --allreduce-lowp check (identical losses mean the reduced copy was not read; far-off ones a wrong sum)"; fi
  else
    bad "lowp runs failed"; tail -3 "$OUT"/lowp-*.log
  fi
}

falls() { # run-name precision steps [extra]
  local run=$1 p=$2 n=$3; shift 3
  local m=$OUT/train-$run.jsonl L
  if train ONE "$p" nccl "$n" "$m" "$@" >"$OUT/train-$run.log" 2>&1; then
    read -r -a L <<<"$(losses "$m")"
    if python3 -c "import sys; a,b=float(sys.argv[1]),float(sys.argv[2]); sys.exit(0 if b < 0.7*a else 1)" "${L[0]}" "${L[-1]}"; then
      ok "ResNet-50 $run $n steps on one batch: loss ${L[0]} -> ${L[-1]} $(grep -o 'loss-scale [^ ]* skipped [0-9]*' "$OUT/train-$run.log" | tail -1)"
    else bad "ResNet-50 $run: loss did not fall (${L[*]})"; fi
  else
    bad "ResNet-50 $run training run failed:"; tail -5 "$OUT/train-$run.log"
  fi
}
phase_train_fp32() { falls fp32 fp32 15; }
phase_train_fp16() { falls fp16-graphs fp16 15 --cuda-graphs; }
phase_train_bf16() { falls bf16 bf16 15; }

phase_bench() {
  local configs prec batch variant extra ours peer PY=${DLT_TORCH_PYTHON:-python3} t_end left verdict
  # Most important first: the fp16 row is the verdict; the rest while time is left.
  if [ "${DLT_DEVICE_QUICK:-0}" = 1 ]; then configs="fp16:256 fp16:256:graphs"
  else configs="fp16:256 fp16:256:graphs bf16:256 fp16:256:feed tf32:128 fp32:128 fp16:256:nopad bf16:256:feed"; fi
  : >"$OUT/bench.jsonl"
  t_end=$PHASE_END
  for cfg in $configs; do
    IFS=: read -r prec batch variant <<<"$cfg"
    left=$((t_end - SECONDS - KILL_AFTER))
    if [ "$left" -lt 20 ]; then
      cut=$((cut + 1)); echo "device: bench $cfg not started: ${left} s left (counted as cut)"; continue
    fi
    extra=()
    case $variant in graphs) extra=(--cuda-graphs) ;; nopad) extra=(--stem-pad off) ;; feed) extra=(--feed) ;; esac
    ours=$(timeout -k "$KILL_AFTER" "$left" "$DLT" bench --backend cuda --precision "$prec" --arch resnet50 --batch "$batch" \
           --warmup 5 --iters 20 --json "${extra[@]}" 2>>"$OUT/bench.err" | tail -1)
    case $ours in '{'*'"images_per_s"'*) ;; *) ours=null ;; esac
    peer=null
    left=$((t_end - SECONDS - KILL_AFTER))
    if { [ -z "$variant" ] || [ "$variant" = feed ]; } && [ "$left" -ge 15 ]; then
      peer=$(timeout -k "$KILL_AFTER" "$left" "$PY" tests/device/torch_bench.py --precision "$prec" --batch "$batch" --warmup 5 \
             --iters 20 ${variant:+--feed} 2>>"$OUT/bench.err" | tail -1)
      case $peer in '{'*'"images_per_s"'*) ;; *) peer=null ;; esac
    fi
    echo "{\"precision\":\"$prec\",\"batch\":$batch,\"variant\":\"${variant:-plain}\",\"ours\":${ours:-null},\"pytorch\":${peer:-null}}" >>"$OUT/bench.jsonl"
  done
  python3 - "$OUT/bench.jsonl" <<'EOF' | tee "$OUT/bench-table.txt"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
# The peer of each row: PyTorch on the same precision, fed the same way (one batch, or a new batch
# from pinned memory every step for the feed rows).
peer = {(r["precision"], r["variant"] == "feed"): (r.get("pytorch") or {}).get("images_per_s")
        for r in rows if r["variant"] in ("plain", "feed")}
print("%-6s %6s %-7s %12s %16s %8s %10s" % ("prec", "batch", "variant", "dltrain/s", "pytorch/s", "ratio", "ours TF/s"))
for r in rows:
    o = (r.get("ours") or {}).get("images_per_s"); p = peer.get((r["precision"], r["variant"] == "feed"))
    print("%-6s %6d %-7s %12s %16s %8s %10s" % (r["precision"], r["batch"], r["variant"], "%.1f" % o if o else "FAILED",
          "%.1f" % p if p else "peer not measured", "%.2fx" % (o / p) if o and p else "-", "%.1f" % (o * 0.0245) if o else "-"))
print("TFLOP/s at 24.5 GFLOP per training image; MLPerf v4.0 H200 ResNet-50: ~7950 images/s per GPU")
EOF
  if [ ! -s "$OUT/bench.jsonl" ] || grep -q '"ours":null' "$OUT/bench.jsonl"; then bad "some dltrain benchmarks failed or none ran (see $OUT/bench.err)"; fi
  # The verdict: dltrain fp16 against PyTorch eager AMP channels_last, same GPU, same batch.
  verdict=$(python3 - "$OUT/bench.jsonl" "${DLT_BENCH_MIN_RATIO:-1.0}" <<'EOF'
import json, sys
need = float(sys.argv[2])
rows = [json.loads(l) for l in open(sys.argv[1])]
r = next((r for r in rows if r["precision"] == "fp16" and r["variant"] == "plain"), None)
o = ((r or {}).get("ours") or {}).get("images_per_s"); p = ((r or {}).get("pytorch") or {}).get("images_per_s")
if not o:
    print("FAIL dltrain fp16 batch 256 did not run")
elif not p:
    print("NOT MEASURED dltrain fp16 %.1f images/s; PyTorch eager AMP not measured" % o)
else:
    print("%s dltrain fp16 %.1f images/s vs PyTorch eager AMP channels_last %.1f images/s, same GPU and batch 256: "
          "ratio %.2f (pass at >= %.2f)" % ("PASS" if o / p >= need else "FAIL", o, p, o / p, need))
EOF
)
  case $verdict in
    PASS*) ok "bench: $verdict" ;;
    "NOT MEASURED"*) cut=$((cut + 1)); echo "device: bench: $verdict (counted as cut)" ;;
    *) bad "bench: ${verdict:-no verdict}" ;;
  esac
}

run_phase unpack phase_unpack
if [ "${STATUS[unpack]}" != ok ]; then cut=$((cut + ${#PHASES[@]} - 1)); finish; fi
run_phase ops phase_ops
run_phase multi-rank phase_multi_rank
run_phase train-identity phase_train_identity
run_phase train-lowp phase_train_lowp
run_phase train-fp32 phase_train_fp32
run_phase train-fp16 phase_train_fp16
run_phase train-bf16 phase_train_bf16
run_phase bench phase_bench
finish
