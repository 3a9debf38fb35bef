#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Faults in a 2-node x 2-rank training step: a rank that stops progressing (stalled in compute),
# a rank stopped with SIGSTOP and a rank killed with SIGKILL must each end the whole step with an
# error naming what happened (the ranks that wait for a stopped peer say so, never blaming their
# own phase), within a bounded time, and leave every node idle.
. "$(dirname "$0")/lib.sh"
cluster_up 2 6
tap_plan 8
DLTRAIN=$DLT_BUILDDIR/trainer/dltrain
cd /tmp
RUN=(--synthetic --arch resnet18 --width 0.25 --image-size 32 --classes 4 --batch 8 --synthetic-size 4096 --epochs 10
     --warmup-epochs 0 --log-every 2 --stall-timeout 5)
SRUN=(srun --quiet -N2 --ntasks-per-node=2 --gpus-per-node=2 --mpi=pmix --dl-train)

if have_test_hooks; then
start=$SECONDS
out=$(DLT_TEST_STALL=compute:4:120 DLT_TEST_STALL_RANK=3 timeout 180 "${SRUN[@]}" "$DLTRAIN" train "${RUN[@]}" 2>&1); rc=$?
el=$((SECONDS - start))
# Whichever watchdog fires first ends the step: rank 3's (stuck computing) or a peer's (stuck in the
# all-reduce waiting for rank 3); MPI_Abort then takes every rank down.
if ((rc != 0 && rc != 124 && el < 60)) && grep -qE '(rank 3 on n2 stuck in forward/backward|waited for its peers in a collective \(during [a-z/ -]*\)) for [0-9]+ s at step 4' <<<"$out" &&
  ! grep -qE 'rank [012] on n[12] stuck in' <<<"$out"; then
  ok "rank 3 stalls: a watchdog aborts the whole step after ${el}s, naming the phase and step 4"
else not_ok "stalled rank (rc=$rc, ${el}s)"; echo "$out" | tail -6 | diag; fi
if grep -qE 'watchdog: rank [0-3] on n[12] (stuck|has waited)' <<<"$out"; then ok "the message names rank and host"; else not_ok "rank/host in the watchdog message"; echo "$out" | grep watchdog | diag; fi
else
  for _ in $(seq 2); do ok "$NO_HOOKS: DLT_TEST_STALL"; done
fi

# SIGSTOP of rank 2: the others wait for it inside the step's collective. Their watchdogs must
# say a peer stopped responding, not that they are stuck in forward/backward themselves.
rm -f "$WORK/stop.out"
( timeout 180 "${SRUN[@]}" "$DLTRAIN" train "${RUN[@]}" > "$WORK/stop.out" 2>&1; echo $? > "$WORK/stop.rc" ) &
for _ in $(seq 300); do grep -q 'step 4/' "$WORK/stop.out" 2>/dev/null && break; sleep 0.1; done
ours() { for p in $(pgrep -x dltrain); do tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx "SLURM_CONF=$SLURM_CONF" && echo "$p"; done; }
stopped=""
for p in $(ours); do
  tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx 'SLURM_PROCID=2' && stopped=$p
done
start=$SECONDS
[[ -n $stopped ]] && kill -STOP "$stopped"
wait
el=$((SECONDS - start)); rc=$(cat "$WORK/stop.rc")
[[ -n $stopped ]] && kill -CONT "$stopped" 2>/dev/null
out=$(cat "$WORK/stop.out")
if [[ -n $stopped ]] && ((rc != 0 && rc != 124 && el < 60)) && grep -qE 'watchdog: rank [013] on n[12] has waited for its peers in a collective .* a peer stopped responding' <<<"$out" &&
  ! grep -qE 'watchdog: rank [0-3] on n[12] stuck in' <<<"$out"; then
  ok "rank 2 stopped (SIGSTOP): the step ends in ${el}s, the waiting ranks say a peer stopped responding"
else not_ok "stopped rank (stopped=$stopped rc=$rc ${el}s)"; grep -E 'watchdog|error' "$WORK/stop.out" | head -6 | diag; fi

