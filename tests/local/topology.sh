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
tap_plan 32

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
expect "dgx1 rank 0: GPU0, NUMA-local CPUs, nearest HCA" "$b" "gpu=0 pci=0000:05:00.0 cpus=0-19 numa_local=1 nic=mlx5_0 dist=PIX order="
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
expect "pcie4: Ethernet only: socket-local interface" "$b" "cpus=16-31 numa_local=1 nic=eth1 dist=PHB order="
b=$(T nogpu bind "" "" 0 0-7)
expect "no GPU in the step: no GPU, CPUs untouched, NIC still chosen" "$b" "gpu=- pci=- cpus=0-7 numa_local=0 nic=eth0"
b=$(T dgx1 bind 0,9 0,9 0 0-39)
expect "a step GPU NVML does not have is an error naming it" "$b" "the step's GPU 9"
b=$(T dgx1 bind "0,x" "" 0 0-39)
expect "a malformed CUDA_VISIBLE_DEVICES is refused" "$b" "is not a list of GPU indices"

for t in dgx1 nvswitch8 pcie4 nogpu; do T $t xml > "$WORK/$t.xml"; done
# The file against NCCL's reading of it (NCCL 2.28.9 / 2.30.7, src/graph/topo.cc and xml.cc): the
# parser's rules; the attributes NCCL requires on every node present (it fills them only on the
# way up from its own GPU, never for a NIC's branch); none of the attributes NCCL fills itself
# where the file leaves them out (a written one overrides its detection: gdr="1" skipped its
# GPUDirect RDMA check, guid="0x0" made all Ethernet NICs one device); each link the slower of
# the function and its upstream port, as NCCL reads max_link_speed and ../max_link_speed.
check_xml() {
  python3 - "$@" <<'PY'
import re, sys, xml.etree.ElementTree as ET
path, ngpu, nnet = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
text = open(path).read()
assert not text.startswith("<?xml"), "prolog present"
assert "\t" not in text, "tab present"
root = ET.fromstring(text)
assert root.tag == "system" and root.get("version") == "1"
SPEEDS = ("2.5 GT/s PCIe", "5.0 GT/s PCIe", "8.0 GT/s PCIe", "16.0 GT/s PCIe", "32.0 GT/s PCIe", "64.0 GT/s PCIe")
NCCL_FILLS = {"gpu": {"dev", "sm", "gdr", "rank", "keep", "mlopart"},
              "net": {"dev", "latency", "speed", "port", "guid", "maxconn", "gdr", "coll", "rail", "plane", "net",
                      "gin", "rma", "keep"},
              "cpu": {"host_hash"}, "pci": {"keep"}}
REQUIRED = {"pci": {"busid", "class", "link_speed", "link_width"}, "cpu": {"numaid", "arch"}, "net": {"name"}}
parent = {c: p for p in root.iter() for c in p}
for el in root.iter():
    assert len(el.attrib) <= 16 and len(list(el)) <= 128, el.tag
    assert el.tag in ("system", "cpu", "pci", "gpu", "nic", "net"), "element %s (NVLinks are NCCL's to find)" % el.tag
    for v in el.attrib.values():
        assert len(v) <= 255
    filled = set(el.attrib) & NCCL_FILLS.get(el.tag, set())
    assert not filled, "%s carries %s, which NCCL fills itself" % (el.tag, sorted(filled))
    missing = REQUIRED.get(el.tag, set()) - set(el.attrib)
    assert not missing, "%s lacks %s, which NCCL requires" % (el.tag, sorted(missing))
    if el.tag == "pci":
        assert re.fullmatch(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]", el.get("busid")), el.get("busid")
        assert el.get("link_speed") in SPEEDS, el.get("link_speed")
        assert re.fullmatch(r"0x[0-9a-f]{6}", el.get("class")), el.get("class")
        for k in ("vendor", "device", "subsystem_vendor", "subsystem_device"):
            assert k not in el.attrib or re.fullmatch(r"0x[0-9a-f]{4}", el.get(k)), (k, el.get(k))
        up = parent[el]
        if up.tag == "pci":
            assert float(el.get("link_speed").split()[0]) <= float(up.get("link_speed").split()[0]), el.get("busid")
            assert int(el.get("link_width")) <= int(up.get("link_width")), el.get("busid")
    if el.tag == "cpu":
        assert el.get("arch") in ("x86_64", "arm64", "ppc64"), el.get("arch")
        if el.get("arch") == "x86_64":
            assert el.get("vendor") and el.get("familyid", "").isdigit() and el.get("modelid", "").isdigit()
        assert "affinity" not in el.attrib or re.fullmatch(r"[0-9a-f]{8}(,[0-9a-f]{8})*", el.get("affinity"))
        assert el.get("affinity") != "00000000"
gpus = root.findall(".//gpu")
assert len(gpus) == ngpu, len(gpus)
for g in gpus:
    assert not g.attrib and not list(g), "a <gpu> is empty: NCCL fills it"
    assert parent[g].tag == "pci" and parent[g].get("class").startswith("0x03")
nets = root.findall(".//nic/net")
assert len(nets) == nnet
assert len({n.get("name") for n in nets}) == len(nets), "a NIC named twice"
PY
}
check "dgx1 XML: parses, required attributes, none NCCL fills, links capped by their port; 8 GPUs, 4 nets" check_xml "$WORK/dgx1.xml" 8 4
check "nvswitch8 XML: the same rules, 8 GPUs, 4 nets" check_xml "$WORK/nvswitch8.xml" 8 4
check "pcie4 XML: the same rules, 4 GPUs, 2 nets" check_xml "$WORK/pcie4.xml" 4 2
check "nogpu XML: valid with no GPU" check_xml "$WORK/nogpu.xml" 0 1

# The CPU as NCCL computes it: an AMD Zen's "cpu family 23" is CPUID family 15 + extended 8, which
# NCCL writes as 15 + (8 << 4) = 143; without a vendor (NCCL requires one on x86) no file at all.
cp -r "$FX/pcie4" "$FX/amd"; sed -i 's/GenuineIntel/AuthenticAMD/; s/cpu family\t: 6/cpu family\t: 23/; s/model\t\t: 85/model\t\t: 49/' "$FX/amd/proc/cpuinfo"
x=$(T amd xml)
expect "AMD Zen 2 (family 23, model 49): vendor AuthenticAMD, familyid 143, modelid 49, as NCCL's cpuid reading" "$x" 'arch="x86_64" vendor="AuthenticAMD" familyid="143" modelid="49"'
cp -r "$FX/pcie4" "$FX/novendor"; sed -i '/vendor_id/d' "$FX/novendor/proc/cpuinfo"
x=$(T novendor xml); rc=$?
if ((rc == 1)) && [[ $x == *"no NCCL topology file: /proc/cpuinfo names no CPU vendor, which NCCL requires on x86"* && $x != *"<system"* ]]; then
  ok "no CPU vendor on x86: no file (NCCL's own detection), saying why"
else not_ok "no CPU vendor (rc=$rc)"; echo "$x" | diag; fi

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
