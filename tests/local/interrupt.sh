#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Ctrl-C on one rank: SIGINT stops the run at the next step boundary with a checkpoint and status 75,
# as SIGTERM/SIGUSR1 do (it used to end the process with 130, no word, nothing saved); a second
# Ctrl-C quits at once saying so, status 130. A real fault (SIGSEGV) is reported with the faulting
# thread's stack, named frames included (the crash report), then the signal's own status; a SIGSEGV
# that kill sent names its sender instead.
. "$(dirname "$0")/../slurm/lib.sh"
DLTRAIN=$DLT_BUILDDIR/trainer/dltrain
[[ -x $DLTRAIN ]] || skip_all "dltrain not built"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
tap_plan 4
rm -rf "${WORK:?}" && mkdir -p "$WORK"
SYN=(--arch resnet18 --width 0.25 --image-size 32 --classes 4 --warmup-epochs 0 --log-every 1 --batch 8
     --synthetic-size 64 --epochs 1000 --steps 100000)
# start NAME: a run in the background, its metrics in WORK/NAME.jsonl; waits for its third step.
start() {
  "$DLTRAIN" train "${SYN[@]}" --checkpoint-dir "$WORK/$1" --metrics "$WORK/$1.jsonl" >"$WORK/$1.out" 2>&1 &
  PID=$!
  for _ in $(seq 600); do grep -q '"step":3,' "$WORK/$1.jsonl" 2>/dev/null && return 0; sleep 0.1; done
  return 1
}
# finish: RC gets its exit status, waiting at most 60 s.
finish() {
  for _ in $(seq 600); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$PID" 2>/dev/null
  wait "$PID"
  RC=$?
}

start one
kill -INT "$PID"
finish; rc=$RC
stopped=$(sed -n 's/.*stop requested (signal) at step \([0-9]*\).*/\1/p' "$WORK/one.out")
if [[ $rc == 75 && -n $stopped && -f $WORK/one/ckpt-$(printf %08d "$stopped").safetensors ]]; then
  ok "Ctrl-C (SIGINT): stops at step $stopped with its checkpoint, exit 75"
else not_ok "SIGINT (rc=$rc, stopped=$stopped)"; tail -5 "$WORK/one.out" | diag; fi

# The second Ctrl-C while the first waits for the step to end (a 3 s stall in step 5's compute).
if have_test_hooks; then
export DLT_TEST_STALL=compute:5:3
start two
sleep 0.5
kill -INT "$PID"; sleep 0.5; kill -INT "$PID"
finish; rc=$RC
if [[ $rc == 130 ]] && grep -q "second interrupt (Ctrl-C): quitting now" "$WORK/two.out"; then
  ok "a second Ctrl-C quits at once saying so, exit 130"
else not_ok "second SIGINT (rc=$rc)"; tail -5 "$WORK/two.out" | diag; fi
else
  ok "$NO_HOOKS: DLT_TEST_STALL"
fi

unset DLT_TEST_STALL
if [[ ${DLT_SANITIZED:-} ]]; then
  ok "# SKIP sanitizer build: the sanitizer's own fault report replaces dltrain's"
  ok "# SKIP sanitizer build: the sanitizer's own fault report replaces dltrain's"
  exit 0
fi
# A real fault in the training thread (DLT_TEST_FAULT: a write through a null pointer entering
# step 5's compute): the line, then that thread's stack with dltrain's own functions named.
if have_test_hooks; then
  export DLT_TEST_FAULT=5
  start three
  finish; rc=$RC
  unset DLT_TEST_FAULT
  if [[ $rc == 139 ]] && grep -q "dltrain: crashed with SIGSEGV: this is a bug" "$WORK/three.out" &&
     grep -A48 "the faulting thread's stack, innermost first" "$WORK/three.out" |
       grep -q -E 'dltrain\(dlt_watchdog_phase\+0x[0-9a-f]+\)\[0x'; then
    ok "SIGSEGV of a real fault: the crash line, then the faulting thread's stack with named frames, exit 139"
  else not_ok "crash report (rc=$rc)"; tail -12 "$WORK/three.out" | diag; fi
else
  ok "$NO_HOOKS: DLT_TEST_FAULT"
fi
# kill -SEGV from outside is no fault: the kernel hands it to any thread of the process, whose stack
# says nothing; the line names the sender instead.
start four
kill -SEGV "$PID"
finish; rc=$RC
if [[ $rc == 139 ]] && grep -q "dltrain: killed by SIGSEGV sent by process $BASHPID (user id $(id -u)), not by a fault in dltrain" "$WORK/four.out" &&
   ! grep -q "stack" "$WORK/four.out"; then
  ok "SIGSEGV sent by kill: the line names the sending process and its user, no stack, exit 139"
else not_ok "kill -SEGV (rc=$rc)"; tail -12 "$WORK/four.out" | diag; fi
exit 0
