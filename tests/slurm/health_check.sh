#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# dltrain check, train --preflight and the straggler detection on two slurmd (CPU backend, MPI):
# the all-reduce sums are exact and busbw follows its definition for 2 and 4 ranks, and one rank
# reports its sums with no bandwidth (there is no all-reduce to measure); a rank
# pinned to a CPU that busy loops occupy (started by this test, bounded) is named, with its host, by
# check, a rank whose compute takes 3x as long (test hook) by a short training, and no other rank
# is; a wrong GEMM (the test-only fault hook) is named by check and by --preflight, which stops
# every rank with status 4; site thresholds (--min-tflops, --min-busbw) name what is below them;
# and contrib/sbatch/health-check-train.sbatch excludes the node the check named and requeues itself.
. "$(dirname "$0")/lib.sh"
# Slurm holds a requeued job cred_expire seconds (120 by default) before it may start again: 30 here
# (test 15 waits the hold out).
export DLT_CLUSTER_CRED_EXPIRE=30
cluster_up 2 18
tap_plan 15
DLTRAIN=$DLT_BUILDDIR/trainer/dltrain
cd /tmp
SRUN=(srun --quiet --gpus-per-node=2 --mpi=pmix --dl-train)
CHECK=(check --gemm-size 256 --gemm-seconds 0.3 --max-bytes 64K --iters 3)

# Each rank's exit status into $WORK/rc.RANK; every rank on CPU 1, and the rank $DLT_SLOW_RANK
# beside three busy loops of its own (killed when it ends, at most 90 s), started before it: each
# says so from CPU 1 (a file) and the rank waits for the three (bounded 20 s). The kernel shares a
# CPU between sessions (autogroup), and a task is a session: rank 0 and rank 1's session get half
# of CPU 1 each, and rank 1 a quarter of its session's half, whatever else runs there. Rank 0 on
# CPU 0 instead met the ranks lab2 pins there for the cluster test make -j2 runs beside this one,
# and ran as slowly as rank 1 (0.0362 and 0.0270 TFLOP/s, "healthy"; alone 0.1075 and 0.0270).
cat > "$WORK/rank.sh" <<EOF
#!/bin/sh
loops=""
if [ -n "\${DLT_SLOW_RANK:-}" ]; then
  if [ "\$SLURM_PROCID" = "\$DLT_SLOW_RANK" ]; then
    rm -f "$WORK"/loop.*
    for i in 1 2 3; do
      timeout 90 taskset -c 1 sh -c ': > "\$1"; while :; do :; done' loop "$WORK/loop.\$i" >/dev/null 2>&1 & loops="\$loops \$!"
    done
    n=0
    while [ "\$(ls "$WORK"/loop.* 2>/dev/null | wc -l)" -lt 3 ] && [ \$n -lt 200 ]; do sleep 0.1; n=\$((n + 1)); done
  fi
  taskset -c 1 "\$@"; rc=\$?
else "\$@"; rc=\$?; fi
[ -n "\$loops" ] && kill \$loops 2>/dev/null
echo \$rc > "$WORK/rc.\$SLURM_PROCID"
exit \$rc
EOF
chmod +x "$WORK/rank.sh"

# 1-3: exact sums and busbw = algbw x 2(n-1)/n (from the JSON's figures) at 2 and 4 ranks; at one
# rank the same sizes with exact sums and no time or bandwidth (null), and the note saying why.
for shape in "-N1 -n1" "-N2 -n2" "-N2 --ntasks-per-node=2"; do
  # shellcheck disable=SC2086
  out=$(timeout 120 "${SRUN[@]}" $shape "$DLTRAIN" "${CHECK[@]}" --min-fraction 0 --json 2>&1); rc=$?
  json=$(grep '^{"verdict"' <<<"$out")
  if ((rc == 0)) && python3 - "$json" <<'EOF'
import json, sys
d = json.loads(sys.argv[1])
n = d["ranks"]
pts = d["allreduce"]
assert [p["bytes"] for p in pts] == [8 << i for i in range(14)], [p["bytes"] for p in pts]
for p in pts:
    assert p["wrong"] == 0, p
    if n == 1:
        assert p["time_us"] is None and p["algbw_gbs"] is None and p["busbw_gbs"] is None, p
        assert d["allreduce_note"] == "one rank: no all-reduce to measure, sums checked", d
        continue
    assert "allreduce_note" not in d, d
    want = p["algbw_gbs"] * 2 * (n - 1) / n
    assert abs(p["busbw_gbs"] - want) <= 1e-5 * max(want, 1e-12), (p, want)
    assert n == 1 or abs(p["algbw_gbs"] - p["bytes"] / (p["time_us"] * 1e-6) / 1e9) <= 1e-3 * p["algbw_gbs"], p
