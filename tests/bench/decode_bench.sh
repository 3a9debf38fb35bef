#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# decode_bench.sh [COUNT] [SECONDS]: images/s per core of dltrain's decode + RandomResizedCrop(224)
# on generated ImageNet-sized JPEGs (500x375, quality 90), against libjpeg-turbo's tjbench
# full-size decode of the same files in the same run, with ratios.
set -euo pipefail
COUNT=${1:-32}
SECS=${2:-3}
B=${DLT_BUILDDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
D=$(mktemp -d /tmp/dltrain-decode.XXXXXX)
trap 'rm -rf "$D"' EXIT
command -v tjbench >/dev/null || { echo "decode_bench: tjbench not found (apt-get install libjpeg-turbo-progs)"; exit 77; }
"$B/tests/fixtures/mkjpegs" bench "$D" "$COUNT" 500 375 90
json=$(taskset -c 0 "$B/tests/bench/decode_bench" "$D" "$SECS")
ours=$(sed -n 's/.*"ours_images_per_s":\([0-9.]*\).*/\1/p' <<<"$json")
full=$(sed -n 's/.*"full_decode_images_per_s":\([0-9.]*\).*/\1/p' <<<"$json")
fps=0 k=0
for f in "$D"/img_000[0-3].jpg; do
  r=$(taskset -c 0 tjbench "$f" -benchtime "$SECS" -warmup 1 2>/dev/null | sed -n 's/.*Decompress *--> Frame rate: *\([0-9.]*\) fps.*/\1/p' | head -1)
  fps=$(awk -v a="$fps" -v b="$r" 'BEGIN{print a + b}'); k=$((k + 1))
done
tj=$(awk -v a="$fps" -v k="$k" 'BEGIN{printf "%.1f", a / k}')
printf '%-44s %10s\n' "one core, 500x375 q90 JPEGs" "images/s"
printf '%-44s %10s\n' "dltrain decode + RandomResizedCrop(224)" "$ours"
printf '%-44s %10s\n' "full-size decode to RGB (same code path)" "$full"
printf '%-44s %10s\n' "tjbench full-size decode" "$tj"
printf 'ratio dltrain / tjbench: %s   DCT scales used (eighths 1..8): %s\n' \
  "$(awk -v a="$ours" -v b="$tj" 'BEGIN{printf "%.2fx", a / b}')" "$(sed -n 's/.*"dct_scales_eighths":\(\[[^]]*\]\).*/\1/p' <<<"$json")"
