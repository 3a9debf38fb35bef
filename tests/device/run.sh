#!/usr/bin/env bash
# tests/device/run.sh: everything that needs a GPU, as one script for a lent GPU machine (fits in
# 8 minutes on one H100/H200; the log and JSON results go under $OUT, default /tmp/dlt-device).
#   1. build (configure picks the GPU architectures from nvcc), or unpack .devpack/ made here
#      beforehand by tests/device/pack.sh (the GPU machine has no Slurm/PMIx/oneDNN headers)
#   2. nccl_check: NCCL communicator bootstrapped by libdltpmix, exact all-reduce, bandwidth
#   3. cuda_ops_check: every CUDA op against the CPU backend in fp32, tf32, fp16, bf16
#   4. training: 50 steps of ResNet-50 on one fixed synthetic batch in fp32 and fp16 through the
#      full path (--comm nccl: bucketed all-reduce during backward, loss scaling): the loss must
#      fall; and fp32 with NCCL buckets must repeat the single-rank loss sequence exactly
#   5. benchmark: `dltrain bench` ResNet-50 224x224 synthetic vs torchvision ResNet-50 in PyTorch
#      eager (channels_last, AMP) at the same batch, same run: images/s, ratio, TFLOP/s at 24.5
#      GFLOP per image, and the fp16 / fp32 speed-up
# Without a GPU it says so and exits 0 (skipped). Set DLT_DEVICE_QUICK=1 for one batch size.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/dlt-device}
mkdir -p "$OUT"
LOG=$OUT/device-run.log
exec > >(tee "$LOG") 2>&1
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "device: SKIP: no GPU visible (nvidia-smi -L failed)"
  exit 0
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
passed=0 failed=0
ok() { passed=$((passed + 1)); echo "device: ok   $*"; }
bad() { failed=$((failed + 1)); echo "device: FAIL $*"; }
finish() { echo "device: $passed passed, $failed failed (log: $LOG)"; [ "$failed" -eq 0 ]; exit $?; }

