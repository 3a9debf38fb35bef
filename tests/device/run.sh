#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/device/run.sh: everything that needs a GPU, as one script for a lent GPU machine, inside a
# global deadline (default 540 s, DLT_DEVICE_DEADLINE): phases that would start past it are not
# started, a running phase is cut at it, and the table of what ran (status and seconds of each
# phase) is printed whatever happens. The log and JSON results go under $OUT (default
# /tmp/dlt-device).
#   unpack/build  .devpack/ made here by tests/device/pack.sh (the GPU machine has no Slurm, PMIx,
#                 oneDNN headers), else a build in place
#   nccl          nccl_check: a blocking NCCL communicator bootstrapped by libdltpmix, exact all-reduce
#   ops           cuda_ops_check: every CUDA op against the CPU backend in fp32, tf32, fp16, bf16
#                 (the math type cuDNN's Find chose per direction, the Ex batch norm, fused
#                 BN+add+ReLU in fp16 and bf16, the stem padded to 4 channels, KRSC weights read
#                 in place or through the optimizer's low-precision twin, the flat sgd_step over
#                 three segments, its skip rule and its one launch (a CUDA graph of one node),
#                 the step results on the device, the input staging ring, the device checksum)
#   train-*       ResNet-50 on one fixed batch through the full path (--comm nccl: bucketed
#                 all-reduce during backward): the loss must fall (fp32, fp16, bf16); fp32 through
#                 NCCL buckets and as a CUDA graph repeats the single-rank losses bit for bit; fp16
#                 with --allreduce-lowp must differ from fp16 with fp32 reduction (proof that SGD
#                 read the round-tripped gradients: a one-rank in-place sum changes nothing, only
#                 the precision round trip shows whether a bucket was read after its reduction)
#                 yet stay within 2% of it
#   bench         dltrain bench vs torchvision ResNet-50 in PyTorch eager (channels_last, AMP) at
#                 the same batch, same run; fp16 also with --cuda-graphs and with --stem-pad off;
#                 fp16/bf16 also with --feed (a new batch every step through the input path) against
#                 PyTorch fed from pinned memory (torch_bench.py --feed)
# Options: --dry-run (print the phases and the deadline, run nothing), --ranks N (a machine with N
# GPUs: the NCCL and training phases also run N ranks through $DLT_LAUNCH, default
# "srun -n N --mpi=pmix"). A one-GPU machine cannot run two NCCL ranks (NCCL refuses two ranks on
# one device: "Duplicate GPU detected"), so there the multi-rank paths run as one rank.
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
DEADLINE=${DLT_DEVICE_DEADLINE:-540}
mkdir -p "$OUT"
LOG=$OUT/device-run.log
exec > >(tee "$LOG") 2>&1
START=$SECONDS

# Phases in order of importance: name, the seconds it needs at least to be worth starting, its cap.
PHASES=(
  "unpack 5 120" "nccl 10 60" "ops 30 150"
  "train-identity 40 120" "train-lowp 30 90" "train-fp32 20 60" "train-fp16 20 60" "train-bf16 20 60"
  "bench 60 240"
)
echo "device: deadline ${DEADLINE} s for all phases; ranks ${RANKS}"
if [ "$DRY" = 1 ]; then
  for p in "${PHASES[@]}"; do read -r n lo hi <<<"$p"; echo "device: phase $n (starts with >= ${lo} s left, at most ${hi} s)"; done
  [ "$RANKS" -gt 1 ] || echo "device: one rank: NCCL refuses two ranks on one GPU, so multi-rank paths run as one rank here (--ranks N on a machine with N GPUs)"
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
  echo "device: $passed passed, $failed failed, $cut phase(s) not run (deadline) in $((SECONDS - START)) s of ${DEADLINE} s (log: $LOG)"
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
  "$fn"
  ELAPSED[$name]=$((SECONDS - t0))
  if [ "$failed" -gt "$f0" ]; then STATUS[$name]=FAIL; else STATUS[$name]=ok; fi
}
# What a command may still take in this phase (timeout's argument).
tmo() { local t=$((PHASE_END - SECONDS)); echo $((t > 1 ? t : 1)); }
# One rank, or RANKS ranks through the launcher.
LAUNCH=()
if [ "$RANKS" -gt 1 ]; then read -r -a LAUNCH <<<"${DLT_LAUNCH:-srun -n $RANKS --mpi=pmix}"; fi