assert all(c["exact"] for c in d["compute"]) and len(d["compute"]) == n
EOF
  then ok "check with $(grep -o '"ranks":[0-9]*' <<<"$json"): 14 sizes 8 B..64 KiB, every sum exact, $([[ $shape == "-N1 -n1" ]] && echo "no bandwidth on one rank (null)" || echo "busbw = algbw x 2(n-1)/n")"
  else not_ok "check sweep ($shape, rc=$rc)"; echo "$out" | tail -8 | diag; fi
done

# 4: one rank for people: the sums, no all-reduce figures, said why; --preflight's one line the same.
out=$(timeout 120 "${SRUN[@]}" -N1 -n1 "$DLTRAIN" "${CHECK[@]}" --min-fraction 0 2>&1); rc=$?
pre=$(timeout 120 "${SRUN[@]}" -N1 -n1 "$DLTRAIN" train --synthetic --arch resnet18 --width 0.25 --image-size 32 \
  --classes 4 --batch 8 --synthetic-size 64 --steps 1 --preflight 2>&1); prc=$?
if ((rc == 0 && prc == 0)) &&
  grep -qx 'all-reduce: one rank, no all-reduce to measure (bandwidth needs two ranks or more); sums at 14 size(s), 8 to 65536 bytes: exact' <<<"$out" &&
  ! grep -q 'GB/s' <<<"$out" && grep -q '^verdict: healthy (exit status 0)' <<<"$out" &&
  grep -q '^dltrain: preflight healthy: GEMM .* TFLOP/s (fp32, 1 rank, every result exact); one rank: no all-reduce to measure$' <<<"$pre" &&
  ! grep -q 'busbw' <<<"$pre"; then
  ok "one rank: check and --preflight say there is no all-reduce to measure (sums exact), no GB/s figure"
else not_ok "one rank (check rc=$rc, preflight rc=$prc)"; { echo "$out"; echo "$pre"; } | grep -v 'step [0-9]*/' | tail -12 | diag; fi

# 5: the table for people, with the isolation steps and the verdict.
out=$(timeout 120 "${SRUN[@]}" -N2 --ntasks-per-node=2 "$DLTRAIN" "${CHECK[@]}" --min-fraction 0 2>&1); rc=$?
if ((rc == 0)) && grep -q '^compute:' <<<"$out" && grep -q '^all-reduce (4 ranks, mpi' <<<"$out" &&
  grep -q 'within n1 .*expected link: shared memory' <<<"$out" && grep -q 'across nodes .*busbw' <<<"$out" &&
  grep -q '^verdict: healthy (exit status 0)' <<<"$out"; then
  ok "-N2 --ntasks-per-node=2: compute table, sweep, within-node and across-node figures, verdict healthy"
else not_ok "check table (rc=$rc)"; echo "$out" | tail -12 | diag; fi

# 6: site thresholds: every rank below --min-tflops, the sweep and the cross-node figure below
# --min-busbw: degraded (3), each named.
out=$(timeout 120 "${SRUN[@]}" -N2 -n2 "$DLTRAIN" "${CHECK[@]}" --min-fraction 0 --min-tflops 1000 --min-busbw 1000 2>&1); rc=$?
if ((rc == 3)) && grep -q 'verdict: degraded (exit status 3)' <<<"$out" &&
  [[ $(grep -c 'rank [01] (host n[12], local rank 0, cpu [0-9,-]*): GEMM .* TFLOP/s, below --min-tflops 1000' <<<"$out") == 2 ]] &&
  grep -q 'all-reduce of 65536 bytes over 2 ranks: busbw .* below --min-busbw 1000' <<<"$out" &&
  grep -q 'across nodes (one rank per node): busbw .* below --min-busbw 1000' <<<"$out"; then
  ok "--min-tflops / --min-busbw: both ranks, the sweep and the cross-node figure named, exit 3"
else not_ok "site thresholds (rc=$rc)"; echo "$out" | grep -v '^ *[0-9]* *3 ' | tail -8 | diag; fi

