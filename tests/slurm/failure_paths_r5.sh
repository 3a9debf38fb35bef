#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Failure paths on a real two-node cluster, round 5: a rank that fails before it joins the PMIx
# bootstrap ends its peers at once (the plugin, through the rank's join mark), named, where they
# waited the whole bootstrap timeout; ranks that joined and fail are left to end themselves; the
# join marks leave nothing in /dev/shm; the folder of a step whose slurmstepd was killed (kill -9) is
# reclaimed by the node's next --dl-train step.
. "$(dirname "$0")/lib.sh"
cluster_up 2 27
tap_plan 5
DLTRAIN=$DLT_BUILDDIR/trainer/dltrain
cd /tmp || exit 1
marks() { ls /dev/shm 2>/dev/null | grep -c "^dltrain-joined-$(id -u)-$1\." ; }

# ---- 1: rank 3 exits 3 before it joins; the others wait in their first fence (timeout 120 s)
t0=$(date +%s.%N)
out=$(timeout 150 srun -N2 --ntasks-per-node=2 --gpus-per-node=2 --dl-train bash -c \
  'if [ "$SLURM_PROCID" = 3 ]; then echo "rank 3 leaving"; exit 3; fi; exec "$0" env --timeout 120' "$DLTRAIN" 2>&1)
rc=$?
t=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
jid=$(sed -n 's/.*; step \([0-9]*\)\.0 of 4 tasks ended so that its peers do not wait for it.*/\1/p' <<<"$out" | head -1)
if ((rc != 0)) && awk -v t="$t" 'BEGIN { exit !(t < 20) }' &&
  [[ $out == *"task 3 exited with status 3 before it joined the job's PMIx bootstrap; step "*".0 of 4 tasks ended so that its peers do not wait for it"* &&
     $out == *"task 3: Exited with exit code 3"* && $out != *"timed out after 120 s"* ]]; then
  ok "rank 3 exits 3 before the bootstrap: the step ends in $t s (a 3 s grace, not the 120 s timeout), the plugin naming task 3 and its status"
else not_ok "a rank gone before the fence (rc=$rc, $t s)"; echo "$out" | tail -8 | diag; fi
# srun may return before every slurmstepd has finished its tasks' exits (which take the marks).
for _ in $(seq 100); do [[ -n $jid && $(marks "$jid") == 0 && -z $(squeue -h 2>/dev/null) ]] && break; sleep 0.1; done
if [[ -n $jid && $(marks "$jid") == 0 ]]; then ok "no join mark of step $jid.0 left in /dev/shm"
else not_ok "join marks left in /dev/shm (step ${jid:-?}.0)"; ls /dev/shm | grep dltrain-joined | diag; fi

# ---- 2: ranks that joined and fail (two ranks of n1 on one GPU, refused by every rank after the
# bootstrap) end themselves, each saying why; the plugin leaves them alone; no mark stays.
out=$(timeout 150 srun -N2 -n4 --gpus-per-node=2 --dl-train "$DLTRAIN" env --timeout 120 2>&1)
rc=$?
jid2=$(grep -o 'namespace slurm\.pmix\.[0-9]*' <<<"$out" | grep -o '[0-9]*$' | head -1)
sleep 4 # a step end a task without its mark would have set off comes 3 s after the exit
# (only this step's marks: other tests' steps may hold theirs now)
if ((rc == 1)) && [[ $out == *"would both train on GPU"* && $out == *"all-reduce check passed"* && $out != *"peers do not wait"* &&
  $out != *Killed* && -n $jid2 && $(marks "$jid2") == 0 ]] &&
  ! grep -h "before it joined" "$DLT_CLUSTER_DIR"/log/slurmd-n*.log | grep -qv " step $jid\.0 "; then
  ok "ranks that joined and then fail end themselves (every rank's check printed, status 1), no step killed, no mark left"
else not_ok "joined ranks failing (rc=$rc)"; echo "$out" | grep -v '^[0-9] ' | diag; fi

# ---- 3-4: kill -9 of a step's slurmstepd leaves its root-owned folder; the next step reclaims it
TOPO=$DLT_CLUSTER_DIR/run/n1/dltrain
srun -N1 -w n1 -J dlt-r5-crash --gpus-per-node=1 --dl-train bash -c 'exec -a dlt-r5-sleeper sleep 60' >"$WORK/sleeper.out" 2>&1 &
jid=
for _ in $(seq 100); do
  jid=$(squeue -h -n dlt-r5-crash -o %i | head -1)
  [[ -n $jid && -d $TOPO/$jid.0 ]] && break
  sleep 0.1
done
pid=$(pgrep -f "slurmstepd: \[$jid.0\]" | head -1)
[[ -n $pid ]] && kill -9 "$pid"
sleep 1
scancel "$jid" 2>/dev/null
for _ in $(seq 100); do [[ -z $(squeue -h -j "$jid" 2>/dev/null) ]] && break; sleep 0.2; done
pkill -f dlt-r5-sleeper
if [[ -n $pid && -d $TOPO/$jid.0 ]]; then ok "slurmstepd of step $jid.0 killed with SIGKILL, the job cancelled: its folder $jid.0 is still there (the crash left it)"
else not_ok "a crashed step's folder (slurmstepd ${pid:-not found}, folder $(ls "$TOPO" 2>&1 | tr '\n' ' '))"; fi
sleep 10 # the sweep leaves folders younger than 10 s (a folder being made is not yet locked)
out=$(timeout 60 srun -N1 -w n1 --gpus-per-node=1 --dl-train true 2>&1); rc=$?
if ((rc == 0)) && [[ ! -e $TOPO/$jid.0 ]] && grep -q "dltrain: node n1: removed 1 step folder(s) of $TOPO whose slurmstepd had died" "$DLT_CLUSTER_DIR/log/slurmd-n1.log"; then
  ok "the node's next --dl-train step removed $jid.0, said in slurmd's log"
else not_ok "crashed step's folder not reclaimed (rc=$rc)"; { echo "$out"; ls -la "$TOPO"; grep dltrain "$DLT_CLUSTER_DIR/log/slurmd-n1.log" | tail -3; } | diag; fi
exit $((TAP_FAILED > 0))