phase_unpack() {
  if [ -f .devpack/dltrain-device.tar.gz ]; then
    PK=/tmp/dlt-devpack; rm -rf "$PK"; mkdir -p "$PK"
    tar -xzf .devpack/dltrain-device.tar.gz -C "$PK"
    # CUDA 13 libraries: the toolkit's and those of PyTorch's nvidia-* wheels (cuDNN, NCCL, cuBLAS).
    NV=$(python3 -c 'import glob, os, nvidia
print(":".join(sorted({os.path.dirname(p) for d in nvidia.__path__ for p in glob.glob(os.path.join(d, "**", "lib*.so*"), recursive=True)})))' 2>/dev/null || true)
    export LD_LIBRARY_PATH=$PK/lib${NV:+:$NV}:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    DLT=$PK/bin/dltrain OPS=$PK/bin/cuda_ops_check NCCLCHK=$PK/bin/nccl_check
    local missing; missing=$(ldd "$DLT" "$OPS" "$NCCLCHK" | grep "not found" | sort -u)
    if [ -n "$missing" ]; then bad "packed programs miss libraries:"; echo "$missing"; return; fi
    ok "unpacked the build of commit $(cat "$PK/COMMIT" 2>/dev/null)"
  elif { [ -x configure ] || ./autogen.sh >/dev/null; } &&
       { [ -f Makefile ] || ./configure --enable-werror >"$OUT/configure.log" 2>&1; } &&
       timeout "$(tmo)" make -j"$(nproc)" >"$OUT/make.log" 2>&1 &&
       timeout "$(tmo)" make -j"$(nproc)" tests/device/nccl_check tests/device/cuda_ops_check >>"$OUT/make.log" 2>&1; then
    DLT=./trainer/dltrain OPS=./tests/device/cuda_ops_check NCCLCHK=./tests/device/nccl_check
    ok "build"
  else
    bad "build (see $OUT/configure.log, $OUT/make.log; without the packages of contrib/install-deps.sh, run tests/device/pack.sh beforehand and carry .devpack)"
    tail -20 "$OUT/make.log" 2>/dev/null || tail -20 "$OUT/configure.log"
  fi
}

phase_nccl() {
  if timeout "$(tmo)" "${LAUNCH[@]}" "$NCCLCHK"; then ok "nccl_check ($RANKS rank(s))"; else bad "nccl_check"; fi
}

phase_ops() {
  if timeout "$(tmo)" "$OPS" | tee "$OUT/cuda_ops_check.txt" && ! grep -q SKIP "$OUT/cuda_ops_check.txt"; then
    ok "cuda_ops_check ($(tail -1 "$OUT/cuda_ops_check.txt"))"
  else
    bad "cuda_ops_check ($(grep -c '^FAIL' "$OUT/cuda_ops_check.txt") failing checks)"
  fi
}

train() { # precision comm steps metrics-file [extra options]
  local p=$1 c=$2 n=$3 m=$4; shift 4
  rm -f "$m"
  timeout "$(tmo)" "${LAUNCH[@]}" "$DLT" train --backend cuda --precision "$p" --comm "$c" --arch resnet50 --batch 64 \
    --synthetic-size $((64 * RANKS)) --steps "$n" --log-every 5 --warmup-epochs 0 --milestones 100000 --lr 0.4 \
    --check-every 0 --stall-timeout 120 --bucket-mib 4 --metrics "$m" "$@"
}
losses() { python3 -c 'import json,sys; print(" ".join("%.6f" % json.loads(l)["loss"] for l in open(sys.argv[1])))' "$1"; }

# Same losses, bit for bit, with deterministic cuDNN algorithms: one rank plain, through NCCL
# buckets, and replayed as a CUDA graph (one rank: the sum over one rank is the identity).
phase_train_identity() {
  if train fp32 single 10 "$OUT/id-single.jsonl" --deterministic >"$OUT/id-single.log" 2>&1 &&
     train fp32 nccl 10 "$OUT/id-nccl.jsonl" --deterministic >"$OUT/id-nccl.log" 2>&1 &&
     train fp32 nccl 10 "$OUT/id-graph.jsonl" --deterministic --cuda-graphs >"$OUT/id-graph.log" 2>&1; then
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
  if train fp16 nccl 10 "$OUT/lowp-off.jsonl" --deterministic >"$OUT/lowp-off.log" 2>&1 &&
     train fp16 nccl 10 "$OUT/lowp-on.jsonl" --deterministic --allreduce-lowp >"$OUT/lowp-on.log" 2>&1; then
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
  if train "$p" nccl "$n" "$m" "$@" >"$OUT/train-$run.log" 2>&1; then
    read -r -a L <<<"$(losses "$m")"
    if python3 -c "import sys; a,b=float(sys.argv[1]),float(sys.argv[2]); sys.exit(0 if b < 0.7*a else 1)" "${L[0]}" "${L[-1]}"; then
      ok "ResNet-50 $run $n steps on one batch: loss ${L[0]} -> ${L[-1]} $(grep -o 'loss-scale [^ ]* skipped [0-9]*' "$OUT/train-$run.log" | tail -1)"
    else bad "ResNet-50 $run: loss did not fall (${L[*]})"; fi
  else
    bad "ResNet-50 $run training run failed:"; tail -5 "$OUT/train-$run.log"
  fi
}
phase_train_fp32() { falls fp32 fp32 30; }
phase_train_fp16() { falls fp16-graphs fp16 30 --cuda-graphs; }
phase_train_bf16() { falls bf16 bf16 30; }

phase_bench() {
  local configs prec batch variant extra ours peer PY=${DLT_TORCH_PYTHON:-python3} t_end
  if [ "${DLT_DEVICE_QUICK:-0}" = 1 ]; then configs="fp16:256 fp16:256:feed fp16:256:graphs fp32:128"
  else configs="fp16:256 fp16:256:feed fp16:256:graphs fp16:256:nopad bf16:256 bf16:256:feed fp32:128 tf32:128"; fi
  : >"$OUT/bench.jsonl"
  t_end=$PHASE_END
  for cfg in $configs; do
    IFS=: read -r prec batch variant <<<"$cfg"
    if [ $((t_end - SECONDS)) -lt 25 ]; then echo "device: bench $cfg not started: deadline"; continue; fi
    extra=()
    case $variant in graphs) extra=(--cuda-graphs) ;; nopad) extra=(--stem-pad off) ;; feed) extra=(--feed) ;; esac
    ours=$(timeout $((t_end - SECONDS)) "$DLT" bench --backend cuda --precision "$prec" --arch resnet50 --batch "$batch" \
           --warmup 5 --iters 20 --json "${extra[@]}" 2>>"$OUT/bench.err" | tail -1)
    peer=null
    if { [ -z "$variant" ] || [ "$variant" = feed ]; } && [ $((t_end - SECONDS)) -ge 20 ]; then
      peer=$(timeout $((t_end - SECONDS)) "$PY" tests/device/torch_bench.py --precision "$prec" --batch "$batch" --warmup 5 \
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
  if grep -q '"ours":null' "$OUT/bench.jsonl" || [ ! -s "$OUT/bench.jsonl" ]; then bad "some dltrain benchmarks failed or none ran (see $OUT/bench.err)"; else ok "benchmarks ran"; fi
}

run_phase unpack phase_unpack
if [ "${STATUS[unpack]}" != ok ]; then cut=$((cut + ${#PHASES[@]} - 1)); finish; fi
run_phase nccl phase_nccl
run_phase ops phase_ops
run_phase train-identity phase_train_identity
run_phase train-lowp phase_train_lowp
run_phase train-fp32 phase_train_fp32
run_phase train-fp16 phase_train_fp16
run_phase train-bf16 phase_train_bf16
run_phase bench phase_bench
finish