# 7: a real straggler in check: rank 1 (on n2) shares CPU 1 with three busy loops.
rm -f "$WORK"/rc.*
out=$(DLT_SLOW_RANK=1 timeout 120 "${SRUN[@]}" -N2 -n2 "$WORK/rank.sh" "$DLTRAIN" "${CHECK[@]}" 2>&1)
if [[ $(cat "$WORK/rc.0" "$WORK/rc.1" 2>/dev/null | tr '\n' ' ') == "3 3 " ]] &&
  grep -q 'rank 1 (host n2, local rank 0, cpu 1): GEMM .* of the median' <<<"$out" &&
  ! grep -q 'rank 0 (host' <<<"$out"; then
  ok "check names the busy CPU's rank (rank 1, host n2, cpu 1) and only it; every rank exits 3 (degraded)"
else not_ok "straggler in check"; echo "$out" | grep -v -E '^ +[0-9]+ +3 ' | tail -24 | diag; cat "$WORK"/rc.* 2>/dev/null | diag; fi

# 8: a straggler in a short training: named in the log, as a metrics event, in the summary. Rank 1's
# compute takes 3x as long (the test hook sleeps the difference each step): busy loops as in 6 made
# it only ~1.2x slower when other tests loaded the machine (the scheduler moves their threads off
# the busy CPU, onto rank 0's), below the 1.15x bound for three intervals in a row.
RUN=(--synthetic --arch resnet18 --width 0.25 --image-size 32 --classes 4 --batch 8 --synthetic-size 512 --steps 40
     --warmup-epochs 0 --log-every 10)
rm -f "$WORK/s.jsonl"
if have_test_hooks; then
out=$(DLT_TEST_SLOW_COMPUTE=3 DLT_TEST_SLOW_RANK=1 timeout 120 "${SRUN[@]}" -N2 -n2 "$DLTRAIN" train "${RUN[@]}" --metrics "$WORK/s.jsonl" 2>&1); rc=$?
if ((rc == 0)) && grep -q 'straggler: rank 1 (host n2, local rank 0, cpu [0-9,-]*) compute .*x the median' <<<"$out" &&
  ! grep -q 'straggler: rank 0' <<<"$out" && grep -q '"key":"straggler".*"rank":1,"id":"host n2' "$WORK/s.jsonl" &&
  ! grep -q '"key":"straggler".*"rank":0' "$WORK/s.jsonl" &&
  grep -q 'slowest rank: 1 (host n2, local rank 0, cpu [0-9,-]*), slowest in' <<<"$out"; then
  ok "training names rank 1 on n2 (compute 3x as long) as a straggler (log, metrics event, summary), never rank 0"
else not_ok "straggler in training (rc=$rc)"; echo "$out" | grep -v 'step [0-9]*/' | tail -8 | diag; fi
else ok "$NO_HOOKS: DLT_TEST_SLOW_COMPUTE"; fi

if have_test_hooks; then
# 9: a wrong GEMM on rank 2 (test-only fault hook): check names it and exits 4 (broken).
out=$(DLT_TEST_FAULT_GEMM_RANK=2 timeout 120 "${SRUN[@]}" -N2 --ntasks-per-node=2 "$DLTRAIN" "${CHECK[@]}" --min-fraction 0 2>&1); rc=$?
if ((rc == 4)) && grep -q 'verdict: broken (exit status 4)' <<<"$out" &&
  grep -q 'rank 2 (host n2, local rank 0, cpu [0-9,-]*): GEMM result wrong: C\[128\]\[85\] = .*, exact' <<<"$out"; then
  ok "wrong GEMM on rank 2: check names rank 2 on n2 with the entry and its exact value, exit 4"
else not_ok "wrong GEMM in check (rc=$rc)"; echo "$out" | tail -6 | diag; fi

# 10-11: --preflight with the wrong GEMM on rank 3: every rank stops with 4 before the first step,
# within seconds, and rank 3 says it in its own words.
rm -f "$WORK"/rc.*
start=$(date +%s.%N)
out=$(DLT_TEST_FAULT_GEMM_RANK=3 timeout 120 "${SRUN[@]}" -N2 --ntasks-per-node=2 -l "$WORK/rank.sh" "$DLTRAIN" train "${RUN[@]}" --preflight 2>&1)
el=$(echo "$(date +%s.%N) - $start" | bc)
if [[ $(cat "$WORK"/rc.[0-3] 2>/dev/null | tr '\n' ' ') == "4 4 4 4 " ]] && ! grep -q 'step 1/' <<<"$out" &&
  grep -q '^0: dltrain: preflight broken: rank 3 (host n2, local rank 1, .*GEMM result wrong' <<<"$out" &&
  (($(echo "$el < 30" | bc))); then
  ok "--preflight: every rank exits 4 before the first step, ${el%.*} s after the launch"
