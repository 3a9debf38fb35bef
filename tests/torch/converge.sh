#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Convergence on real images against PyTorch (tests/torch/converge.py): scikit-learn's digits, the
# same recipe for a half-width ResNet-18 in dltrain and in a torchvision-style reference loop, the
# mean final validation top-1 over seeds 1 and 2 within 1.5 points; dltrain's runs and PyTorch's run
# side by side, one thread each. Needs DLT_TORCH_PYTHON with torch, torchvision and scikit-learn
# (contrib/install-torch.sh); skipped without.
. "$(dirname "$0")/../slurm/lib.sh"
PY=${DLT_TORCH_PYTHON:-/opt/torchvenv/bin/python}
DLTRAIN=$DLT_BUILDDIR/trainer/dltrain
[[ -x $DLTRAIN ]] || skip_all "dltrain not built"
[[ ${DLT_DISTCHECK_LIGHT:-} ]] && skip_all "DLT_DISTCHECK_LIGHT: .ci/run's make check ran the 12-epoch comparison on the same sources"
[[ -x $PY ]] && "$PY" -c 'import torch, torchvision, sklearn, PIL' 2>/dev/null ||
  skip_all "no Python with torch, torchvision and scikit-learn (set DLT_TORCH_PYTHON; contrib/install-torch.sh)"
[[ ${DLT_SANITIZED:-} ]] && skip_all "sanitizer build: the non-sanitized build runs the 12-epoch comparison"
rm -rf "${WORK:?}"/*
timeout 1200 "$PY" "$DLT_SRCDIR/tests/torch/converge.py" "$DLTRAIN" "$WORK"
