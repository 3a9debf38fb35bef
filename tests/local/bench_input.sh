#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `dltrain bench --input-only`: the training input path alone, images/s in total, per rank and per
# worker, and the GPUs that feeds at --per-gpu; its JSON agrees with itself; generated images are
# named as such.
. "$(dirname "$0")/../slurm/lib.sh"
local_test_start 3
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
      and abs(j["gpus_fed"] - j["images_per_s"] / 500) < 1e-3 and j["synthetic"] is False and j["bad_images"] == 0)
sys.exit(0 if ok else 1)' "$out"; then ok "input-only --json: per worker, GPUs fed and counts agree"
else not_ok "input-only json (rc=$rc)"; echo "$out" | diag; fi

out=$("$DLTRAIN" "${B[@]}" --synthetic --workers 1 2>&1); rc=$?
if ((rc == 0)) && [[ $out == *"(generated images, not decoded)"* ]]; then ok "input-only on --synthetic says it measured the generator"
else not_ok "input-only synthetic (rc=$rc)"; echo "$out" | tail -3 | diag; fi
exit 0
