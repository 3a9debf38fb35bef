#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A stop signal during start-up (bootstrap, data scan, preflight, resume): the handlers are the
# first thing `dltrain train` installs, so SIGUSR1/SIGTERM/SIGINT there are requests like any other
# (it used to end the task with "User defined signal 1", status 138, which no template requeues):
# the run ends before its first step, saying nothing was trained, status 75 with --checkpoint-dir
# (143 without), and a resumed run's checkpoint stays the newest. Each signal is sent once the
# process shows the handler caught (/proc/PID/status SigCgt) and before its first step (ResNet-50's
# start-up takes over a second here).
. "$(dirname "$0")/../slurm/lib.sh"
DLTRAIN=$DLT_BUILDDIR/trainer/dltrain
[[ -x $DLTRAIN ]] || skip_all "dltrain not built"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
tap_plan 4
rm -rf "${WORK:?}" && mkdir -p "$WORK"
RUN=(--batch 2 --log-every 1 --synthetic-size 64)

# signal_in_startup NAME SIG ARGS...: starts a run, sends SIG as soon as its handler is installed;
# RC gets the exit status, OUT its output. A run that printed a step line was signalled too late.
signal_in_startup() {
  local name=$1 sig=$2 bit caught
  shift 2
  case $sig in USR1) bit=10 ;; TERM) bit=15 ;; INT) bit=2 ;; esac
  "$DLTRAIN" train "${RUN[@]}" "$@" >"$WORK/$name.out" 2>&1 &
  local pid=$!
  for _ in $(seq 500); do
    caught=$(awk '/^SigCgt:/ {print $2}' /proc/$pid/status 2>/dev/null)
    [[ -n $caught ]] && (((16#$caught >> (bit - 1)) & 1)) && break
    sleep 0.01
  done
  kill -"$sig" "$pid"
  for _ in $(seq 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null
  wait "$pid"; RC=$?
  OUT=$(cat "$WORK/$name.out")
}

signal_in_startup usr1 USR1 --steps 3 --checkpoint-dir "$WORK/ck1"
if [[ $RC == 75 && $OUT == *"stop requested (signal) during start-up, before the first step: nothing trained yet"* &&
      $OUT != *"step 1/"* && -z $(ls "$WORK/ck1"/ckpt-* 2>/dev/null) ]]; then
  ok "SIGUSR1 in start-up: stops before the first step, says nothing was trained, exit 75, nothing written"
else not_ok "SIGUSR1 in start-up (rc=$RC)"; echo "$OUT" | tail -4 | diag; fi

"$DLTRAIN" train "${RUN[@]}" --steps 1 --checkpoint-dir "$WORK/ck2" >/dev/null 2>&1
signal_in_startup resumed TERM --steps 3 --checkpoint-dir "$WORK/ck2" --resume auto
if [[ $RC == 75 && $OUT == *"resumed from $WORK/ck2/ckpt-00000001.safetensors"* &&
      $OUT == *"before step 2: nothing trained in this run; the checkpoint of step 1 stays the one to resume from"* &&
      $(ls "$WORK/ck2" | grep -c '^ckpt-.*\.state\.safetensors$') == 1 ]]; then
  ok "SIGTERM while resuming: the checkpoint of step 1 stays the newest, exit 75"
else not_ok "SIGTERM while resuming (rc=$RC)"; echo "$OUT" | tail -4 | diag; ls "$WORK/ck2" | diag; fi

signal_in_startup unsaved TERM --steps 3
if [[ $RC == 143 && $OUT == *"during start-up, before step 1: nothing trained in this run, nothing saved (no --checkpoint-dir); exit status 143"* ]]; then
  ok "SIGTERM in start-up without --checkpoint-dir: exit 143, saying nothing was saved"
else not_ok "SIGTERM in start-up, no checkpoint dir (rc=$RC)"; echo "$OUT" | tail -3 | diag; fi

signal_in_startup int INT --steps 3 --checkpoint-dir "$WORK/ck3"
if [[ $RC == 75 && $OUT == *"during start-up, before the first step"* ]]; then
  ok "Ctrl-C in start-up: the same stop, exit 75"
else not_ok "SIGINT in start-up (rc=$RC)"; echo "$OUT" | tail -3 | diag; fi
