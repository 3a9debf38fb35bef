#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/device/two_ranks.sh N CMD [ARGS...]: N ranks of CMD on this host without Slurm or a PMIx
# server, for the one-GPU device check (the lent machine has neither, and NCCL >= 2.30 runs several
# ranks on one GPU with NCCL_MULTI_RANK_GPU_ENABLE=1). The ranks meet through libdltpmix's test
# rendezvous (DLTPMIX_TEST_RENDEZVOUS: files in a fresh directory, every wait bounded by
# DLTPMIX_TIMEOUT), so NCCL's unique id travels from rank 0 to the others as under srun it travels
# through PMIx. When one rank fails the others are ended (TERM, KILL 2 s later); a TERM to this
# script ends them all. Each rank's output is printed after, prefixed "[rank R] ". Exit status: the
# first failing rank's, else 0.
# DLT_RANK_HOSTID=1: each rank gets NCCL_HOSTID=dlt-rank-R, so NCCL (any version) takes the ranks
# for separate hosts and lets them share the GPU over its network (socket) transport: NCCL's host
# hash is taken from NCCL_HOSTID when set, and its duplicate-GPU refusal compares host hashes
# (doc/gpu.md "Two ranks on one GPU").
# DLT_RANKS_KEEP=1: a failing rank does not end the others (each rank's exit is said as it comes):
# the kill-rank phase checks that the ranks end by themselves when a peer dies.
set -u
n=${1:?usage: two_ranks.sh N CMD [ARGS...]}; shift
[ $# -gt 0 ] || { echo "usage: two_ranks.sh N CMD [ARGS...]" >&2; exit 2; }
dir=$(mktemp -d /tmp/dlt-rdv.XXXXXX)
pids=() rc=0
stop() {
  for p in "${pids[@]}"; do kill -TERM -- "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null; done
  for _ in $(seq 20); do
    alive=0; for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && return; sleep 0.1
  done
  for p in "${pids[@]}"; do kill -KILL -- "-$p" 2>/dev/null || kill -KILL "$p" 2>/dev/null; done
}
trap 'stop; rc=143' TERM INT
for ((r = 0; r < n; r++)); do
  # Each rank leads a process group of its own, so ending it ends whatever it started.
  hostid=()
  [ "${DLT_RANK_HOSTID:-0}" = 1 ] && hostid=(NCCL_HOSTID="dlt-rank-$r")
  env "${hostid[@]}" DLTPMIX_TEST_RENDEZVOUS="$dir" DLTPMIX_TEST_RANK=$r DLTPMIX_TEST_SIZE="$n" setsid "$@" >"$dir/out.$r" 2>&1 &
  pids+=($!)
done
running=("${pids[@]}")
while [ "${#running[@]}" -gt 0 ] && [ "$rc" != 143 ]; do
  done_pid=
  wait -n -p done_pid "${running[@]}"; st=$?
  [ -n "${done_pid:-}" ] || break
  rest=(); for p in "${running[@]}"; do [ "$p" = "$done_pid" ] || rest+=("$p"); done; running=("${rest[@]}")
  if [ "$st" -ne 0 ] && [ "${DLT_RANKS_KEEP:-0}" = 1 ]; then
    for ((r = 0; r < n; r++)); do [ "${pids[$r]}" = "$done_pid" ] && echo "two_ranks: rank $r exited $st"; done
    [ "$rc" != 0 ] || rc=$st
  elif [ "$st" -ne 0 ]; then
    rc=$st
    for ((r = 0; r < n; r++)); do [ "${pids[$r]}" = "$done_pid" ] && echo "two_ranks: rank $r exited $st: ending the others"; done
    stop
    break
  fi
done
wait 2>/dev/null
for ((r = 0; r < n; r++)); do sed "s/^/[rank $r] /" "$dir/out.$r"; done
rm -rf "$dir"
exit "$rc"
