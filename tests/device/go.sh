#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/device/go.sh: the one command for a lent GPU machine (doc/gpu.md "The GPU check"):
#   device run, carry [".devpack"], command "bash tests/device/go.sh" (timeout_s 460)
# Checks .devpack/ (made here by tests/device/pack.sh) against its SHA256SUMS, unpacks the programs,
# the carried Slurm (for tests/device/slurm_node.sh) and the carried sm_90 NCCL 2.30.7 into /tmp,
# prints the GPUs, then runs tests/device/run.sh with the arguments given (a rerun: --only
# PHASE,...; a machine of N GPUs: --ranks N, doc/gpu.md "Several GPUs"). Exit status: run.sh's.
set -uo pipefail
cd "$(dirname "$0")/../.."
t0=$SECONDS
P=.devpack
if [ ! -f "$P/SHA256SUMS" ] || ! (cd "$P" && sha256sum -c --quiet SHA256SUMS); then
  echo "go: $P/ is missing or damaged (run tests/device/pack.sh here and carry .devpack)"; exit 1
fi
U=/tmp/dlt-devpack
# A one-node Slurm an earlier call left running from the old copy (a call cut short) goes first.
if [ -f /tmp/dlt-slurm-node/pids ] && [ -d "$U/slurm" ]; then bash tests/device/slurm_node.sh down "$U/slurm"; fi
rm -rf "$U"; mkdir -p "$U/nccl230"
xz -dc "$P/dltrain-device.tar.xz" | tar -xf - -C "$U" || { echo "go: cannot unpack $P/dltrain-device.tar.xz"; exit 1; }
export DLT_PACK=$U
if [ -f "$P/dltrain-slurm.tar.xz" ]; then
  xz -dc "$P/dltrain-slurm.tar.xz" | tar -xf - -C "$U" || { echo "go: cannot unpack $P/dltrain-slurm.tar.xz"; exit 1; }
  export DLT_SLURM_PACK=$U/slurm
fi
for f in "$P"/libnccl.so.*-sm90.xz; do
  [ -f "$f" ] || continue
  xz -dc "$f" >"$U/nccl230/libnccl.so.2" || { echo "go: cannot unpack $f"; exit 1; }
  export DLT_NCCL230=$U/nccl230
done
echo "go: unpacked in $((SECONDS - t0)) s: $(cat "$U/COMMIT" | tr '\n' ' ')"
nvidia-smi -L || { echo "go: nvidia-smi -L failed: no GPU here"; exit 1; }
exec bash tests/device/run.sh "$@"
