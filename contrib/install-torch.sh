#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs the Python that the PyTorch comparisons use (tests/torch, tests/local/model.sh,
# tests/bench/cpu_vs_pytorch.sh): a venv at ${DLT_TORCH_VENV:-/opt/torchvenv} with pinned torch,
# torchvision, safetensors, scikit-learn (whose digits are the real images of the convergence
# check), tensorboard (whose event reader checks --tensorboard files) and numpy from PyPI. Idempotent: an existing venv with these versions is
# kept. The tests find it as DLT_TORCH_PYTHON (default /opt/torchvenv/bin/python).
set -euo pipefail
VENV=${DLT_TORCH_VENV:-/opt/torchvenv}
PINS=(torch==2.15.0 torchvision==0.29.2 safetensors==0.8.0 scikit-learn==1.9.1 tensorboard==2.21.0 numpy)
if [ -x "$VENV/bin/python" ] &&
   "$VENV/bin/python" -c 'import torch, torchvision, safetensors, sklearn, numpy, tensorboard; assert torch.__version__.startswith("2.15.0") and torchvision.__version__.startswith("0.29.2") and tensorboard.__version__ == "2.21.0"' 2>/dev/null; then
  echo "install-torch: $VENV has torch $("$VENV/bin/python" -c 'import torch; print(torch.__version__)')"
  exit 0
fi
command -v python3 >/dev/null || { echo "install-torch: python3 missing (contrib/install-deps.sh)"; exit 1; }
python3 -m venv "$VENV" 2>/dev/null || { apt-get install -y -q python3-venv >/dev/null && python3 -m venv "$VENV"; }
"$VENV/bin/pip" install -q --disable-pip-version-check "${PINS[@]}"
"$VENV/bin/python" -c 'import torch, torchvision; print("install-torch: torch", torch.__version__, "torchvision", torchvision.__version__)'
