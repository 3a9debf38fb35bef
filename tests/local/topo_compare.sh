#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/device/topo_compare.py, the GPU check's comparison of the plugin's NCCL topology file with
# NCCL's own dump of the node, without a GPU: the fixture dgx1's file against a dump made from it
# the way NCCL writes one (host_hash on the CPU; dev, sm, rank, gdr and NVLinks on its GPU; dev,
# speed, port, guid, maxconn, latency and gdr on each net; GPUs no rank uses trimmed) agrees; each
# kind of difference is found and named with both values; a file that is not NCCL's XML is status 2.
. "$(dirname "$0")/../slurm/lib.sh"
TOOL=$DLT_BUILDDIR/dltrain-topo
FAKE=$DLT_BUILDDIR/tests/fake_nvml/.libs/libfakenvml.so
CMP=$DLT_SRCDIR/tests/device/topo_compare.py
[[ -x $TOOL && -f $FAKE ]] || skip_all "dltrain-topo or the fake NVML not built"
command -v python3 >/dev/null || skip_all "python3 missing"
tap_plan 5
rm -rf "$WORK"; mkdir -p "$WORK"
python3 "$DLT_SRCDIR/tests/fixtures/mktopo.py" dgx1 "$WORK/dgx1"
DLT_FAKE_NVML=$WORK/dgx1/nvml.txt "$TOOL" "$FAKE" "$WORK/dgx1" xml >"$WORK/ours.xml" 2>&1
# dump OURS OUT [EDIT]: NCCL's dump of the node, one rank on GPU 0000:05:00.0; EDIT changes it.
dump() {
  python3 - "$@" <<'PY'
import sys, xml.etree.ElementTree as ET
ours, out = sys.argv[1], sys.argv[2]
edit = sys.argv[3] if len(sys.argv) > 3 else ""
root = ET.parse(ours).getroot()
parent = {c: p for p in root.iter() for c in p}
for c in root.iter("cpu"):
    c.set("host_hash", "0x1234abcd")
for g in list(root.iter("gpu")):
    pci = parent[g]
    if pci.get("busid") != "0000:05:00.0":  # no rank there: trimmed
        parent[pci].remove(pci)
        continue
    g.attrib.update({"dev": "0", "sm": "70", "rank": "0", "gdr": "1"})
    ET.SubElement(g, "nvlink", {"target": "0000:06:00.0", "count": "1", "tclass": "0x030200"})
for i, n in enumerate(root.iter("net")):
    n.attrib.update({"dev": str(i), "speed": "100000", "port": "1", "latency": "0", "guid": "0x%x" % (0x248a07030000 + i),
                     "maxconn": "131072", "gdr": "1"})
if edit == "speed":
    next(p for p in root.iter("pci") if p.get("busid") == "0000:05:00.0").set("link_speed", "16.0 GT/s PCIe")
elif edit == "family":
    next(root.iter("cpu")).set("familyid", "143")
elif edit == "gdr":
    next(root.iter("gpu")).set("gdr", "0")
ET.ElementTree(root).write(out)
PY
}
dump "$WORK/ours.xml" "$WORK/own.xml"
dump "$WORK/ours.xml" "$WORK/merged.xml"
out=$(python3 "$CMP" "$WORK/ours.xml" "$WORK/own.xml" "$WORK/merged.xml" 2>&1); rc=$?
if ((rc == 0)) && [[ $out == *"0 difference(s)"* && $out == *"note: pci 0000:06:00.0: not in NCCL's own"* ]]; then
  ok "the fixture's file and NCCL's dump of it agree (GPUs NCCL trimmed are notes, not differences)"
else not_ok "agreeing dumps (rc=$rc)"; echo "$out" | diag; fi
dump "$WORK/ours.xml" "$WORK/own-speed.xml" speed
out=$(python3 "$CMP" "$WORK/ours.xml" "$WORK/own-speed.xml" 2>&1); rc=$?
if ((rc == 1)) && [[ $out == *"DIFFERS: pci 0000:05:00.0 link_speed: ours '8.0 GT/s PCIe', NCCL's own '16.0 GT/s PCIe'"* ]]; then
  ok "a link speed NCCL reads otherwise: named with both values, status 1"
else not_ok "link speed difference (rc=$rc)"; echo "$out" | diag; fi
dump "$WORK/ours.xml" "$WORK/own-family.xml" family
out=$(python3 "$CMP" "$WORK/ours.xml" "$WORK/own-family.xml" 2>&1); rc=$?
if ((rc == 1)) && [[ $out == *"DIFFERS: cpu 0 familyid: ours '6', NCCL's own '143'"* ]]; then
  ok "a CPU family NCCL computes otherwise: named, status 1"
else not_ok "family difference (rc=$rc)"; echo "$out" | diag; fi
dump "$WORK/ours.xml" "$WORK/merged-gdr.xml" gdr
out=$(python3 "$CMP" "$WORK/ours.xml" "$WORK/own.xml" "$WORK/merged-gdr.xml" 2>&1); rc=$?
if ((rc == 1)) && [[ $out == *"DIFFERS: gpu 0000:05:00.0 gdr: merged '0', NCCL's own '1'"* ]]; then
  ok "with the file NCCL filled a GPU otherwise than alone: named, status 1"
else not_ok "merged gdr difference (rc=$rc)"; echo "$out" | diag; fi
echo "not xml" >"$WORK/bad.xml"
out=$(python3 "$CMP" "$WORK/ours.xml" "$WORK/bad.xml" 2>&1); rc=$?
if ((rc == 2)) && [[ $out == *"bad.xml"* ]]; then ok "a dump that is not XML: status 2, naming it"
else not_ok "bad dump (rc=$rc)"; echo "$out" | diag; fi
exit 0