# ---- 1. build, or unpack what tests/device/pack.sh built (a bare GPU machine has no Slurm, PMIx,
# oneDNN or libjpeg-turbo headers to build with)
t0=$SECONDS
if [ -f .devpack/dltrain-device.tar.gz ]; then
  PK=/tmp/dlt-devpack; rm -rf "$PK"; mkdir -p "$PK"
  tar -xzf .devpack/dltrain-device.tar.gz -C "$PK"
  # CUDA 13 libraries: the toolkit's and those of PyTorch's nvidia-* wheels (cuDNN, NCCL, cuBLAS).
  NV=$(python3 -c 'import glob, os, nvidia
print(":".join(sorted({os.path.dirname(p) for d in nvidia.__path__ for p in glob.glob(os.path.join(d, "**", "lib*.so*"), recursive=True)})))' 2>/dev/null || true)
  export LD_LIBRARY_PATH=$PK/lib${NV:+:$NV}:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  DLT=$PK/bin/dltrain OPS=$PK/bin/cuda_ops_check NCCLCHK=$PK/bin/nccl_check
  missing=$(ldd "$DLT" "$OPS" "$NCCLCHK" | grep "not found" | sort -u)
  if [ -n "$missing" ]; then bad "packed programs miss libraries:"; echo "$missing"; finish; fi
  ok "unpacked the build of commit $(cat "$PK/COMMIT" 2>/dev/null) in $((SECONDS - t0)) s"
elif { [ -x configure ] || ./autogen.sh >/dev/null; } &&
     { [ -f Makefile ] || ./configure --enable-werror >"$OUT/configure.log" 2>&1; } &&
     make -j"$(nproc)" >"$OUT/make.log" 2>&1 &&
     make -j"$(nproc)" tests/device/nccl_check tests/device/cuda_ops_check >>"$OUT/make.log" 2>&1; then
  DLT=./trainer/dltrain OPS=./tests/device/cuda_ops_check NCCLCHK=./tests/device/nccl_check
  ok "build in $((SECONDS - t0)) s"
else
  bad "build (see $OUT/configure.log, $OUT/make.log; without the packages of contrib/install-deps.sh, run tests/device/pack.sh beforehand and carry .devpack)"
  tail -20 "$OUT/make.log" 2>/dev/null || tail -20 "$OUT/configure.log"
  finish
fi

# ---- 2. NCCL through dltpmix
if timeout 120 "$NCCLCHK"; then ok "nccl_check"; else bad "nccl_check"; fi

# ---- 3. every op against the CPU backend
if timeout 240 "$OPS" | tee "$OUT/cuda_ops_check.txt" && ! grep -q SKIP "$OUT/cuda_ops_check.txt"; then
  ok "cuda_ops_check ($(tail -1 "$OUT/cuda_ops_check.txt"))"
else
  bad "cuda_ops_check ($(grep -c '^FAIL' "$OUT/cuda_ops_check.txt") failing checks)"
fi

# ---- 4. training on a fixed batch
train() { # precision comm steps metrics-file [extra options]
  local p=$1 c=$2 n=$3 m=$4; shift 4
  timeout 180 "$DLT" train --backend cuda --precision "$p" --comm "$c" --arch resnet50 --batch 64 \
    --synthetic-size 64 --steps "$n" --log-every 5 --warmup-epochs 0 --milestones 100000 --lr 0.4 \
    --check-every 0 --stall-timeout 120 --bucket-mib 4 --metrics "$m" "$@"
}
losses() { python3 -c 'import json,sys; print(" ".join("%.6f" % json.loads(l)["loss"] for l in open(sys.argv[1])))' "$1"; }
for run in fp32 fp16 fp16-graphs; do
  prec=${run%%-*} extra=(); [[ $run == *graphs ]] && extra=(--cuda-graphs)
  m=$OUT/train-$run.jsonl; rm -f "$m"
  if train "$prec" nccl 50 "$m" "${extra[@]}" >"$OUT/train-$run.log" 2>&1; then
    read -r -a L <<<"$(losses "$m")"
    if python3 -c "import sys; a,b=float(sys.argv[1]),float(sys.argv[2]); sys.exit(0 if b < 0.7*a else 1)" "${L[0]}" "${L[-1]}"; then
      ok "ResNet-50 $run 50 steps on one batch: loss ${L[0]} -> ${L[-1]} ($(grep -o 'loss-scale [^ ]* skipped [0-9]*' "$OUT/train-$run.log" | tail -1))"
    else
      bad "ResNet-50 $run: loss did not fall (${L[*]})"
    fi
  else
    bad "ResNet-50 $run training run failed:"; tail -5 "$OUT/train-$run.log"
  fi
done
# Same losses, bit for bit, with deterministic cuDNN algorithms: one rank plain, through NCCL
# buckets, and replayed as a CUDA graph.
rm -f "$OUT"/id-*.jsonl
if train fp32 single 10 "$OUT/id-single.jsonl" --deterministic >"$OUT/id-single.log" 2>&1 &&
   train fp32 nccl 10 "$OUT/id-nccl.jsonl" --deterministic >"$OUT/id-nccl.log" 2>&1 &&
   train fp32 nccl 10 "$OUT/id-graph.jsonl" --deterministic --cuda-graphs >"$OUT/id-graph.log" 2>&1; then
  a=$(losses "$OUT/id-single.jsonl") b=$(losses "$OUT/id-nccl.jsonl") g=$(losses "$OUT/id-graph.jsonl")
  if [ "$a" = "$b" ]; then ok "fp32 with NCCL buckets repeats the single-rank losses exactly ($a)"
  else bad "fp32 NCCL-bucket losses ($b) differ from single-rank ($a)"; fi
  if [ "$a" = "$g" ]; then ok "fp32 replayed as a CUDA graph repeats them too"
  else bad "fp32 CUDA-graph losses ($g) differ from plain ($a)"; fi
else
  bad "identity runs failed"; tail -3 "$OUT"/id-*.log
fi

# ---- 5. benchmark against PyTorch eager, same machine, same run
if [ "${DLT_DEVICE_QUICK:-0}" = 1 ]; then CONFIGS="fp32:128 fp16:256 fp16:256:graphs"
else CONFIGS="fp32:128 tf32:128 fp16:256 fp16:256:graphs bf16:256"; fi
PY=${DLT_TORCH_PYTHON:-python3}
: >"$OUT/bench.jsonl"
for cfg in $CONFIGS; do
  IFS=: read -r prec batch graphs <<<"$cfg"
  extra=() g=false; [ -n "$graphs" ] && extra=(--cuda-graphs) g=true
  ours=$(timeout 150 "$DLT" bench --backend cuda --precision "$prec" --arch resnet50 --batch "$batch" \
         --warmup 5 --iters 20 --json "${extra[@]}" 2>>"$OUT/bench.err" | tail -1)
  peer=$(timeout 150 "$PY" tests/device/torch_bench.py --precision "$prec" --batch "$batch" --warmup 5 --iters 20 \
         2>>"$OUT/bench.err" | tail -1)
  echo "{\"precision\":\"$prec\",\"batch\":$batch,\"graphs\":$g,\"ours\":${ours:-null},\"pytorch\":${peer:-null}}" >>"$OUT/bench.jsonl"
done
python3 - "$OUT/bench.jsonl" <<'EOF' | tee "$OUT/bench-table.txt"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("%-6s %6s %6s %12s %12s %8s %10s %10s" % ("prec", "batch", "graphs", "dltrain/s", "pytorch/s", "ratio", "ours TF/s", "torch TF/s"))
best = {}
for r in rows:
    o = (r.get("ours") or {}).get("images_per_s"); p = (r.get("pytorch") or {}).get("images_per_s")
    f = lambda v, fmt: (fmt % v) if v else "-"
    print("%-6s %6d %6s %12s %12s %8s %10s %10s" % (r["precision"], r["batch"], "yes" if r["graphs"] else "no", f(o, "%.1f"), f(p, "%.1f"),
          f(o / p if o and p else None, "%.2fx"), f(o * 0.0245 if o else None, "%.1f"), f(p * 0.0245 if p else None, "%.1f")))
    if o: best[r["precision"]] = max(best.get(r["precision"], 0), o)
if best.get("fp16") and best.get("fp32"):
    print("fp16 / fp32 speed-up (best batch each): %.2fx (goal >= 2.5x)" % (best["fp16"] / best["fp32"]))
print("TFLOP/s at 24.5 GFLOP per training image; MLPerf v4.0 H200 ResNet-50: ~7950 images/s per GPU")
EOF
if grep -q '"ours":null' "$OUT/bench.jsonl"; then bad "some dltrain benchmarks failed (see $OUT/bench.err)"; else ok "benchmarks ran"; fi
finish
