#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# input_vs_peers.sh [COUNT] [SECONDS]: the training input path per core (decode, RandomResizedCrop
# 224, flip, into the batch) of dltrain (`bench --input-only --workers 1`), DALI's CPU pipeline and
# torchvision's PIL transform, on the same real-photo JPEGs (make_photos.py: scikit-learn's sample
# photographs cropped and rescaled to 500x375 / 375x500, quality 90), each pinned to core 0, in one
# run; prints images/s and the ratios, with the CPU model.
#   TORCH_PY: a Python with torch, torchvision, Pillow and scikit-learn (default /opt/torchvenv)
#   DALI_PY:  a Python with nvidia-dali (default /opt/dalivenv; pip install nvidia-dali-cuda120: the
#             CPU pipeline needs no GPU); a peer that cannot run is reported, not guessed.
set -uo pipefail
COUNT=${1:-128}
SECS=${2:-8}
B=${DLT_BUILDDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
HERE=$(cd "$(dirname "$0")" && pwd)
TORCH_PY=${TORCH_PY:-/opt/torchvenv/bin/python}
DALI_PY=${DALI_PY:-/opt/dalivenv/bin/python}
D=$(mktemp -d /tmp/dltrain-input.XXXXXX)
trap 'rm -rf "$D"' EXIT
"$TORCH_PY" "$HERE/make_photos.py" "$D" "$COUNT" >/dev/null || { echo "input_vs_peers: cannot make the photos (needs Pillow and scikit-learn in $TORCH_PY)"; exit 77; }
iters=$(awk -v s="$SECS" 'BEGIN{printf "%d", s * 20}')
ours=$(OMP_NUM_THREADS=1 taskset -c 0 "$B/trainer/dltrain" bench --input-only --data "$D" --workers 1 --backend cpu \
  --batch 32 --warmup 2 --iters "$iters" --json 2>/dev/null | sed -n 's/.*"images_per_s":\([0-9.]*\).*/\1/p')
tv=$(taskset -c 0 "$TORCH_PY" "$HERE/input_peers.py" torchvision "$D" "$SECS" 2>/dev/null | sed -n 's/.*"images_per_s": *\([0-9.]*\).*/\1/p')
dali=$(taskset -c 0 "$DALI_PY" "$HERE/input_peers.py" dali "$D" "$SECS" 2>/dev/null | sed -n 's/.*"images_per_s": *\([0-9.]*\).*/\1/p')
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
ratio() { [[ -n $1 && -n $2 ]] && awk -v a="$1" -v b="$2" 'BEGIN{printf "%.2fx", a / b}' || echo "n/a"; }
printf 'one core (%s), %d real-photo JPEGs 500x375 / 375x500 q90\n' "$cpu" "$COUNT"
printf '%-58s %10s\n' "decode + RandomResizedCrop(224) + flip, per core" "images/s"
printf '%-58s %10s\n' "dltrain bench --input-only --workers 1" "${ours:-failed}"
printf '%-58s %10s\n' "DALI CPU pipeline (image_random_crop, resize, cmn)" "${dali:-not run}"
printf '%-58s %10s\n' "torchvision ImageFolder + PIL transforms" "${tv:-not run}"
printf 'ratio dltrain / DALI: %s   dltrain / torchvision: %s\n' "$(ratio "$ours" "$dali")" "$(ratio "$ours" "$tv")"
[[ -n $ours ]]
