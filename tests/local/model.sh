#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The model and the training loop, end to end on one rank: parameter counts and FLOPs against
# torchvision's published figures, the checkpoint's tensor names/shapes against a fixture written
# from torchvision, learning a small synthetic task, bit-identical resume, refusal of damaged
# checkpoints, and (when PyTorch is installed) torchvision loading our checkpoint.
. "$(dirname "$0")/../slurm/lib.sh"
DLTRAIN=$DLT_BUILDDIR/trainer/dltrain
FIX=$DLT_SRCDIR/tests/fixtures
[[ -x $DLTRAIN ]] || skip_all "dltrain not built"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
tap_plan 16
# Published by torchvision (models' documentation): parameters and GFLOPS at 224x224, 1000 classes.
for row in "resnet18 11689512 1.81" "resnet34 21797672 3.66" "resnet50 25557032 4.09" "resnet101 44549160 7.80" "resnet152 60192808 11.51"; do
  set -- $row
  out=$("$DLTRAIN" info --arch "$1")
  got_p=$(sed -n 's/.* layers, \([0-9]*\) parameters.*/\1/p' <<<"$out")
  got_f=$(sed -n 's/.* parameters, \([0-9.]*\) GFLOPs.*/\1/p' <<<"$out")
  if [[ $got_p == "$2" ]] && awk -v a="$got_f" -v b="$3" 'BEGIN{exit !((a-b)/b < 0.01 && (b-a)/b < 0.01)}'; then ok "$1: $got_p parameters, $got_f GFLOPs (torchvision: $2, $3)"; else not_ok "$1 counts"; echo "$out" | diag; fi
done
for arch in resnet50 resnet18; do
  want=$(grep -v '^#' "$FIX/torchvision_${arch}_state_dict.txt" | awk '{$2=""; print}' | tr -s ' ' | sort)
  got=$("$DLTRAIN" info --arch $arch --state-dict | grep -v ' layers, ' | tr -s ' ' | sort)
  if [[ -n $want && $got == "$want" ]]; then ok "$arch checkpoint tensors: $(wc -l <<<"$got") names and shapes equal torchvision's state_dict"; else not_ok "$arch state dict vs torchvision"; diff <(echo "$want") <(echo "$got") | head -10 | diag; fi
done

SMALL=(--arch resnet18 --width 0.25 --image-size 32 --classes 4 --batch 16 --synthetic --synthetic-size 512 --warmup-epochs 0 --lr 0.8 --label-smoothing 0 --seed 3)
rm -rf "$WORK"/ck "$WORK"/ck2 "$WORK"/ck3 "$WORK"/tv "$WORK"/*.jsonl
out=$(timeout 600 "$DLTRAIN" train "${SMALL[@]}" --epochs 3 --log-every 8 --metrics "$WORK/full.jsonl" --checkpoint-dir "$WORK/ck" --checkpoint-every 40 2>&1); rc=$?
last=$(grep '"images_per_s"' "$WORK/full.jsonl" 2>/dev/null | tail -1) # the step lines (events are other lines)
acc=$(sed -n 's/.*"top1":\([0-9.]*\).*/\1/p' <<<"$last")
if ((rc == 0)) && awk -v a="$acc" 'BEGIN{exit !(a >= 0.9)}'; then ok "a small ResNet-18 learns the synthetic task: top-1 $acc after 96 steps"; else not_ok "learning (rc=$rc, top1=$acc)"; echo "$out" | tail -5 | diag; fi
first=$(grep '"images_per_s"' "$WORK/full.jsonl" | head -1 | sed -n 's/.*"loss":\([0-9.]*\).*/\1/p'); lastl=$(sed -n 's/.*"loss":\([0-9.]*\).*/\1/p' <<<"$last")
if awk -v a="$first" -v b="$lastl" 'BEGIN{exit !(b < a / 4)}'; then ok "loss falls: $first -> $lastl"; else not_ok "loss falls ($first -> $lastl)"; fi

out=$(timeout 600 "$DLTRAIN" eval "${SMALL[@]}" --eval-size 256 --checkpoint "$WORK/ck/ckpt-00000096.safetensors" 2>&1); rc=$?
t1=$(sed -n 's/.*top-1 \([0-9.]*\).*/\1/p' <<<"$out")
if ((rc == 0)) && awk -v a="$t1" 'BEGIN{exit !(a >= 0.9)}'; then ok "eval on held-out synthetic images: top-1 $t1"; else not_ok "eval (rc=$rc)"; echo "$out" | diag; fi