# kill_rank NAME RANK TRAIN_ARGS...: trains with TRAIN_ARGS, kills rank RANK outright (SIGKILL, as
# the OOM killer does) at step 4; the output in $WORK/NAME.out, then el (seconds from the kill to
# the step's end), rc and victim set.
kill_rank() {
  local name=$1 rank=$2; shift 2
  rm -f "$WORK/$name.out"
  ( timeout 180 "${SRUN[@]}" "$DLTRAIN" train "$@" > "$WORK/$name.out" 2>&1; echo $? > "$WORK/$name.rc" ) &
  for _ in $(seq 300); do grep -q 'step 4/' "$WORK/$name.out" 2>/dev/null && break; sleep 0.1; done
  # Only this test's cluster's ranks: other tests may run their own clusters at the same time.
  victim=""
  for p in $(ours); do
    tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx "SLURM_PROCID=$rank" && victim=$p
  done
  local start=$SECONDS
  [[ -n $victim ]] && kill -KILL "$victim"
  wait
  el=$((SECONDS - start)); rc=$(cat "$WORK/$name.rc")
}
kill_rank kill 3 "${RUN[@]}"
if [[ -n $victim ]] && ((rc != 0 && rc != 124 && el < 60)) && grep -qE 'task(s [0-9]-)? ?3: Killed' "$WORK/kill.out"; then
  ok "rank 3 killed (SIGKILL): the step ends in ${el}s with an error naming task 3"
else not_ok "killed rank (victim=$victim rc=$rc ${el}s)"; tail -6 "$WORK/kill.out" | diag; fi
# The same kill with the default --stall-timeout (900 s) and no --kill-on-bad-exit: the plugin ends
# the step itself (a rank killed outright cannot tell its peers, which would wait 15 minutes).
kill_rank kill2 2 "${RUN[@]:0:${#RUN[@]}-2}"
if [[ -n $victim ]] && ((rc != 0 && rc != 124 && el < 30)) && grep -q 'dltrain: node n2: task 2 ended by signal 9 (Killed); ending step [0-9]*\.0 at once so that its 3 peer(s) do not wait for it' "$WORK/kill2.out"; then
  ok "rank 2 killed, default stall timeout, no --kill-on-bad-exit: the plugin ends the step in ${el}s, naming task 2 and the signal"
else not_ok "killed rank without --kill-on-bad-exit (victim=$victim rc=$rc ${el}s)"; grep -v '^dltrain: epoch' "$WORK/kill2.out" | tail -8 | diag; fi
# Only deaths no peer hears of end the step: a rank killed outright does, a rank ended by the SIGTERM
# Slurm sends to every task (scancel, time limit) does not (the others may be saving a checkpoint).
# The four start together (each waits, bounded, for the others' marks: a loaded machine started
# rank 3 seconds after its peers, whose 6 s had nearly run out when it died), then have 10 s.
for sig in KILL TERM; do
  start=$SECONDS
  bar=$WORK/barrier-$sig; rm -rf "$bar"; mkdir -p "$bar"
  out=$(timeout 90 "${SRUN[@]}" bash -c 'touch "'"$bar"'/$SLURM_PROCID"; for i in $(seq 300); do [ "$(ls "'"$bar"'" | wc -l)" -ge 4 ] && break; sleep 0.1; done
    [ "$SLURM_PROCID" = 3 ] && kill -'$sig' $$; sleep 10 && echo "rank $SLURM_PROCID lived"' 2>&1)
  eval "el_$sig=\$((SECONDS - start)) lived_$sig=\$(grep -c 'lived' <<<\"\$out\")"
done
# Who lived to print is the measure (the step's end waits for the tasks' output to close, which
# takes a while on a loaded machine); a peer whose sleep the step's SIGKILL reached first must not
# print either, hence && (bash may outlive its sleep by a moment).
if ((lived_KILL == 0 && lived_TERM == 3)); then
  ok "a rank killed by SIGKILL ends the step (${el_KILL}s); one ended by SIGTERM does not (the 3 others ran on, ${el_TERM}s)"
else not_ok "SIGKILL vs SIGTERM (KILL: ${lived_KILL} lived, ${el_KILL}s; TERM: ${lived_TERM} lived, ${el_TERM}s)"; fi
left=$(ours)
if [[ -z $left ]]; then ok "no rank left running"; else not_ok "ranks left running: $(tr '\n' ' ' <<<"$left")"; fi
sleep 1
check "every node idle afterwards" bash -c '[[ $(sinfo -h -N -o "%t" | sort -u) == idle ]]'
exit 0
