#!/usr/bin/env bash
# dltrain against PyTorch on the same tensors (tests/torch/parity.py). Needs a Python with torch,
# torchvision and safetensors: DLT_TORCH_PYTHON (default /opt/torchvenv/bin/python; .ci/run installs
# one). Without it the test is skipped, saying so.
. "$(dirname "$0")/../slurm/lib.sh"
PY=${DLT_TORCH_PYTHON:-/opt/torchvenv/bin/python}
DLTRAIN=$DLT_BUILDDIR/trainer/dltrain
DUMP=$DLT_BUILDDIR/tests/torch/forward_dump
[[ -x $DLTRAIN && -x $DUMP ]] || skip_all "dltrain or tests/torch/forward_dump not built"
[[ -x $PY ]] && "$PY" -c 'import torch, torchvision, safetensors, numpy' 2>/dev/null ||
  skip_all "no Python with torch, torchvision, safetensors and numpy (set DLT_TORCH_PYTHON; .ci/run installs one)"
rm -rf "${WORK:?}"/*
OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} timeout 900 "$PY" "$DLT_SRCDIR/tests/torch/parity.py" forward "$DLTRAIN" "$DUMP" "$WORK"
