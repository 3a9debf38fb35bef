#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""topo_compare.py OURS NCCL_OWN [MERGED]: the plugin's NCCL topology file against NCCL's reading
of the same node.

OURS      the file the plugin writes (dltrain-topo ... xml, or the step's NCCL_TOPO_FILE)
NCCL_OWN  NCCL_TOPO_DUMP_FILE of a run without NCCL_TOPO_FILE: NCCL's own detection
MERGED    NCCL_TOPO_DUMP_FILE of a run with NCCL_TOPO_FILE=OURS (optional)

Checks, printing each side where they differ:
- every attribute OURS writes on a node NCCL also found (a <pci> by busid, a <cpu> by numaid, a
  <net> by name) has NCCL's own value (link speeds and widths, PCI ids, the CPU's arch, vendor,
  family and model; affinity compared as a CPU set), and the node hangs from the same PCI parent;
- MERGED (NCCL read OURS): those values came through, and NCCL filled what OURS leaves to it (a
  GPU's dev, sm and gdr; a NIC's speed, port and guid) as in its own detection.
Nodes only one side has are listed, not failed: NCCL keeps only the GPUs and NICs its ranks use.
Exit status: 0 when they agree, 1 when they differ, 2 on a file that is not NCCL's XML.
"""
import sys
import xml.etree.ElementTree as ET

PCI_KEYS = ("class", "vendor", "device", "subsystem_vendor", "subsystem_device", "link_speed", "link_width")
CPU_KEYS = ("arch", "vendor", "familyid", "modelid")
NCCL_FILLS = {"gpu": ("dev", "sm", "gdr"), "net": ("speed", "port", "guid", "gdr")}


def load(path):
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as e:
        print("topo_compare: %s: %s" % (path, e))
        sys.exit(2)
    if root.tag != "system":
        print("topo_compare: %s: the root is <%s>, not <system>" % (path, root.tag))
        sys.exit(2)
    parent = {c: p for p in root.iter() for c in p}
    pci = {e.get("busid", "").lower(): e for e in root.iter("pci")}
    cpu = {e.get("numaid"): e for e in root.iter("cpu")}
    net = {e.get("name"): e for e in root.iter("net")}
    return parent, pci, cpu, net


def cpuset(mask):
    """NCCL's affinity text (comma-separated 32-bit hex words, high first) as an integer."""
    return int(mask.replace(",", ""), 16) if mask else None


def up_busid(parent, e):
    p = parent.get(e)
    while p is not None and p.tag not in ("pci", "cpu"):
        p = parent.get(p)
    if p is None:
        return "-"
    return p.get("busid") if p.tag == "pci" else "cpu%s" % p.get("numaid")


def match(kind, ours, theirs, keys, name, bad, notes):
    """Nodes of OURS by key against THEIRS: each in keys that OURS writes must have THEIRS's value.
    Yields each pair found, for the checks of its kind."""
    for key, e in sorted(ours.items()):
        t = theirs.get(key)
        if t is None:
            notes.append("%s %s: not in %s" % (kind, key, name))
            continue
        for k in keys:
            if k in e.attrib and e.get(k) != t.get(k):
                bad.append("%s %s %s: ours %r, %s %r" % (kind.split()[0], key, k, e.get(k), name, t.get(k)))
        yield key, e, t


def compare(ours, theirs, name, bad, notes):
    op, opci, ocpu, onet = ours
    tp, tpci, tcpu, tnet = theirs
    for busid, e, t in match("pci", opci, tpci, PCI_KEYS, name, bad, notes):
        if up_busid(op, e) != up_busid(tp, t):
            bad.append("pci %s hangs from %s in ours, from %s in %s" % (busid, up_busid(op, e), up_busid(tp, t), name))
    for numa, e, t in match("cpu numaid", ocpu, tcpu, CPU_KEYS, name, bad, notes):
        if "affinity" in e.attrib and cpuset(e.get("affinity")) != cpuset(t.get("affinity")):
            bad.append("cpu %s affinity: ours %s, %s %s" % (numa, e.get("affinity"), name, t.get("affinity")))
    for n, e in sorted(onet.items()):
        t = tnet.get(n)
        if t is None:
            notes.append("net %s: not in %s" % (n, name))
        elif up_busid(op, e) != up_busid(tp, t):
            bad.append("net %s under %s in ours, under %s in %s" % (n, up_busid(op, e), up_busid(tp, t), name))


def filled(own, merged, bad, notes):
    """What OURS leaves to NCCL: in the merged dump, NCCL's own values."""
    _, opci, _, onet = own
    _, mpci, _, mnet = merged
    for busid, e in sorted(mpci.items()):
        g = e.find("gpu")
        o = opci.get(busid)
        if g is None or o is None or o.find("gpu") is None:
            continue
        for k in NCCL_FILLS["gpu"]:
            if g.get(k) != o.find("gpu").get(k):
                bad.append("gpu %s %s: merged %r, NCCL's own %r" % (busid, k, g.get(k), o.find("gpu").get(k)))
    for n, e in sorted(mnet.items()):
        o = onet.get(n)
        if o is None:
            notes.append("net %s: only in the merged dump" % n)
            continue
        for k in NCCL_FILLS["net"]:
            if e.get(k) != o.get(k):
                bad.append("net %s %s: merged %r, NCCL's own %r" % (n, k, e.get(k), o.get(k)))


def main(argv):
    if len(argv) not in (3, 4):
        print(__doc__.strip().splitlines()[0])
        return 2
    ours, own = load(argv[1]), load(argv[2])
    bad, notes = [], []
    compare(ours, own, "NCCL's own", bad, notes)
    if len(argv) == 4:
        merged = load(argv[3])
        compare(ours, merged, "merged", bad, notes)
        filled(own, merged, bad, notes)
    for n in notes:
        print("topo_compare: note: " + n)
    for b in bad:
        print("topo_compare: DIFFERS: " + b)
    print("topo_compare: %d pci, %d cpu, %d net in ours; %d difference(s)" %
          (len(ours[1]), len(ours[2]), len(ours[3]), len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
