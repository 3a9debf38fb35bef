#!/usr/bin/env bash
# tests/device/run.sh: the checks that need a GPU, in one script for a lent GPU machine.
# Builds the tree, then runs the NCCL bootstrap through dltpmix (communicator + exact all-reduce
# check + bandwidth). Without a GPU it says so and exits 0 (skipped). Log under $OUT when set.
set -uo pipefail
cd "$(dirname "$0")/../.."
LOG=${OUT:-/tmp}/device-run.log
exec > >(tee "$LOG") 2>&1
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "device: SKIP: no GPU visible (nvidia-smi -L failed)"
  exit 0
fi
nvidia-smi -L
set -e
[ -x configure ] || ./autogen.sh >/dev/null
[ -f Makefile ] || ./configure --enable-werror >/dev/null
make -j"$(nproc)" >/dev/null
make tests/device/nccl_check >/dev/null
echo "device: nccl_check (singleton, 1 GPU)"
timeout 120 ./tests/device/nccl_check
echo "device: done"
