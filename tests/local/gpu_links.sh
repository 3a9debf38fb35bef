#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/device/gpu_links.py, the multi-GPU check's reading of nvidia-smi, without a GPU: an HGX
# H100's topo -m (8 GPUs, every pair NV18, the header underlined with terminal escapes as
# nvidia-smi writes it into a file) with its fabric trained passes and counts 28 NVLink pairs; the
# first 4 GPUs only are read for --ranks 4; a PCIe machine's matrix is counted by kind and said to
# cross PCIe or the CPUs; a fabric still "In Progress" fails, naming nvidia-fabricmanager; a matrix
# with fewer GPU rows than asked fails.
. "$(dirname "$0")/../slurm/lib.sh"
LINKS=$DLT_SRCDIR/tests/device/gpu_links.py
command -v python3 >/dev/null || skip_all "python3 missing"
tap_plan 5
rm -rf "$WORK"; mkdir -p "$WORK"
# hgx_topo N KIND: a topo -m matrix of N GPUs all linked by KIND, two NICs, the legend after it.
hgx_topo() {
  python3 - "$1" "$2" <<'PY'
import sys
n, kind = int(sys.argv[1]), sys.argv[2]
head = ["GPU%d" % i for i in range(n)] + ["NIC0", "NIC1", "CPU Affinity", "NUMA Affinity", "GPU NUMA ID"]
print("\x1b[4m\t" + "\t".join(head) + "\x1b[0m")
for i in range(n):
    cells = [" X " if j == i else kind for j in range(n)] + ["PXB" if i < n // 2 else "SYS", "SYS" if i < n // 2 else "PXB",
             "0-55,112-167" if i < n // 2 else "56-111,168-223", "0" if i < n // 2 else "1", "N/A"]
    print("GPU%d\t" % i + "\t".join(cells))
for k in range(2):
    print("NIC%d\t" % k + "\t".join(["PXB"] * n + [" X ", "SYS"]))
print("\nLegend:\n\n  X    = Self\n  NV#  = Connection traversing a bonded set of # NVLinks\n\nNIC Legend:\n\n  NIC0: mlx5_0\n  NIC1: mlx5_1")
PY
}
# smi_q N STATE STATUS: nvidia-smi -q for N GPUs, each with a Fabric section (STATE, STATUS).
smi_q() {
  printf '==============NVSMI LOG==============\n\nAttached GPUs                             : %d\n' "$1"
  for ((i = 0; i < $1; i++)); do
    printf 'GPU 00000000:%02X:00.0\n    Product Name                          : NVIDIA H100 80GB HBM3\n' $((0x18 + 16 * i))
    printf '    Minor Number                          : %d\n    Fabric\n        State                             : %s\n' "$i" "$2"
    printf '        Status                            : %s\n        CliqueId                          : 1\n' "$3"
  done
}
hgx_topo 8 NV18 >"$WORK/hgx.topo"; smi_q 8 Completed Success >"$WORK/hgx.q"
out=$(python3 "$LINKS" 8 "$WORK/hgx.topo" "$WORK/hgx.q"); rc=$?
if ((rc == 0)) && [[ $(grep -c '^OK' <<<"$out") == 2 && $out == *"8 GPU rows; the 28 pair(s) of GPUs 0..7 linked by NV18 x 28"* &&
      $out == *"fabric (nvidia-smi -q) of 8 GPU(s): State Completed, Status Success"* && $out != *"not all NVLink"* ]]; then
  ok "an HGX H100 (escapes in the header, fabric trained): 28 NVLink pairs, every fabric Completed/Success"
else not_ok "HGX H100 matrix"; echo "$out" | diag; fi

out=$(python3 "$LINKS" 4 "$WORK/hgx.topo" "$WORK/hgx.q")
if [[ $out == *"OK"*"the 6 pair(s) of GPUs 0..3 linked by NV18 x 6"* ]]; then ok "--ranks 4 on it: the 6 pairs of GPUs 0..3"
else not_ok "4 of 8 GPUs"; echo "$out" | diag; fi

hgx_topo 4 SYS | sed 's/^\(GPU[01]\t.*\)SYS\(\t.*\)/\1NODE\2/' >"$WORK/pcie.topo"; smi_q 4 N/A N/A >"$WORK/pcie.q"
out=$(python3 "$LINKS" 4 "$WORK/pcie.topo" "$WORK/pcie.q")
if [[ $(grep -c '^OK' <<<"$out") == 2 && $out == *"linked by"*"SYS x "*"(not all NVLink: NCCL's rings cross PCIe or the CPUs there)"* &&
      $out == *"State N/A, Status N/A"* ]]; then
  ok "a PCIe machine: the pairs counted by kind, said to cross PCIe or the CPUs; no fabric (N/A) is not a failure"
else not_ok "PCIe matrix"; echo "$out" | diag; fi

smi_q 8 "In Progress" "N/A" >"$WORK/training.q"
out=$(python3 "$LINKS" 8 "$WORK/hgx.topo" "$WORK/training.q")
if [[ $out == *$'FAIL\tfabric'*"State In Progress"*"start nvidia-fabricmanager"* ]]; then
  ok "a fabric still In Progress fails, naming nvidia-fabricmanager"
else not_ok "fabric In Progress"; echo "$out" | diag; fi

hgx_topo 2 NV18 >"$WORK/two.topo"
out=$(python3 "$LINKS" 8 "$WORK/two.topo" "$WORK/hgx.q")
if [[ $out == *$'FAIL\tnvidia-smi topo -m: 2 GPU rows'* ]]; then ok "a matrix of 2 GPUs for --ranks 8 fails"
else not_ok "too few GPU rows"; echo "$out" | diag; fi
exit 0
