#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A model of --width other than 1 cannot be loaded by torchvision (its ResNets have no width
# multiplier): `dltrain info` says so for such a model and not for width 1; a training run's
# checkpoint line says so with --verbose and only then, and never for width 1; and, with
# torchvision at hand, the claim itself: torchvision's resnet18 refuses the width-0.25 checkpoint
# and loads the width-1 one strictly.
. "$(dirname "$0")/../slurm/lib.sh"
local_test_start 4
NOTE="a --width 0.25 model: torchvision cannot load its checkpoints (torchvision's resnet18() has no width multiplier, so its channel counts differ); load them with dltrain (eval, --init, --resume)"

out=$("$DLTRAIN" info --arch resnet18 --width 0.25 2>&1); rc=$?
one=$("$DLTRAIN" info --arch resnet18 2>&1); rc1=$?
if ((rc == 0 && rc1 == 0)) && [[ $(tail -1 <<<"$out") == "note: $NOTE" && $one != *"note:"* && $one != *torchvision\ cannot* ]]; then
  ok "info --width 0.25 ends with the note (and width 1 has none): $NOTE"
else not_ok "info's note (rc=$rc/$rc1)"; { echo "$out"; echo "$one"; } | diag; fi

# train W DIR [--verbose]: 2 steps of resnet18 at 32x32 on generated images, a checkpoint at step 2.
train() {
  local w=$1 dir=$2; shift 2
  "$DLTRAIN" train --backend cpu --synthetic --arch resnet18 --width "$w" --image-size 32 --classes 4 --batch 4 \
    --synthetic-size 16 --steps 2 --warmup-epochs 0 --log-every 1 --checkpoint-dir "$dir" --checkpoint-every 2 "$@" 2>&1
}
v=$(train 0.25 "$WORK/w25v" --verbose); rv=$?
q=$(train 0.25 "$WORK/w25"); rq=$?
w1=$(train 1 "$WORK/w1" --verbose); r1=$?
line_v=$(grep -m1 'dltrain: checkpoint .*ckpt-00000002.safetensors' <<<"$v")
line_q=$(grep -m1 'dltrain: checkpoint .*ckpt-00000002.safetensors' <<<"$q")
line_1=$(grep -m1 'dltrain: checkpoint .*ckpt-00000002.safetensors' <<<"$w1")
if ((rv == 0 && rq == 0)) && [[ $line_v == *"(step 2); $NOTE" && $line_q == *"(step 2)" ]]; then
  ok "the checkpoint line with --verbose carries the note; without --verbose it is the plain line"
else not_ok "checkpoint line (rc=$rv/$rq)"; { echo "verbose: $line_v"; echo "default: $line_q"; tail -3 <<<"$v"; } | diag; fi
if ((r1 == 0)) && [[ -n $line_1 && $line_1 == *"(step 2)" ]]; then ok "width 1 with --verbose: no note on the checkpoint line"
else not_ok "width 1 checkpoint line (rc=$r1)"; { echo "$line_1"; tail -3 <<<"$w1"; } | diag; fi

PY=${DLT_TORCH_PYTHON:-/opt/torchvenv/bin/python}
if ! [[ -x $PY ]] || ! "$PY" -c 'import torchvision, safetensors' 2>/dev/null; then
  ok "# SKIP no Python with torchvision and safetensors (DLT_TORCH_PYTHON) to load the checkpoints into"
else
  got=$(OMP_NUM_THREADS=2 "$PY" - "$WORK/w25/ckpt-00000002.safetensors" "$WORK/w1/ckpt-00000002.safetensors" <<'PYEOF' 2>&1
import sys
import torchvision
from safetensors.torch import load_file
for path in sys.argv[1:]:
    m = torchvision.models.resnet18(num_classes=4)
    try:
        m.load_state_dict(load_file(path), strict=True)
        print("loaded")
    except RuntimeError as e:
        print("refused: " + str(e).splitlines()[1].strip() if len(str(e).splitlines()) > 1 else "refused")
PYEOF
  )
  if [[ $(sed -n 1p <<<"$got") == refused:*"size mismatch"* && $(sed -n 2p <<<"$got") == loaded ]]; then
    ok "torchvision's resnet18 refuses the width-0.25 checkpoint (${got%%$'\n'*}) and loads the width-1 one"
  else not_ok "torchvision loading the checkpoints"; echo "$got" | diag; fi
fi
exit 0
