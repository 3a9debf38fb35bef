#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The N-GPU plan of the GPU check (tests/device/run.sh --ranks N) rehearsed without a GPU, so that
# its own mistakes are not found on a lent machine: a stand-in nvidia-smi (4 GPUs, every pair NV18,
# the fabric trained) and a stand-in pack whose dltrain plays the ranks (two_ranks.sh starts them,
# as on a machine without srun). The topology phase reads the matrix and the fabric; the scaling
# phase runs 1, 2 and 4 ranks and takes the efficiency dltrain prints; the kill-rank phase finds
# rank 3 by its environment, kills it with SIGKILL, and passes only when every other rank ended by
# itself naming a lost peer; ranks that end without saying so fail it; an efficiency under 90%
# fails the scaling phase.
. "$(dirname "$0")/../slurm/lib.sh"
RUN=$DLT_SRCDIR/tests/device/run.sh
command -v python3 >/dev/null || skip_all "python3 missing"
tap_plan 5
rm -rf "$WORK"; mkdir -p "$WORK/bin" "$WORK/pack/bin"
cat >"$WORK/bin/nvidia-smi" <<'SH'
#!/bin/bash
case "$*" in
  -L) for i in 0 1 2 3; do echo "GPU $i: Stand-in H100 (UUID: GPU-0000000$i-0000-0000-0000-000000000000)"; done ;;
  "topo -m")
    printf '\033[4m\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\033[0m\n'
    for i in 0 1 2 3; do
      row="GPU$i"; for j in 0 1 2 3; do if [ "$i" = "$j" ]; then row+=$'\t X '; else row+=$'\tNV18'; fi; done
      printf '%s\t0-15\t0\t\tN/A\n' "$row"
    done ;;
  -q) for i in 0 1 2 3; do
        printf 'GPU 00000000:%02X:00.0\n    Minor Number : %d\n    Fabric\n        State : Completed\n        Status : Success\n' $((0x18 + 16 * i)) "$i"
      done ;;
  "nvlink -s") echo "GPU 0: Stand-in"; for l in 0 1; do echo "	 Link $l: 26.562 GB/s"; done ;;
  *) echo "Stand-in H100, 81559 MiB, 999.99" ;;
esac
SH
# The stand-in dltrain: started as "$DLT train ..." (its command line as the real one's), rank R of
# DLTPMIX_TEST_SIZE. Short runs print the summary (efficiency 100 - 3 x (ranks - 1) %, or
# DLT_FAKE_EFF); a long run writes a step a tick on rank 0 once every rank is up, and ends when a
# peer's process is gone, saying so, or silently with DLT_FAKE_SILENT=1.
cat >"$WORK/pack/bin/dltrain" <<'SH'
#!/bin/bash
[ -n "${FAKE_ARGV0:-}" ] || FAKE_ARGV0=1 exec -a "$0" bash "$0" "$@"
rank=${DLTPMIX_TEST_RANK:-0} size=${DLTPMIX_TEST_SIZE:-1} dir=${DLTPMIX_TEST_RENDEZVOUS:-} steps=0 metrics= base= workers=1
while [ $# -gt 0 ]; do
  case $1 in --steps) steps=$2; shift ;; --metrics) metrics=$2; shift ;; --baseline) base=$2; shift ;;
    --workers) workers=$2; shift ;; --input-only) FAKE_ARGV_ALL=input ;; esac
  shift
done
if [ "${FAKE_ARGV_ALL:-}" = input ]; then
  echo '{"mode":"input","image":224,"batch":256,"ranks":1,"workers":'"$workers"',"iters":8,"images_per_s":'"$((900 * workers))"'.0,"per_rank":1.0,"per_worker":900.0,"per_gpu":7138.0,"gpus_fed":'"$(awk -v w="$workers" 'BEGIN { printf "%.3f", 900 * w / 7138 }')"'}'
  exit 0
fi
if [ "$steps" -le 100 ]; then
  eff=${DLT_FAKE_EFF:-$((100 - 3 * (size - 1)))}
  [ "$rank" = 0 ] && echo "dltrain: summary: $((2000 * size * eff / 100)).0 images/s, $((2000 * eff / 100)).0 per rank, $size rank(s)${base:+, scaling efficiency $eff.0% against 2000.0 images/s per rank in $base}"
  exit 0
fi
echo $$ >"$dir/.fake.$rank" && mv "$dir/.fake.$rank" "$dir/fake.$rank" # whole, or not there
for ((i = 1, step = 0; i <= 300; i++)); do
  # Rank 0 counts a step only once every rank is up, as a collective would wait for them.
  up=0; for ((r = 0; r < size; r++)); do [ -e "$dir/fake.$r" ] && up=$((up + 1)); done
  [ "$rank" = 0 ] && [ "$up" = "$size" ] && step=$((step + 1)) && echo "{\"step\":$step}" >>"$metrics"
  for ((r = 0; r < size; r++)); do
    p=$(cat "$dir/fake.$r" 2>/dev/null) && [ -n "$p" ] || continue
    if ! kill -0 "$p" 2>/dev/null; then
      [ "${DLT_FAKE_SILENT:-0}" = 1 ] && exit 0
      echo "dltrain: watchdog: rank $rank has waited for its peers in a collective: a peer stopped responding (not this rank)" >&2
      exit 5
    fi
  done
  sleep 0.2
