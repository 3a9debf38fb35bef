#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The scale benchmark's small version (tests/bench/scale.sh runs up to 1,024 ranks): 16 nodes x 8
# ranks = 128 on one machine (every node the 8-GPU dgx1 fixture). Checked, not timed (the times
# are printed): the rank contract of all 128 tasks (tests/bench/scale_check.py); dltrain env on
# all 16 nodes passing with a bounded report (no line per rank on stderr), and failing with one (8
# lines, then counts) where no rank can read its topology file; a rank that exits before
# the bootstrap and a rank stopped (SIGSTOP) before it end all 128 promptly, the cause named.
. "$(dirname "$0")/lib.sh"
export DLT_CLUSTER_CPUS=8 DLT_CLUSTER_TOPO=dgx1
cluster_up 16 36
tap_plan 5
DLTRAIN=$DLT_BUILDDIR/trainer/dltrain
PROBE=$DLT_BUILDDIR/tests/slurm/pmix_probe
cd /tmp || exit 1
SRUN=(srun --quiet -N16 --ntasks-per-node=8 --gpus-per-node=8)
secs() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

# 1. The contract of every task, and the plugin's cost as srun sees it (printed).
t0=$(date +%s.%N); timeout 120 "${SRUN[@]}" true; plain=$(secs "$t0")
t0=$(date +%s.%N)
out=$(timeout 120 "${SRUN[@]}" --dl-train bash -c \
  'echo "$SLURM_PROCID $RANK $LOCAL_RANK $WORLD_SIZE $LOCAL_WORLD_SIZE $GROUP_RANK $SLURMD_NODENAME $MASTER_ADDR $MASTER_PORT $CUDA_VISIBLE_DEVICES $NCCL_TOPO_FILE"' 2>&1)
dl=$(secs "$t0")
if check=$(python3 "$DLT_SRCDIR/tests/bench/scale_check.py" 128 8 <<<"$out"); then
  ok "128 ranks on 16 nodes: $check (srun true ${plain} s, with --dl-train ${dl} s)"
else not_ok "the contract at 128 ranks: $check"; fi

# 2. dltrain env on all 16 nodes (2 ranks each: its MPI host communicator takes 30-200 s to start
# at 128 ranks over loopback TCP here, tests/bench/scale.sh): passes; stderr stays short (the
# per-rank checks say counts), one DLT_GPU_PCI line of counts.
t0=$(date +%s.%N)
timeout 300 srun --quiet -N16 --ntasks-per-node=2 --gpus-per-node=8 --mpi=pmix --dl-train "$DLTRAIN" env >"$WORK/env.out" 2>"$WORK/env.err"; rc=$?
el=$(secs "$t0")
nerr=$(grep -vc 'mca_base_component_repository_open' "$WORK/env.err")
if ((rc == 0 && nerr <= 4)) && grep -q '32 rank(s) on 16 node(s)' "$WORK/env.out" &&
  grep -q 'DLT_GPU_PCI over 32 rank(s)' "$WORK/env.out" && grep -q 'GPU check passed (32 rank(s)' "$WORK/env.out"; then
  ok "dltrain env on 16 nodes x 2 passes in $el s; $nerr line(s) on stderr, one DLT_GPU_PCI line of counts"
else not_ok "dltrain env on 16 nodes (rc=$rc, $nerr stderr lines, $el s)"; { head -5 "$WORK/env.err"; tail -5 "$WORK/env.out"; } | diag; fi

# 3. dltrain env where no rank can read its NCCL_TOPO_FILE (one the user set, which the plugin
# leaves alone), on all 16 nodes x 2 ranks: fails; each node's first rank said in full, 8 lines in
# all, the nodes first, the other 24 ranks counted.
out=$(NCCL_TOPO_FILE=/nonexistent/dltrain-scale/nccl_topo.xml timeout 300 srun --quiet -N16 --ntasks-per-node=2 \
  --gpus-per-node=8 --mpi=pmix --dl-train "$DLTRAIN" env 2>&1 >/dev/null); rc=$?
if ((rc != 0)) && [[ $(grep -c '^dltrain: rank [0-9]* (host n[0-9]*): NCCL_TOPO_FILE=.*cannot be read here' <<<"$out") == 8 &&
  $(grep -c 'either$' <<<"$out") == 0 &&
  $out == *"rank 14 (host n8): NCCL_TOPO_FILE=/nonexistent/"* && $out == *"... and 24 more rank(s); 16 node(s) in all"* &&
  $out == *"32 rank(s) cannot read their NCCL_TOPO_FILE"* ]]; then
  ok "32 ranks on 16 nodes that cannot read their NCCL_TOPO_FILE: 8 nodes named in full, the other 24 ranks counted"
else not_ok "unreadable topology files on 16 nodes (rc=$rc)"; grep -v -e mca_base -e '^srun' <<<"$out" | tail -12 | diag; fi

# 4. A rank that exits before it joins the bootstrap: all 128 end at once (the plugin), named.
t0=$(date +%s.%N)
out=$(timeout 120 "${SRUN[@]}" --dl-train bash -c \
  'if [ "$SLURM_PROCID" = 77 ]; then exit 3; fi; exec "$0" --timeout 60' "$PROBE" 2>&1); rc=$?
el=$(secs "$t0")
if ((rc != 0 && rc != 124)) && awk -v t="$el" 'BEGIN { exit !(t < 30) }' &&
  [[ $out == *"task 77 exited with status 3 before it joined the job's PMIx bootstrap"* ]]; then
  ok "rank 77 of 128 exits 3 before the bootstrap: every rank ends in $el s (not the 60 s timeout), task 77 named"
else not_ok "a rank gone before the bootstrap at 128 ranks (rc=$rc, $el s)"; grep -v mca_base <<<"$out" | tail -8 | diag; fi

# 5. A rank stopped (SIGSTOP) before the bootstrap: the others time out at their bound (10 s)
# naming it, and the step ends.
t0=$(date +%s.%N)
out=$(timeout 150 "${SRUN[@]}" --dl-train bash -c \
  'if [ "$SLURM_PROCID" = 100 ]; then kill -STOP $$; fi; exec "$0" --timeout 10' "$PROBE" 2>&1); rc=$?
el=$(secs "$t0")
if ((rc != 0 && rc != 124)) && awk -v t="$el" 'BEGIN { exit !(t < 60) }' && [[ $out == *"ranks that never arrived: 100 "* ]]; then
  ok "rank 100 of 128 stopped before the bootstrap: the step ends in $el s, the others naming rank 100"
else not_ok "a stopped rank at 128 ranks (rc=$rc, $el s)"; grep -v mca_base <<<"$out" | tail -8 | diag; fi
exit 0
