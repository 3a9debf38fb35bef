#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Two runs, one output path: the second is refused at once, naming the holder (host, pid, Slurm
# job), instead of both exiting 0 with one's checkpoints overwriting the other's; the same for
# --metrics and --tensorboard; every metrics line carries its run's id; the claim ends with its
# run (a later run takes the folder); a requeued job (same SLURM_JOB_ID, a higher
# SLURM_RESTART_COUNT) waits for its previous incarnation to end on every claim (checkpoint folder
# and metrics file alike), then takes over and resumes from the checkpoint that incarnation saved
# last, chosen only once the folder is its own; a second step of the same job (same restart count,
# another step id) is refused at once, naming that step.
. "$(dirname "$0")/../slurm/lib.sh"
DLTRAIN=$DLT_BUILDDIR/trainer/dltrain
[[ -x $DLTRAIN ]] || skip_all "dltrain not built"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
tap_plan 9
rm -rf "${WORK:?}" && mkdir -p "$WORK"
SYN=(--arch resnet18 --width 0.25 --image-size 32 --classes 4 --warmup-epochs 0 --log-every 1 --batch 8
     --synthetic-size 64)
# bg NAME ARGS...: a long run in the background (PID), waiting for its second step in WORK/NAME.jsonl.
bg() {
  local n=$1; shift
  "$DLTRAIN" train "${SYN[@]}" --epochs 1000 --steps 100000 --metrics "$WORK/$n.jsonl" "$@" >"$WORK/$n.out" 2>&1 &
  PID=$!
  for _ in $(seq 600); do grep -q '"step":2,' "$WORK/$n.jsonl" 2>/dev/null && return 0; sleep 0.1; done
  return 1
}
stop_bg() { kill -TERM "$PID" 2>/dev/null; for _ in $(seq 300); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done; wait "$PID" 2>/dev/null; }

bg a --checkpoint-dir "$WORK/ck"
out=$(timeout 60 "$DLTRAIN" train "${SYN[@]}" --steps 4 --checkpoint-dir "$WORK/ck" 2>&1); rc=$?
if ((rc != 0)) && [[ $out == *"--checkpoint-dir $WORK/ck is in use by another run (host "*", pid $PID"* && $out == *"give this run another --checkpoint-dir"* ]]; then
  ok "a second run on one --checkpoint-dir is refused at once (exit $rc), naming the holder's host and pid"
else not_ok "second run on one checkpoint folder (rc=$rc)"; echo "$out" | tail -4 | diag; fi
out=$(timeout 60 "$DLTRAIN" train "${SYN[@]}" --steps 4 --metrics "$WORK/a.jsonl" 2>&1); rc=$?
if ((rc != 0)) && [[ $out == *"--metrics $WORK/a.jsonl is in use by another run (host "*", pid $PID"* && $out == *"give this run another --metrics"* ]]; then
  ok "a second run appending to one --metrics file is refused, naming the holder"
else not_ok "second run on one metrics file (rc=$rc)"; echo "$out" | tail -4 | diag; fi
stop_bg
out=$(timeout 120 "$DLTRAIN" train "${SYN[@]}" --steps 2 --checkpoint-dir "$WORK/ck" --metrics "$WORK/b.jsonl" 2>&1); rc=$?
ids=$(grep -o '"run_id":"[0-9a-f]*"' "$WORK/a.jsonl" "$WORK/b.jsonl" | sed 's/.*://' | sort | uniq -c | wc -l)
lines=$(cat "$WORK/a.jsonl" "$WORK/b.jsonl" | wc -l) with=$(cat "$WORK/a.jsonl" "$WORK/b.jsonl" | grep -c '"run_id":"[0-9a-f]\{16\}"')
if ((rc == 0 && ids == 2 && lines == with)); then
  ok "the claim ends with its run: a later run takes the folder; each of the $lines metrics lines carries its run's id (2 ids)"
else not_ok "after the first run (rc=$rc, ids=$ids, lines $lines, with id $with)"; echo "$out" | tail -3 | diag; fi

bg t --tensorboard "$WORK/tb"
out=$(timeout 60 "$DLTRAIN" train "${SYN[@]}" --steps 2 --tensorboard "$WORK/tb" 2>&1); rc=$?
stop_bg
if ((rc != 0)) && [[ $out == *"--tensorboard $WORK/tb is in use by another run"* ]]; then ok "a second run on one --tensorboard folder is refused"
else not_ok "second run on one TensorBoard folder (rc=$rc)"; echo "$out" | tail -4 | diag; fi

# A requeued job: the same SLURM_JOB_ID waits for its previous incarnation, then takes over.
SLURM_JOB_ID=4242 bg r1 --checkpoint-dir "$WORK/rq"
first=$PID
( SLURM_JOB_ID=4242 SLURM_RESTART_COUNT=1 timeout 120 "$DLTRAIN" train "${SYN[@]}" --steps 2 --checkpoint-dir "$WORK/rq" >"$WORK/r2.out" 2>&1; echo $? >"$WORK/r2.rc" ) &
second=$!
sleep 3
waiting=$(grep -c "held by this job's previous run" "$WORK/r2.out")
PID=$first; stop_bg
wait "$second"
if [[ $waiting == 1 && $(cat "$WORK/r2.rc") == 0 && -f $WORK/rq/ckpt-00000002.safetensors ]] && grep -q "Slurm job 4242" "$WORK/r2.out"; then
  ok "a requeued job (same SLURM_JOB_ID) waits for its previous run to end, then takes the folder over"