done
exit 0
SH
printf '#!/bin/sh\nexit 0\n' >"$WORK/pack/bin/cuda_ops_check"
cp "$WORK/pack/bin/cuda_ops_check" "$WORK/pack/bin/nccl_check"
chmod +x "$WORK/bin/nvidia-smi" "$WORK/pack/bin/"*
# rehearse NAME [VAR=VALUE...]: run.sh --ranks 4 --only topology,scaling,kill-rank with the stand-ins.
rehearse() {
  local name=$1; shift
  (cd "$DLT_SRCDIR" && env "$@" PATH="$WORK/bin:$PATH" DLT_PACK="$WORK/pack" OUT="$WORK/$name" DLT_DEVICE_DEADLINE=120 \
    timeout 150 bash "$RUN" --ranks 4 --only topology,scaling,kill-rank 2>&1)
}
out=$(rehearse good); rc=$?
if ((rc == 0)) && [[ $out == *"ok   topology: 4 GPUs (nvidia-smi -L) for --ranks 4"* &&
      $out == *"ok   topology: nvidia-smi topo -m: 4 GPU rows; the 6 pair(s) of GPUs 0..3 linked by NV18 x 6"* &&
      $out == *"ok   topology: fabric (nvidia-smi -q) of 4 GPU(s): State Completed, Status Success"* ]]; then
  ok "topology on 4 stand-in GPUs: the 6 NVLink pairs and the trained fabric read"
else not_ok "topology rehearsal (rc=$rc)"; echo "$out" | diag; fi
if [[ $out == *"scaling: summary: 2000.0 images/s, 2000.0 per rank, 1 rank(s)"* && $out == *"4 rank(s), scaling efficiency 91.0%"* &&
      $out == *"ok   scaling: fp16 ResNet-50, 256 images per GPU: the worst efficiency 91.0%"* &&
      $out == *"ok   kill-rank: rank 3 killed (SIGKILL): the 3 others ended by themselves in "*"each naming a lost peer"* ]]; then
  ok "scaling at 1, 2, 4 ranks through two_ranks.sh (worst 91%); kill-rank: rank 3 found by its environment and killed, the 3 others ended by themselves naming the lost peer"
else not_ok "scaling and kill-rank rehearsal"; echo "$out" | grep -E 'scaling|kill-rank|two_ranks' | diag; fi
out=$(rehearse silent DLT_FAKE_SILENT=1); rc=$?
if ((rc == 1)) && [[ $out == *"FAIL kill-rank: after SIGKILL to rank 3"*"0 of 3 others named a lost peer"* ]]; then
  ok "ranks that end without naming the lost peer fail kill-rank"
else not_ok "silent survivors (rc=$rc)"; echo "$out" | grep -E 'kill-rank|two_ranks' | diag; fi
# The photos phase of the one-GPU plan: the carried photographs into an ILSVRC-shaped set (40
# images here), then the input path at 15 and 7 workers.
PY=${DLT_TORCH_PYTHON:-/opt/torchvenv/bin/python}
IMGS=$("$PY" -c 'import os, sklearn.datasets; print(os.path.join(os.path.dirname(sklearn.datasets.__file__), "images"))' 2>/dev/null)
if [[ -f $IMGS/china.jpg && -f $IMGS/flower.jpg ]] && "$PY" -c 'import PIL' 2>/dev/null; then
  mkdir -p "$WORK/pack/photos" && cp "$IMGS/china.jpg" "$IMGS/flower.jpg" "$WORK/pack/photos/"
  out=$(cd "$DLT_SRCDIR" && PATH="$WORK/bin:$PATH" DLT_PACK="$WORK/pack" OUT="$WORK/photos" DLT_TORCH_PYTHON="$PY" DLT_PHOTOS=40 \
        DLT_DEVICE_DEADLINE=120 timeout 150 bash "$RUN" --only photos 2>&1); rc=$?
  tar -xzf "$WORK/photos/device-results.tar.gz" -C "$WORK/photos" ./photos 2>/dev/null
  n=$(find "$WORK/photos/photos/train" -name '*.JPEG' 2>/dev/null | wc -l)
  size=$("$PY" -c 'import sys; from PIL import Image; print(sorted({Image.open(f).size for f in sys.argv[1:]}))' $(find "$WORK/photos/photos/train" -name '*.JPEG' | head -8) 2>&1)
  if ((rc == 0 && n == 40)) && [[ $out == *"ok   photos: 40 photos in"*"1000 class folder(s)"* && $size == *"(500, 375)"* &&
        $out == *"ok   photos: the training input path, 15 workers: 13500 images/s"*"feeds 1.89 GPU(s)"* && $out == *"7 workers: 6300 images/s"* ]]; then
    ok "photos phase: 40 ILSVRC-sized JPEGs ($size) of the carried photographs in 1000 folders; the input path at 15 and 7 workers read"
  else not_ok "photos phase (rc=$rc, $n images, sizes $size)"; echo "$out" | grep -E 'photos|FAIL' | diag; fi
else ok "# SKIP photos phase: no Python with Pillow and scikit-learn's sample images ($PY)"; fi
out=$(rehearse slow DLT_FAKE_EFF=85); rc=$?
if ((rc == 1)) && [[ $out == *"FAIL scaling: the efficiency fell to 85.0%"* ]]; then ok "an efficiency of 85% fails the scaling phase"
else not_ok "low efficiency (rc=$rc)"; echo "$out" | grep -E 'scaling' | diag; fi
exit 0