# Resume from step 40: the losses after it must equal the uninterrupted run's, digit for digit.
cp -r "$WORK/ck" "$WORK/ck2"; rm -f "$WORK"/ck2/ckpt-00000080* "$WORK"/ck2/ckpt-00000096*
out=$(timeout 600 "$DLTRAIN" train "${SMALL[@]}" --epochs 3 --log-every 8 --metrics "$WORK/resumed.jsonl" --checkpoint-dir "$WORK/ck2" --resume auto 2>&1); rc=$?
a=$(grep -E '"step":(48|56|64|72|80|88|96),' "$WORK/full.jsonl" | sed 's/.*"loss":\([0-9.]*\).*/\1/')
b=$(grep -E '"step":(48|56|64|72|80|88|96),' "$WORK/resumed.jsonl" | sed 's/.*"loss":\([0-9.]*\).*/\1/')
if ((rc == 0)) && [[ $out == *"resumed from $WORK/ck2/ckpt-00000040.safetensors at step 40"* && -n $a && $a == "$b" ]]; then ok "--resume auto from step 40 repeats the uninterrupted loss sequence exactly ($(wc -l <<<"$a") log points)"; else not_ok "bit-identical resume (rc=$rc)"; { echo "$out" | tail -3; paste <(echo "$a") <(echo "$b"); } | diag; fi
if cmp -s "$WORK/ck/ckpt-00000096.safetensors" "$WORK/ck2/ckpt-00000096.safetensors"; then ok "resumed and uninterrupted runs end with byte-identical checkpoints"; else not_ok "final checkpoints differ"; fi

# Damage the newest checkpoint: it is refused by name and reason, auto-resume falls back to the previous one.
cp -r "$WORK/ck" "$WORK/ck3"
truncate -s 100000 "$WORK/ck3/ckpt-00000096.safetensors"
out=$(timeout 60 "$DLTRAIN" eval "${SMALL[@]}" --eval-size 64 --checkpoint "$WORK/ck3/ckpt-00000096.safetensors" 2>&1); rc=$?
if ((rc != 0)) && [[ $out == *"truncated"* ]]; then ok "a truncated checkpoint is refused, saying so"; else not_ok "truncated checkpoint (rc=$rc)"; echo "$out" | diag; fi
out=$(timeout 600 "$DLTRAIN" train "${SMALL[@]}" --epochs 3 --steps 81 --log-every 0 --checkpoint-dir "$WORK/ck3" --resume auto 2>&1); rc=$?
if ((rc == 0)) && [[ $out == *"skipping checkpoint $WORK/ck3/ckpt-00000096.safetensors"* && $out == *"resumed from $WORK/ck3/ckpt-00000080.safetensors"* ]]; then ok "--resume auto skips the damaged newest checkpoint and uses the previous one"; else not_ok "fallback to previous checkpoint (rc=$rc)"; echo "$out" | diag; fi
printf 'not a checkpoint at all' > "$WORK/foreign.safetensors"
out=$(timeout 60 "$DLTRAIN" eval "${SMALL[@]}" --eval-size 64 --checkpoint "$WORK/foreign.safetensors" 2>&1); rc=$?
out2=$(timeout 60 "$DLTRAIN" eval --arch resnet18 --width 0.5 --image-size 32 --classes 4 --batch 16 --eval-size 64 --checkpoint "$WORK/ck/ckpt-00000096.safetensors" 2>&1); rc2=$?
if ((rc != 0 && rc2 != 0)) && [[ $out == *"header length"* && $out2 == *"--width 0.5, but the checkpoint was trained with width 0.25"* ]]; then ok "a foreign file and a checkpoint of another width are refused with the mismatch named"; else not_ok "foreign checkpoint refusal"; { echo "$out"; echo "$out2"; } | diag; fi

PY=${DLT_TORCH_PYTHON:-/opt/torchvenv/bin/python}
if [[ -x $PY ]] && "$PY" -c 'import torch, torchvision, safetensors' 2>/dev/null; then
  timeout 600 "$DLTRAIN" train --arch resnet18 --image-size 32 --classes 10 --batch 4 --synthetic-size 8 --epochs 1 --log-every 0 --checkpoint-dir "$WORK/tv" >/dev/null 2>&1
  out=$("$PY" - "$WORK/tv/ckpt-00000002.safetensors" <<'PY' 2>&1
import sys, torch, torchvision
from safetensors.torch import load_file
m = torchvision.models.resnet18(num_classes=10)
sd = load_file(sys.argv[1])
print(m.load_state_dict(sd, strict=True))
m.eval()
print("logits", tuple(m(torch.zeros(1, 3, 32, 32)).shape))
PY
)
  if [[ $out == *"All keys matched successfully"* && $out == *"logits (1, 10)"* ]]; then ok "torchvision.models.resnet18().load_state_dict(safetensors.torch.load_file(ckpt)) accepts our checkpoint"; else not_ok "torchvision load"; echo "$out" | diag; fi
else
  ok "# SKIP torchvision load check: no Python with torch+torchvision+safetensors (set DLT_TORCH_PYTHON)"
fi
exit 0
