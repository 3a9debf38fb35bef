#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Node discovery, distances, binding and the NCCL XML on fixture nodes (tests/fixtures/mktopo.py:
# a sysfs tree + the stand-in NVML). The XML is checked with Python's own XML parser against the
# rules NCCL's strict parser imposes.
. "$(dirname "$0")/../slurm/lib.sh"
TOOL=$DLT_BUILDDIR/dltrain-topo
FAKE=$DLT_BUILDDIR/tests/fake_nvml/.libs/libfakenvml.so
FX=$WORK/fixtures
[[ -x $TOOL && -f $FAKE ]] || skip_all "dltrain-topo or the fake NVML not built"
command -v python3 >/dev/null || skip_all "python3 missing"
rm -rf "$FX"; mkdir -p "$FX"
for t in lab2 c4130k dgx1 nvswitch8 pcie4 nogpu cloudvm; do python3 "$DLT_SRCDIR/tests/fixtures/mktopo.py" $t "$FX/$t"; done
T() { local t=$1; shift; DLT_FAKE_NVML=$FX/$t/nvml.txt "$TOOL" "$FAKE" "$FX/$t" "$@" 2>&1; }
# expect NAME OUTPUT PATTERN: ok when the output contains the fixed string
expect() { if [[ $2 == *"$3"* ]]; then ok "$1"; else not_ok "$1"; { echo "expected: $3"; echo "$2"; } | diag; fi; }
tap_plan 30

m=$(T dgx1 matrix)
expect "dgx1: 8 GPUs, 4 HCAs, 2 NUMA nodes" "$m" "8 GPU(s), 4 NIC(s), 2 NUMA node(s)"
expect "dgx1: hybrid cube-mesh NVLink counts (GPU0: NV1 NV1 NV2 NV2 to GPU1-4)" "$m" "GPU0     X      NV1    NV1    NV2    NV2    SYS    SYS    SYS"
expect "dgx1: HCA on GPU0's switch is PIX, the other socket's SYS" "$m" "PIX      PHB      SYS      SYS      0-19           0"
expect "dgx1: NVML's 00000000:05:00.0 normalised to 0000:05:00.0" "$m" "GPU0 = 0000:05:00.0 Tesla V100-SXM2-32GB sm_70"
check "virtual interfaces (docker0) are ignored" bash -c "! grep -q docker0 <<<'$m'"
m=$(T c4130k matrix)
expect "C4130 config K: all pairs of the 4 V100 have 2 NVLinks" "$m" "GPU3     NV2    NV2    NV2    X"
expect "C4130 config K: GPUs behind one switch are PIX... (through NVLink: NV2), HCA on the CPU root port is PHB" "$m" "PHB      SYS      0-19           0"
b=$(T c4130k bind 0,1,2,3 0,1,2,3 3 0-39)
expect "C4130 rank 3: GPU3, CPU socket 0, mlx5_0" "$b" "gpu=3 pci=0000:07:00.0 cpus=0-19 numa_local=1 nic=mlx5_0 dist=PHB"
m=$(T nvswitch8 matrix)
expect "nvswitch8: GPUs reach each other through NVSwitch (NV12)" "$m" "GPU0     X      NV12   NV12   NV12   NV12   NV12   NV12   NV12"
m=$(T pcie4 matrix)
expect "pcie4: same host bridge is PHB, across sockets SYS" "$m" "GPU0     X      PHB    SYS    SYS"
m=$(T nogpu matrix)
expect "no GPU: NICs still found" "$m" "0 GPU(s), 1 NIC(s), 1 NUMA node(s)"

b=$(T dgx1 bind 0,1,2,3,4,5,6,7 0,1,2,3,4,5,6,7 0 0-39)
expect "dgx1 rank 0: GPU0, NUMA-local CPUs, nearest HCA, exact-match NCCL names" "$b" "gpu=0 pci=0000:05:00.0 cpus=0-19 numa_local=1 nic=mlx5_0 dist=PIX hca==mlx5_0:1 ifname==ib0"
expect "dgx1: NVLink-aware order follows the most links" "$b" "order=0,3,7,4,5,1,2,6"
b=$(T dgx1 bind 0,1,2,3,4,5,6,7 0,1,2,3,4,5,6,7 3 0-39)
expect "dgx1 rank 3: GPU4 on socket 1 with CPUs 20-39 and mlx5_2" "$b" "gpu=4 pci=0000:85:00.0 cpus=20-39 numa_local=1 nic=mlx5_2"
b=$(T dgx1 bind 2,3 2,3 0 0-39)
expect "the device comes from Slurm's list, not the local rank (CUDA_VISIBLE_DEVICES=2,3 -> GPU 2)" "$b" "gpu=2 pci=0000:0d:00.0"
b=$(T dgx1 bind 0 5 0 0-39)
expect "SLURM_STEP_GPUS=5 with CUDA_VISIBLE_DEVICES=0 (ConstrainDevices) maps to GPU5's bus id" "$b" "gpu=0 pci=0000:86:00.0"
b=$(T dgx1 bind 0,1 0,1 0 20-39)
expect "GPU-local CPUs outside the task's cpuset: keep Slurm's set" "$b" "cpus=20-39 numa_local=0"
b=$(T dgx1 bind 0 0 0 0-39 mlx5_3)
expect "nic=NAME overrides the nearest choice" "$b" "nic=mlx5_3 dist=SYS"
b=$(T dgx1 bind 0 0 0 0-39 ib9); rc=$?
expect "nic=absent names what the node has" "$b" "nic=ib9: no such HCA or interface on this node (found: mlx5_0, mlx5_1, mlx5_2, mlx5_3)"
b=$(T pcie4 bind 0,1,2,3 0,1,2,3 2 0-31)
expect "pcie4: Ethernet only: socket-local interface, no IB HCA" "$b" "cpus=16-31 numa_local=1 nic=eth1 dist=PHB hca=- ifname==eth1"
b=$(T nogpu bind "" "" 0 0-7)
expect "no GPU in the step: no GPU, CPUs untouched, NIC still chosen" "$b" "gpu=- pci=- cpus=0-7 numa_local=0 nic=eth0"
b=$(T dgx1 bind 0,9 0,9 0 0-39)
expect "a step GPU NVML does not have is an error naming it" "$b" "the step's GPU 9"
b=$(T dgx1 bind "0,x" "" 0 0-39)
expect "a malformed CUDA_VISIBLE_DEVICES is refused" "$b" "is not a list of GPU indices"

