#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# dltrain against PyTorch on the same tensors (tests/torch/parity.py): forward parity of our
# checkpoints in torchvision, and 20 training steps from the same weights on the same batch, in fp32 and
# in bf16 (against PyTorch's CPU autocast). Needs a Python with torch,
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
mkdir -p "$WORK/fwd" "$WORK/train" "$WORK/train-bf16"
# Three parts, one TAP stream: forward parity (2 tests), training parity (2 tests), training parity
# in bf16 against PyTorch's CPU autocast (2 tests; skipped on a CPU without AVX512-BF16 or AMX).
echo "1..6"
OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} timeout 900 "$PY" "$DLT_SRCDIR/tests/torch/parity.py" forward "$DLTRAIN" "$DUMP" "$WORK/fwd" |
  grep -v '^1\.\.'
OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} timeout 900 "$PY" "$DLT_SRCDIR/tests/torch/parity.py" train "$DLTRAIN" "$WORK/train" |
  grep -v '^1\.\.' | sed 's/^\(ok\|not ok\) \([12]\) /\1 X\2 /; s/^\(ok\|not ok\) X1 /\1 3 /; s/^\(ok\|not ok\) X2 /\1 4 /'
OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} timeout 900 "$PY" "$DLT_SRCDIR/tests/torch/parity.py" train-bf16 "$DLTRAIN" "$WORK/train-bf16" |
  grep -v '^1\.\.' | sed 's/^\(ok\|not ok\) \([12]\) /\1 X\2 /; s/^\(ok\|not ok\) X1 /\1 5 /; s/^\(ok\|not ok\) X2 /\1 6 /'
exit 0
