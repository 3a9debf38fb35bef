#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# cpu_vs_pytorch.sh [BATCH] [ITERS]: ResNet-50 224x224 training images/s on this CPU, dltrain's
# oneDNN backend against torchvision's resnet50 in PyTorch eager (channels_last, same batch, same
# thread count, SGD step included), fp32 and bf16 (PyTorch: autocast), in one run, with ratios.
# Needs a Python with torch and torchvision: DLT_TORCH_PYTHON (default /opt/torchvenv/bin/python).
set -euo pipefail
B=${1:-32}
ITERS=${2:-4}
HERE=$(cd "$(dirname "$0")" && pwd)
DLTRAIN=${DLT_BUILDDIR:-$HERE/../..}/trainer/dltrain
PY=${DLT_TORCH_PYTHON:-/opt/torchvenv/bin/python}
THREADS=${OMP_NUM_THREADS:-$(nproc)}
export OMP_NUM_THREADS=$THREADS
"$PY" -c 'import torch, torchvision' || { echo "cpu_vs_pytorch: no torch in $PY (pip install torch torchvision)"; exit 77; }

torch_bench() {  # precision
  "$PY" - "$B" "$ITERS" "$THREADS" "$1" <<'PY'
import sys, time, torch, torchvision
b, iters, threads, prec = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
torch.set_num_threads(threads)
torch.manual_seed(0)
m = torchvision.models.resnet50().to(memory_format=torch.channels_last)
opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
x = torch.randn(b, 3, 224, 224).to(memory_format=torch.channels_last)
y = torch.randint(0, 1000, (b,))
lossf = torch.nn.CrossEntropyLoss(label_smoothing=0.1)
def step():
    opt.zero_grad(set_to_none=True)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=(prec == "bf16")):
        loss = lossf(m(x), y)
    loss.backward()
    opt.step()
step()
t = time.perf_counter()
for _ in range(iters):
    step()
print(f"{iters * b / (time.perf_counter() - t):.3f}")
PY
}
ours() { "$DLTRAIN" bench --arch resnet50 --batch "$B" --warmup 1 --iters "$ITERS" --precision "$1" --json | sed -n 's/.*"images_per_s":\([0-9.]*\).*/\1/p'; }

printf '%-10s %-12s %-14s %-14s %s\n' precision batch dltrain_img/s pytorch_img/s ratio
for p in fp32 bf16; do
  o=$(ours $p || echo 0)
  t=$(torch_bench $p || echo 0)
  printf '%-10s %-12s %-14s %-14s %s\n' "$p" "$B" "$o" "$t" "$(awk -v a="$o" -v b="$t" 'BEGIN{ if (b > 0) printf "%.2fx", a/b; else print "n/a" }')"
done
echo "threads: $THREADS; CPU: $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1); torch $("$PY" -c 'import torch; print(torch.__version__)')"