else not_ok "--preflight stop (${el}s)"; echo "$out" | tail -8 | diag; cat "$WORK"/rc.* 2>/dev/null | diag; fi
if grep -q '^3: dltrain: rank 3 (host n2, local rank 1, .*): GEMM result wrong' <<<"$out"; then
  ok "--preflight: the failing rank names itself (host n2, local rank 1) in its own output"
else not_ok "failing rank's own message"; echo "$out" | tail -6 | diag; fi

else
  for _ in $(seq 3); do ok "$NO_HOOKS: DLT_TEST_FAULT_GEMM_RANK"; done
fi
# 13: progress and the time budget: rank 0 says up front what it will do and how long it may take,
# then a line per phase (and per size from 1 MiB); --seconds 4 stops the default sweep (to 256 MiB)
# before a size it has no time for, isolation runs at a size that fits, and the whole check ends
# in about that time (plus the launch).
t0=$SECONDS
out=$(timeout 120 "${SRUN[@]}" -N2 --ntasks-per-node=2 "$DLTRAIN" check --gemm-size 256 --gemm-seconds 0.3 --seconds 4 \
  --min-fraction 0 2>&1 >"$WORK/budget.out"); rc=$?
took=$((SECONDS - t0))
last=$(grep -o '^dltrain check: \[ *[0-9.]* s\]' <<<"$out" | tail -1 | grep -o '[0-9.]*' | tail -1)
if ((rc == 0 && took <= 30)) && grep -q '^dltrain check: \[ *0.0 s\] 4 rank(s) on 2 node(s), mpi: GEMM 256 x 256 per rank, all-reduce 8 B to 256 MiB, then isolation; expect at most about 4 s' <<<"$out" &&
  grep -q 'GEMM done on every rank' <<<"$out" && grep -q 'all-reduce sweep stops at .*: the next size would not end within --seconds 4' <<<"$out" &&
  grep -q 'isolation at .*: within each of the 2 node(s)' <<<"$out" && grep -q 'isolation: one rank per node' <<<"$out" &&
  awk -v l="$last" 'BEGIN { exit !(l <= 6) }' && grep -q '^verdict: healthy' "$WORK/budget.out"; then
  ok "check --seconds 4 at 4 ranks: expectation first, a line per phase, sweep stopped for the budget ($(grep -o 'stops at [0-9]* [KMG]*i*B' <<<"$out")), last line at ${last} s, ${took} s in all"
else not_ok "check budget and progress (rc=$rc, ${took} s, last line at ${last:-?} s)"; echo "$out" | tail -12 | diag; fi

if have_test_hooks; then
# 12: the sbatch template: the check names the node of rank 1 (wrong GEMM in the first run only),
# the job excludes it and requeues itself (Slurm then holds it two minutes: cancelled here).
cat > "$WORK/fault-once.sh" <<EOF
#!/bin/sh
[ "\${SLURM_RESTART_COUNT:-0}" = 0 ] && export DLT_TEST_FAULT_GEMM_RANK=1
exec "$DLTRAIN" "\$@"
EOF
chmod +x "$WORK/fault-once.sh"
rm -rf "$WORK/sb"; mkdir -p "$WORK/sb"
jid=$(sbatch --parsable -N1 --ntasks-per-node=2 --gpus-per-node=2 -o "$WORK/sb/job.out" \
  --export=ALL,DLTRAIN="$WORK/fault-once.sh",OUT="$WORK/sb",CHECK_ARGS="--gemm-size 128 --max-bytes 1K --iters 2" \
  "$DLT_SRCDIR/contrib/sbatch/health-check-train.sbatch")
for _ in $(seq 300); do grep -q 'requeueing\|could not run' "$WORK/sb/job.out" 2>/dev/null && break; sleep 0.2; done
sleep 1
node=$(sed -n 's/.* restart 0 on \(n[0-9]\).*/\1/p' "$WORK/sb/job.out")
show=$(scontrol show job "$jid" 2>&1)
scancel "$jid" 2>/dev/null
if [[ -n $node ]] && grep -q "excluding $node and requeueing" "$WORK/sb/job.out" && grep -q "ExcNodeList=$node" <<<"$show" &&
  grep -q 'Restarts=1' <<<"$show" && grep -q '"named_hosts":\["'"$node"'"\]' "$WORK/sb/check.json"; then
  ok "health-check-train.sbatch: the check names $node (rank 1's wrong GEMM), the job excludes it and requeues itself"