else not_ok "requeue take-over (waiting=$waiting, rc=$(cat "$WORK/r2.rc"))"; tail -4 "$WORK/r2.out" | diag; fi
holder=$(cat "$WORK/rq/.dltrain.lock")
if [[ $holder =~ ^host=[^\ ]+\ pid=[0-9]+\ job=4242\ step=-\ since=[0-9T:-]+Z\ restart=1$ ]]; then ok "the lock file names its holder: $holder"
else not_ok "lock file contents: $holder"; fi

# A requeue meets its previous incarnation still training (scontrol requeue on a slow node): the new
# one waits, and only then chooses its checkpoint: the one the old run saved as it stopped, even
# though --keep-checkpoints pruned the ones it could have seen before waiting. Twice: once with a
# metrics file of its own (the checkpoint choice), once appending to the old run's (that claim waits
# too, within the same deadline).
requeue() { # NAME METRICS: prints "rc resumed-step last-step-of-the-old-run waited"
  local n=$1 m=$2 rc
  SLURM_JOB_ID=4343 bg "$n" --checkpoint-dir "$WORK/$n" --checkpoint-every 2 --keep-checkpoints 2 || return 1
  first=$PID
  # Past step 6: checkpoints 2, 4 and 6 written and 2 pruned (a poll for one file lost the race
  # with --keep-checkpoints on a fast machine and waited its whole 30 s bound).
  for _ in $(seq 300); do grep -q '"step":6,' "$WORK/$n.jsonl" 2>/dev/null && break; sleep 0.1; done
  ( SLURM_JOB_ID=4343 SLURM_RESTART_COUNT=1 timeout 120 "$DLTRAIN" train "${SYN[@]}" --epochs 1000 --steps 100000 \
      --checkpoint-dir "$WORK/$n" --resume auto --metrics "$WORK/$m.jsonl" >"$WORK/$n.2.out" 2>&1 & echo $! >"$WORK/$n.2.pid"; wait $!; echo $? >"$WORK/$n.2.rc" ) &
  sleep 3
  PID=$first; stop_bg
  second=$(cat "$WORK/$n.2.pid")
  for _ in $(seq 300); do grep -q "resumed from" "$WORK/$n.2.out" && break; [[ -f $WORK/$n.2.rc ]] && break; sleep 0.1; done
  sleep 1; kill -TERM "$second" 2>/dev/null; wait
  rc=$(cat "$WORK/$n.2.rc")
  got=$(sed -n 's/.*resumed from .* at step \([0-9]*\) .*/\1/p' "$WORK/$n.2.out" | head -1)
  last=$(sed -n 's/.*stop requested (signal) at step \([0-9]*\): checkpointing.*/\1/p' "$WORK/$n.out")
  echo "${rc:--} ${got:--} ${last:--} $(grep -c 'previous run' "$WORK/$n.2.out")"
}
read -r rc got last waited < <(requeue q1 q1-second)
if [[ $rc == 75 && $got != - && $got == "$last" && $waited -ge 1 ]]; then
  ok "a requeue meeting its previous run waits, then resumes from that run's last checkpoint (step $got)"
else not_ok "requeue meets its previous run (rc=$rc, resumed at '${got}', old run's last step $last, waited $waited)"; tail -5 "$WORK/q1.2.out" | diag; fi
read -r rc got last waited < <(requeue q2 q2)
if [[ $rc == 75 && $got != - && $got == "$last" && $waited -ge 1 ]] && ! grep -q "being written by another" "$WORK/q2.2.out"; then
  ok "appending to the previous run's --metrics file: that claim waits too, then resumes at step $got"
else not_ok "requeue with the same --metrics (rc=$rc, resumed at '${got}', old run's last step $last)"; tail -5 "$WORK/q2.2.out" | diag; fi

# A second step of the same job, same incarnation: no requeue, so no wait.
SLURM_JOB_ID=4444 SLURM_STEP_ID=0 bg s0 --checkpoint-dir "$WORK/st"
t0=$(date +%s)
out=$(SLURM_JOB_ID=4444 SLURM_STEP_ID=1 timeout 30 "$DLTRAIN" train "${SYN[@]}" --steps 2 --checkpoint-dir "$WORK/st" 2>&1); rc=$?
t=$(( $(date +%s) - t0 ))
stop_bg
if ((rc == 1 && t < 10)) && [[ $out == *"step 0 of this same Slurm job"* && $out == *"give this step another --checkpoint-dir"* ]]; then
  ok "a concurrent second step of the same job is refused at once (exit 1, ${t} s), naming the other step"
else not_ok "concurrent step of one job (rc=$rc, ${t} s)"; echo "$out" | tail -3 | diag; fi
exit 0
