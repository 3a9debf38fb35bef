#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Which GPU each rank trains on, as `dltrain env` reports it (the rule dltrain train uses): with
# plain --gpus-per-node (every GPU of the node visible to every task), with the plugin's
# gpus=task and gpus=step, every rank of a node gets its own; two ranks of a node on one GPU are
# refused before NCCL would fail, naming the fix.
. "$(dirname "$0")/lib.sh"
cluster_up 2 7
tap_plan 4
DLTRAIN=$DLT_BUILDDIR/trainer/dltrain
cd /tmp

# "host device=GPU" per rank from the table rank 0 prints (the first table: the contract's follows), sorted.
claims() { sed '/^torch.distributed contract/,$d' | awk '$1 ~ /^[0-9]+$/ && NF >= 9 {print $2, $NF}' | sort; }
distinct() { local c; c=$(claims <<<"$1"); [[ -n $c && $(wc -l <<<"$c") -eq $2 && $(sort -u <<<"$c" | awk '{print $1, $2}' | sed 's/^\(\S*\) [0-9]*=/\1 /' | sort -u | wc -l) -eq $2 ]]; }

out=$(timeout 60 srun --quiet -N2 --ntasks-per-node=4 --gpus-per-node=4 "$DLTRAIN" env 2>&1); rc=$?
if ((rc == 0)) && distinct "$out" 8 && [[ $(claims <<<"$out") == *"n1 3=3"* && $out == *"GPU check passed (8 rank(s), one GPU each)"* ]]; then
  ok "plain --gpus-per-node=4, 4 tasks/node: local rank r trains on device r (4 distinct GPUs per node)"
else not_ok "plain --gpus-per-node (rc=$rc)"; echo "$out" | diag; fi

# Two tasks per node: with bind=closest both ranks of a node share its one CPU of a NUMA node here,
# and more ranks than that only slow OpenMPI's loopback TCP down.
out=$(timeout 60 srun --quiet -N2 --ntasks-per-node=2 --gpus-per-node=4 --dl-train=gpus=step "$DLTRAIN" env 2>&1); rc=$?
if ((rc == 0)) && distinct "$out" 4 && [[ $(claims <<<"$out") == *"n1 0=1"* && $out == *"1,0,3,2"* ]]; then
  ok "--dl-train=gpus=step: every GPU visible, each rank's own is device 0 (distinct GPUs per node)"
else not_ok "gpus=step (rc=$rc)"; echo "$out" | diag; fi

out=$(timeout 60 srun --quiet -N2 --ntasks-per-node=2 --gpus-per-node=2 --dl-train "$DLTRAIN" env 2>&1); rc=$?
if ((rc == 0)) && distinct "$out" 4; then ok "--dl-train (gpus=task): one visible GPU per rank, distinct"; else not_ok "gpus=task (rc=$rc)"; echo "$out" | diag; fi

out=$(timeout 60 srun --quiet -N1 -n2 --gpus-per-task=1 --gpus=1 "$DLTRAIN" env 2>&1); rc=$?
if ((rc != 0)) && [[ $out == *"would both train on GPU"* && $out == *"give each task its own GPU"* ]]; then
  ok "two ranks of a node on one GPU: refused, naming both ranks and the fix"
else
  # Slurm may refuse the request itself (fewer GPUs than tasks); then share one GPU explicitly.
  out=$(timeout 60 srun --quiet -N1 -n2 --gpus-per-node=1 "$DLTRAIN" env 2>&1); rc=$?
  if ((rc != 0)) && [[ $out == *"would both train on GPU"* && $out == *"give each task its own GPU"* ]]; then
    ok "two ranks of a node on one GPU: refused, naming both ranks and the fix"
  else not_ok "shared GPU refused (rc=$rc)"; echo "$out" | diag; fi
fi
exit 0
