#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `dltrain bench --input-only`: the training input path alone, images/s in total, per rank and per
# worker, and the GPUs that feeds at --per-gpu; its JSON agrees with itself; generated images are
# named as such. Without --per-gpu the GPU rate follows the precision and model: none for fp32 (the
# report says to pass --per-gpu), the measured ResNet-50 224x224 bf16 rate for that model, and for
# another model and size that rate scaled by the GFLOPs per image `dltrain info` prints, called an
# estimate.
. "$(dirname "$0")/../slurm/lib.sh"
local_test_start 6
"$MK" folder "$WORK/d" 4 16 160 120 plain >/dev/null
B=(bench --input-only --backend cpu --batch 8 --warmup 1 --iters 6)

out=$("$DLTRAIN" "${B[@]}" --data "$WORK/d" --workers 2 --per-gpu 1000 2>&1); rc=$?
if ((rc == 0)) && [[ $out =~ "bench input path 224x224, batch 8 x 1 rank(s), 2 worker(s) per rank: "([0-9.]+)" images/s ("([0-9.]+)" per rank, "([0-9.]+)" per worker)" ]] &&
   awk -v t="${BASH_REMATCH[1]}" -v w="${BASH_REMATCH[3]}" 'BEGIN{exit !(t > 0 && w > 0.49 * t && w < 0.51 * t)}' &&
   [[ $out == *"that feeds "*" GPU(s) at 1000 images/s each (--per-gpu)"* ]]; then
  ok "input-only: images/s in total and per worker (half of it with 2 workers), and the GPUs fed"
else not_ok "input-only report (rc=$rc)"; echo "$out" | tail -4 | diag; fi

out=$("$DLTRAIN" "${B[@]}" --data "$WORK/d" --workers 1 --per-gpu 500 --json 2>/dev/null | tail -1); rc=$?
if ((rc == 0)) && python3 -c '
import json, sys
j = json.loads(sys.argv[1])
ok = (j["mode"] == "input" and j["images_per_s"] > 0 and abs(j["per_worker"] - j["images_per_s"]) < 1e-3 * j["images_per_s"]
      and abs(j["gpus_fed"] - j["images_per_s"] / 500) < 1e-3 and j["synthetic"] is False and j["bad_images"] == 0
      and j["per_gpu_from"] == "given")
sys.exit(0 if ok else 1)' "$out"; then ok "input-only --json: per worker, GPUs fed and counts agree"
else not_ok "input-only json (rc=$rc)"; echo "$out" | diag; fi

out=$("$DLTRAIN" "${B[@]}" --synthetic --workers 1 2>&1); rc=$?
if ((rc == 0)) && [[ $out == *"(generated images, not decoded)"* ]]; then ok "input-only on --synthetic says it measured the generator"
else not_ok "input-only synthetic (rc=$rc)"; echo "$out" | tail -3 | diag; fi
out=$("$DLTRAIN" "${B[@]}" --data "$WORK/d" --workers 1 2>&1); rc=$?
js=$("$DLTRAIN" "${B[@]}" --data "$WORK/d" --workers 1 --json 2>/dev/null | tail -1)
if ((rc == 0)) && [[ $out != *"that feeds"* && $out == *"no per-GPU rate is known for fp32 (one was measured for fp16 and bf16 only): pass --per-gpu N"* ]] &&
   python3 -c 'import json, sys; j = json.loads(sys.argv[1]); sys.exit(0 if j["per_gpu"] is None and j["gpus_fed"] is None and j["per_gpu_from"] == "none" and j["precision"] == "fp32" else 1)' "$js"; then
  ok "fp32 without --per-gpu: no GPUs-fed figure (no fp32 rate was measured), the report says to pass --per-gpu; JSON null"
else not_ok "fp32 without --per-gpu (rc=$rc)"; { echo "$out"; echo "$js"; } | tail -4 | diag; fi

# bf16 runs on the CPU backend only where oneDNN has AVX512-BF16 or AMX.
out=$("$DLTRAIN" "${B[@]}" --data "$WORK/d" --workers 1 --precision bf16 2>&1); rc=$?
if [[ $out == *"needs a CPU with AVX512-BF16 or AMX"* ]]; then
  ok "# SKIP --precision bf16 needs a CPU with AVX512-BF16 or AMX on the CPU backend: not this one"
  ok "# SKIP the same"
else
  if ((rc == 0)) && [[ $out == *"that feeds "*" GPU(s) at 6588 images/s each (ResNet-50 224x224 bf16 on an H200, measured with this trainer; --per-gpu N for another GPU)"* ]]; then
    ok "bf16 ResNet-50 at 224x224: the measured H200 rate (6588 images/s), said where it comes from"
  else not_ok "bf16 ResNet-50 reference (rc=$rc)"; echo "$out" | tail -3 | diag; fi
  g50=$("$DLTRAIN" info | grep -o '[0-9.]* GFLOPs' | cut -d' ' -f1)
  g18=$("$DLTRAIN" info --arch resnet18 --image-size 112 --classes 4 | grep -o '[0-9.]* GFLOPs' | cut -d' ' -f1)
  S=(--data "$WORK/d" --workers 1 --precision bf16 --arch resnet18 --image-size 112)
  out=$("$DLTRAIN" "${B[@]}" "${S[@]}" 2>&1); rc=$?
  js=$("$DLTRAIN" "${B[@]}" "${S[@]}" --json 2>/dev/null | tail -1)
  if ((rc == 0)) && [[ $out == *"GPU(s) at about "*" images/s each (an estimate for resnet18 112x112 bf16: ResNet-50 224x224 bf16 on an H200, 6588 images/s measured, scaled by forward GFLOP per image 4.09 / $g18;"* ]] &&
     python3 -c '
import json, sys
j, g50, g18 = json.loads(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
want = 6588 * g50 / g18
sys.exit(0 if j["per_gpu_from"] == "estimate" and abs(j["per_gpu"] - want) <= 0.01 * want and abs(j["gpus_fed"] - j["images_per_s"] / j["per_gpu"]) < 1e-3 else 1)' "$js" "$g50" "$g18"; then
    ok "bf16 resnet18 at 112x112: an estimate, 6588 x $g50 / $g18 GFLOPs (dltrain info's), named as such"
  else not_ok "bf16 resnet18 estimate (rc=$rc, info: $g50 / $g18 GFLOPs)"; { echo "$out"; echo "$js"; } | tail -4 | diag; fi
fi
exit 0
