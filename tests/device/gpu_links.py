#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""gpu_links.py N TOPO_M SMI_Q: what a machine of N GPUs offers NCCL, from `nvidia-smi topo -m` and
`nvidia-smi -q` saved to files (tests/device/run.sh --ranks N, phase topology). Prints one line per
check, OK or FAIL, a tab, then what was read:
- the link between every pair of GPUs 0..N-1 (NV# = NVLink, PIX/PXB = PCIe switches, PHB/NODE/SYS
  = through a host bridge or the CPUs), counted by kind;
- each GPU's fabric state: on an NVSwitch machine (HGX H100/H200) the GPUs' NVLinks work only once
  nvidia-fabricmanager has trained the fabric ("Fabric" section: State Completed, Status Success);
  until then CUDA's peer access fails, and with it NCCL's P2P transport. GPUs without a fabric say
  N/A.
nvidia-smi underlines the matrix's header with terminal escapes even into a file: they are removed."""
import re
import sys


def links(n, topo):
    """(rows, {kind: [pairs]}) of the topo -m matrix for GPUs 0..n-1."""
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", l) for l in topo.splitlines()]
    head = next((l for l in lines if re.search(r"\bGPU0\b", l) and l.split("\t")[0].strip() != "GPU0"), None)
    kinds, rows = {}, 0
    if head is None:
        return 0, kinds
    cols = [c.strip() for c in head.split("\t")]
    for l in lines:
        f = [c.strip() for c in l.split("\t")]
        m = re.match(r"^GPU(\d+)$", f[0])
        if not m:
            continue
        rows += 1
        i = int(m.group(1))
        for j in range(i + 1, n):
            name = "GPU%d" % j
            if name in cols and cols.index(name) < len(f):
                kinds.setdefault(f[cols.index(name)], []).append("%d-%d" % (i, j))
    return rows, kinds


def fabric(q):
    """[(bus id, state, status)] per GPU section of nvidia-smi -q ("N/A" where there is no Fabric)."""
    out = []
    for sec in re.split(r"^(?=GPU [0-9A-Fa-f]+:)", q, flags=re.M):
        b = re.match(r"^GPU (\S+)", sec)
        f = re.search(r"^\s+Fabric\s*\n\s+State\s+:\s+(.*)\n\s+Status\s+:\s+(.*)$", sec, re.M)
        if b:
            out.append((b.group(1), f.group(1).strip() if f else "N/A", f.group(2).strip() if f else "N/A"))
    return out


def main():
    n = int(sys.argv[1])
    topo = open(sys.argv[2], errors="replace").read()
    q = open(sys.argv[3], errors="replace").read()
    rows, kinds = links(n, topo)
    pairs, want = sum(len(v) for v in kinds.values()), n * (n - 1) // 2
    said = ", ".join("%s x %d" % (k, len(v)) for k, v in sorted(kinds.items())) or "(nothing read)"
    note = "" if all(k.startswith("NV") for k in kinds) else " (not all NVLink: NCCL's rings cross PCIe or the CPUs there)"
    print("%s\tnvidia-smi topo -m: %d GPU rows; the %d pair(s) of GPUs 0..%d linked by %s%s" %
          ("OK" if rows >= n and pairs == want else "FAIL", rows, want, n - 1, said, note))
    gpus = fabric(q)
    bad = [g for g in gpus if g[1] not in ("Completed", "N/A") or g[2] not in ("Success", "N/A")]
    states = "; ".join(sorted({"State %s, Status %s" % (st, su) for _, st, su in gpus})) or "no GPU read"
    why = "" if not bad else (": GPU %s is not ready (State %s, Status %s): start nvidia-fabricmanager (its version "
                              "must match the driver's); until its state is Completed, NVLink peer access fails" % bad[0])
    print("%s\tfabric (nvidia-smi -q) of %d GPU(s): %s%s" % ("OK" if gpus and not bad else "FAIL", len(gpus), states, why))
    return 0


if __name__ == "__main__":
    sys.exit(main())