for t in dgx1 nvswitch8 pcie4 nogpu; do T $t xml > "$WORK/$t.xml"; done
check_xml() {
  python3 - "$@" <<'PY'
import re, sys, xml.etree.ElementTree as ET
path, ngpu, nnet, nlinks = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
text = open(path).read()
assert not text.startswith("<?xml"), "prolog present"
assert "\t" not in text, "tab present"
root = ET.fromstring(text)
assert root.tag == "system" and root.get("version") == "1"
for el in root.iter():
    assert len(el.attrib) <= 16, el.tag
    for v in el.attrib.values():
        assert len(v) <= 255
    if el.tag == "pci":
        assert re.fullmatch(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]", el.get("busid")), el.get("busid")
        assert el.get("link_speed") in ("2.5 GT/s PCIe", "5.0 GT/s PCIe", "8.0 GT/s PCIe", "16.0 GT/s PCIe", "32.0 GT/s PCIe", "64.0 GT/s PCIe")
gpus = root.findall(".//gpu")
assert len(gpus) == ngpu, len(gpus)
assert len(root.findall(".//nic/net")) == nnet
links = root.findall(".//gpu/nvlink")
assert sum(int(l.get("count")) for l in links) == nlinks, sum(int(l.get("count")) for l in links)
parent = {c: p for p in root.iter() for c in p}
for g in gpus:
    assert parent[g].tag == "pci" and parent[g].get("class").startswith("0x03")
    assert "rank" not in g.attrib
busids = {parent[g].get("busid") for g in gpus}
for l in links:
    if l.get("tclass") == "0x030200":
        assert l.get("target") in busids, l.get("target")
for c in root.findall("cpu"):
    assert c.get("numaid") is not None and re.fullmatch(r"[0-9a-f]{8}(,[0-9a-f]{8})*", c.get("affinity"))
PY
}
# NVLink totals: dgx1 8 GPUs x 6 links; nvswitch8 8 x 12; none on PCIe-only nodes.
check "dgx1 XML: parses, NCCL rules, 8 GPUs, 4 nets, 48 NVLink lanes" check_xml "$WORK/dgx1.xml" 8 4 48
check "nvswitch8 XML: NVSwitch links (0x068000), 96 lanes" check_xml "$WORK/nvswitch8.xml" 8 4 96
check "pcie4 XML: no NVLink elements" check_xml "$WORK/pcie4.xml" 4 2 0
check "nogpu XML: valid with no GPU" check_xml "$WORK/nogpu.xml" 0 1 0

# A cloud VM's virtio-net interface (eth0 -> .../0000:00:03.0/virtio2) is its PCI function's NIC
# (it was not seen at all); the matrix is headed with the tree's path, not "fixture"; --help.
m=$(T cloudvm matrix)
expect "cloudvm: the virtio-net interface is a NIC, under the tree's name" "$m" "topology of $FX/cloudvm: 0 GPU(s), 1 NIC(s), 1 NUMA node(s)"
b=$(T cloudvm bind "" "" 0 0-1)
expect "cloudvm: the virtio-net interface is chosen" "$b" "gpu=- pci=- cpus=0-1 numa_local=0 nic=eth0"
h=$("$TOOL" --help 2>&1); rc=$?
if ((rc == 0)) && [[ $h == *"usage: dltrain-topo NVML_LIB SYSFS_ROOT matrix"* && $h == *"See dltrain-topo(8)."* ]]; then ok "dltrain-topo --help: usage and the commands, status 0"
else not_ok "dltrain-topo --help (rc=$rc)"; echo "$h" | diag; fi
exit 0
