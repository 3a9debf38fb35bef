#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""scale_check.py RANKS PER_NODE < lines: the rank contract of every task of one --dl-train step,
one line per task: SLURM_PROCID RANK LOCAL_RANK WORLD_SIZE LOCAL_WORLD_SIZE GROUP_RANK NODE
MASTER_ADDR MASTER_PORT CUDA_VISIBLE_DEVICES NCCL_TOPO_FILE. Checks: every rank once; RANK is
SLURM_PROCID; WORLD_SIZE is RANKS; on each node the local ranks are 0..PER_NODE-1 once,
LOCAL_WORLD_SIZE is PER_NODE, one GROUP_RANK (the nodes' are 0..nodes-1 once), distinct GPUs and
one NCCL_TOPO_FILE; one MASTER_ADDR:PORT, and rank 0's node's. Prints "ok: ..." or the first
problems, and exits 0 or 1."""
import collections
import sys


def main():
    ranks, per = int(sys.argv[1]), int(sys.argv[2])
    bad = []
    rows = [l.split() for l in sys.stdin if l.strip()]
    by_rank, nodes = {}, collections.defaultdict(list)
    for f in rows:
        if len(f) != 11:
            bad.append("line with %d fields: %s" % (len(f), " ".join(f)[:120]))
            continue
        procid, rank, local, world, local_world, group, node, addr, port, cvd, topo = f
        if procid in by_rank:
            bad.append("rank %s twice" % procid)
        by_rank[procid] = f
        if rank != procid:
            bad.append("rank %s: RANK=%s" % (procid, rank))
        if world != str(ranks):
            bad.append("rank %s: WORLD_SIZE=%s" % (procid, world))
        if local_world != str(per):
            bad.append("rank %s: LOCAL_WORLD_SIZE=%s" % (procid, local_world))
        nodes[node].append(f)
    if sorted(by_rank, key=int) != [str(r) for r in range(ranks)]:
        bad.append("%d ranks seen, want 0..%d once each" % (len(by_rank), ranks - 1))
    masters = {(f[7], f[8]) for f in by_rank.values()}
    if len(masters) != 1:
        bad.append("%d MASTER_ADDR:PORT values" % len(masters))
    groups = []
    for node, fs in nodes.items():
        if sorted(int(f[2]) for f in fs) != list(range(per)):
            bad.append("node %s: LOCAL_RANK %s" % (node, sorted(int(f[2]) for f in fs)))
        g = {f[5] for f in fs}
        if len(g) != 1:
            bad.append("node %s: GROUP_RANK %s" % (node, sorted(g)))
        groups += list(g)
        if len({f[9] for f in fs}) != len(fs):
            bad.append("node %s: two tasks on one GPU (%s)" % (node, sorted(f[9] for f in fs)))
        if len({f[10] for f in fs}) != 1 or "/%s/" % node not in fs[0][10] and node not in fs[0][10]:
            bad.append("node %s: NCCL_TOPO_FILE %s" % (node, sorted({f[10] for f in fs})))
    if sorted(int(g) for g in groups) != list(range(len(nodes))):
        bad.append("GROUP_RANK over the nodes: not 0..%d once each" % (len(nodes) - 1))
    if bad:
        print("%d problem(s): %s" % (len(bad), "; ".join(bad[:8])))
        return 1
    print("ok: %d ranks on %d nodes, RANK/WORLD_SIZE/LOCAL_RANK/LOCAL_WORLD_SIZE/GROUP_RANK as Slurm's, "
          "one MASTER_ADDR:PORT, distinct GPUs and one topology file per node" % (ranks, len(nodes)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