else not_ok "sbatch exclude and requeue (node '$node')"; tail -6 "$WORK/sb/job.out" | diag; grep -o 'ExcNodeList=[^ ]*\|Restarts=[0-9]*' <<<"$show" | diag; fi
# 14: the same on -N2 of this 2-node cluster: excluding the named node would leave 1 node for a job
# that needs 2, pending forever: the template says so and ends instead of requeueing.
rm -rf "$WORK/sb2"; mkdir -p "$WORK/sb2"
jid=$(sbatch --parsable -N2 --ntasks-per-node=1 --gpus-per-node=1 -o "$WORK/sb2/job.out" \
  --export=ALL,DLTRAIN="$WORK/fault-once.sh",OUT="$WORK/sb2",CHECK_ARGS="--gemm-size 128 --max-bytes 1K --iters 2" \
  "$DLT_SRCDIR/contrib/sbatch/health-check-train.sbatch")
for _ in $(seq 600); do [[ -z $(squeue -h -j "$jid" 2>/dev/null) ]] && break; sleep 0.2; done
left=$(squeue -h -j "$jid" -o %T 2>/dev/null)
scancel "$jid" 2>/dev/null
if [[ -z $left ]] && grep -q 'not requeueing: excluding n2 leaves 1 of the 2 node(s) of partition debug, and the job needs 2' "$WORK/sb2/job.out" &&
   ! grep -q 'and requeueing' "$WORK/sb2/job.out"; then
  ok "health-check-train.sbatch on -N2 of 2 nodes: excluding n2 would leave too few nodes: said, not requeued, the job ends"
else not_ok "requeue into too few nodes (job state '${left}')"; tail -4 "$WORK/sb2/job.out" | diag; fi
else
  for _ in $(seq 2); do ok "$NO_HOOKS: DLT_TEST_FAULT_GEMM_RANK"; done
fi
# 15: the template as shipped, on healthy nodes, preempted (SIGUSR1 as Slurm sends it before a time
# limit or a preemption): dltrain checkpoints into OUT/ckpt and exits 75, the job requeues itself,
# checks the nodes again and resumes from that checkpoint to the end.
rm -rf "$WORK/sb3"; mkdir -p "$WORK/sb3"
small="--synthetic --arch resnet18 --width 0.25 --image-size 32 --classes 4 --synthetic-size 512 --warmup-epochs 0 --lr 0.4 --log-every 4 --batch 8 --epochs 2"
jid=$(sbatch --parsable -N1 --ntasks-per-node=2 --gpus-per-node=2 --cpus-per-task=1 -o "$WORK/sb3/job.out" \
  --export=ALL,DLTRAIN="$DLTRAIN",OUT="$WORK/sb3",CHECK_ARGS="--gemm-size 128 --max-bytes 1K --iters 2",TRAIN_ARGS="$small" \
  "$DLT_SRCDIR/contrib/sbatch/health-check-train.sbatch")
for _ in $(seq 600); do grep -q '"step":8,' "$WORK/sb3/metrics.jsonl" 2>/dev/null && break; sleep 0.2; done
scancel --signal=USR1 "$jid"
for _ in $(seq 1800); do [[ -z $(squeue -h -j "$jid" 2>/dev/null) ]] && break; sleep 0.2; done
stopped=$(sed -n 's/.*stop requested (signal) at step \([0-9]*\): checkpointing.*/\1/p' "$WORK/sb3/job.out" | head -1)
restarts=$(scontrol show job "$jid" 2>/dev/null | grep -o 'Restarts=[0-9]*')
scancel "$jid" 2>/dev/null
if [[ -n $stopped && ${restarts:-Restarts=1} == Restarts=1 ]] &&
   grep -q 'stopped for preemption/time limit after checkpointing: requeueing' "$WORK/sb3/job.out" &&
   grep -q "resumed from $WORK/sb3/ckpt/ckpt-$(printf %08d "$stopped")" "$WORK/sb3/job.out" &&
   grep -q 'done: 64 steps' "$WORK/sb3/job.out" && [[ $(grep -c 'health-check-train.sbatch: job .* restart' "$WORK/sb3/job.out") == 2 ]]; then
  ok "health-check-train.sbatch preempted at step $stopped: checkpoint, exit 75, requeued, checked again, resumed to all 64 steps"
else not_ok "health-check-train.sbatch preemption (stop at step ${stopped:-?}, ${restarts:-?})"; grep -v 'step [0-9]*/' "$WORK/sb3/job.out" | tail -10 | diag; fi
exit 0
