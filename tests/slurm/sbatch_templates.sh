#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# contrib/sbatch templates on the local cluster, scaled down through their variables:
# resnet50-imagenet.sbatch is preempted with SIGUSR1, requeues itself, resumes from its checkpoint
# and completes; resnet50-scaling.sbatch runs a 1/2/4-rank sweep and contrib/report.py turns its
# JSON lines into the speed-up table and an SVG plot; a stall (status 86) is requeued a bounded
# number of times; a rank killed outright ends the job's step at once (the plugin ends it).
. "$(dirname "$0")/lib.sh"
# Slurm holds a requeued job cred_expire seconds (120 by default) before it may start again: 30 here,
# so the requeue is not two idle minutes of the suite's time (a step's credential still lives 30 s,
# far more than a launch on this machine takes).
export DLT_CLUSTER_CRED_EXPIRE=30
cluster_up 2 5
tap_plan 10
DLTRAIN=$DLT_BUILDDIR/trainer/dltrain
T=$DLT_SRCDIR/contrib/sbatch
D=$WORK/sb
rm -rf "$D"; mkdir -p "$D"; cd "$D"
SMALL="--width 0.25 --image-size 32 --classes 4 --synthetic-size 512 --warmup-epochs 0 --lr 0.4 --log-every 4"
wait_done() { for _ in $(seq "${2:-600}"); do [[ -z $(squeue -h -j "$1" 2>/dev/null) ]] && return 0; sleep 0.2; done; return 1; }

# The template exactly as shipped. With the test hooks, rank 0's first checkpoint (the stop's)
# takes 6 s longer: the other ranks are done at once, and a rank leaving before the save is
# complete let srun --kill-on-bad-exit=1 kill rank 0 mid-save (no checkpoint, step 137, no requeue).
slow_save=
have_test_hooks && slow_save=",DLT_TEST_STALL=checkpoint:-1:6,DLT_TEST_STALL_RANK=0"
jid=$(sbatch --parsable -N2 --ntasks-per-node=2 --gpus-per-node=2 --cpus-per-task=1 -o "$D/train.out" \
  --export=ALL,DLTRAIN=$DLTRAIN,ARCH=resnet18,EPOCHS=4,BATCH=8,CKPT=$D/ck$slow_save,EXTRA="$SMALL" "$T/resnet50-imagenet.sbatch")
for _ in $(seq 300); do grep -q '"step":8,' "$D/ck/metrics.jsonl" 2>/dev/null && break; sleep 0.2; done
scancel --signal=USR1 "$jid"
for _ in $(seq 250); do [[ $(squeue -h -j "$jid" -o %r 2>/dev/null) == BeginTime ]] && break; sleep 0.2; done
state=$(scontrol show job "$jid" | grep -o 'Restarts=[0-9]*')
stopped=$(sed -n 's/.*stop requested (signal) at step \([0-9]*\): checkpointing.*/\1/p' "$D/train.out" | head -1)
saved=$(printf '%s/ck/ckpt-%08d.safetensors' "$D" "${stopped:-0}")
if [[ $state == Restarts=1 ]] && grep -q 'requeueing' "$D/train.out" && [[ -n $stopped && -s $saved ]] &&
   ! ls "$D"/ck/*.tmp* >/dev/null 2>&1; then
  ok "SIGUSR1${slow_save:+ (rank 0 saving 6 s slower)}: every rank waits for the checkpoint of step $stopped, exits 75, the job requeues itself"
else not_ok "requeue ($state, stop at step ${stopped:-?}, checkpoint ${saved##*/} $([[ -s $saved ]] && echo present || echo missing))"
  grep -v 'step [0-9]*/' "$D/train.out" | tail -8 | diag; ls "$D/ck" | diag; fi
# Slurm holds a requeued job cred_expire seconds (30 here) before it may start again. Releasing it
# earlier (scontrol update StartTime=now) raced with the first run's cleanup under load and lost the
# job, so the test waits the hold out (bounded at 6 minutes).
for _ in $(seq 1800); do
  grep -q 'done: 64 steps' "$D/train.out" 2>/dev/null && break
  sleep 0.2
done
wait_done "$jid" 300
grep -q 'done: 64 steps' "$D/train.out" || { scontrol show job "$jid" | grep -E 'JobState|Reason|Restarts|BeginTime|StartTime'; sinfo -N -o '%N %t %E'; } 2>&1 | diag
if grep -q "resumed from .*/ck/ckpt-$(printf %08d "${stopped:-0}")" "$D/train.out" && grep -q 'checkpoint .*ckpt-00000064.safetensors' "$D/train.out" && grep -q 'done: 64 steps' "$D/train.out"; then
  ok "the requeued job resumes from the stop's checkpoint (step $stopped) and completes all 64 steps"
else not_ok "resume after requeue"; tail -8 "$D/train.out" | diag; fi
if [[ $(grep -c 'restart' "$D/train.out") -ge 2 ]]; then ok "--open-mode=append keeps both runs' output in one file"; else not_ok "output of both runs"; fi

jid=$(sbatch --parsable -N2 --ntasks-per-node=2 --gpus-per-node=2 -o "$D/scaling.out" \
  --export=ALL,DLTRAIN=$DLTRAIN,ARCH=resnet18,BATCH=8,STEPS=12,POINTS="1 2 4",PRECISIONS=fp32,OUT=$D/scal,PER_NODE=2,GPUS_PER_NODE=2,EXTRA="$SMALL" \
  "$T/resnet50-scaling.sbatch")
wait_done "$jid" 900
if [[ -s $D/scal/fp32-1.jsonl && -s $D/scal/fp32-2.jsonl && -s $D/scal/fp32-4.jsonl ]]; then ok "scaling sweep: 1, 2 and 4 ranks each wrote their metrics"; else not_ok "scaling sweep"; tail -8 "$D/scaling.out" | diag; fi
out=$(python3 "$DLT_SRCDIR/contrib/report.py" "$D"/scal/fp32-*.jsonl --svg "$D/scaling.svg" 2>&1); rc=$?
if ((rc == 0)) && grep -qE '^fp32 +1 .* 1\.00x +100\.0%' <<<"$out" && grep -qE '^fp32 +4 ' <<<"$out"; then ok "report.py: speed-up / efficiency table per rank count"; else not_ok "report table (rc=$rc)"; echo "$out" | diag; fi
if python3 -c 'import sys,xml.etree.ElementTree as E; r=E.parse(sys.argv[1]).getroot(); assert r.tag.endswith("svg") and len(r.findall(".//{http://www.w3.org/2000/svg}circle")) == 3' "$D/scaling.svg" 2>/dev/null; then ok "report.py --svg: a valid SVG with the 3 measured points"; else not_ok "report svg"; fi
ntb=$(ls "$D"/ck/tensorboard/events.out.tfevents.* 2>/dev/null | wc -l)
if ((ntb == 2)) && ls "$D"/scal/tensorboard/fp32-{1,2,4}/events.out.tfevents.* >/dev/null 2>&1; then
  ok "both templates set --tensorboard: one event file per run of the requeued job, one per sweep point"
else not_ok "TensorBoard files from the templates ($ntb for the requeued job)"; ls -R "$D/ck" "$D/scal" 2>&1 | tail -12 | diag; fi
if have_test_hooks; then
# A stall: the watchdog aborts (86); the template requeues, at most MAX_STALL_REQUEUES times.
jid=$(sbatch --parsable -N1 --ntasks-per-node=2 --gpus-per-node=2 --cpus-per-task=1 -o "$D/stall.out" \
  --export=ALL,DLTRAIN=$DLTRAIN,ARCH=resnet18,EPOCHS=4,BATCH=8,CKPT=$D/stallck,MAX_STALL_REQUEUES=1,DLT_TEST_STALL=compute:3:30,EXTRA="$SMALL --stall-timeout 3" \
  "$T/resnet50-imagenet.sbatch")
for _ in $(seq 600); do [[ $(squeue -h -j "$jid" -o %r 2>/dev/null) == BeginTime ]] && break; sleep 0.2; done
state=$(scontrol show job "$jid" | grep -o 'Restarts=[0-9]*')
scancel "$jid"; wait_done "$jid" 150
if [[ $state == Restarts=1 ]] && grep -q 'a rank stalled (exit 86, .*): requeueing (1 of 1)' "$D/stall.out" &&
   [[ $(cat "$D/stallck/.stall-requeues-$jid" 2>/dev/null) == 1 ]]; then
  ok "exit 86 (stall): the template requeues, counting (1 of 1) beside the checkpoints"
else not_ok "stall requeue ($state)"; grep -v 'step [0-9]*/' "$D/stall.out" | tail -5 | diag; fi
else
  ok "$NO_HOOKS: DLT_TEST_STALL"
fi

# A rank killed with SIGKILL (as the OOM killer does) in the first run only: the step ends within
# seconds (the plugin ends it; not after --stall-timeout), the template requeues the job, and the
# second run resumes from the newest periodic checkpoint (CHECKPOINT_MINUTES, here 0.02 = 1.2 s)
# and completes.
printf '#!/bin/sh\nif [ "$SLURM_PROCID" = 1 ] && [ "${SLURM_RESTART_COUNT:-0}" = 0 ]; then ( sleep 4; kill -9 $$ ) & fi\nexec "%s" "$@"\n' "$DLTRAIN" >"$D/kill1.sh"
chmod +x "$D/kill1.sh"
t0=$SECONDS
jid=$(sbatch --parsable -N2 --ntasks-per-node=1 --gpus-per-node=1 --cpus-per-task=1 -o "$D/kill.out" \
  --export=ALL,DLTRAIN=$D/kill1.sh,ARCH=resnet18,EPOCHS=32,BATCH=8,CKPT=$D/killck,CHECKPOINT_MINUTES=0.02,EXTRA="$SMALL" \
  "$T/resnet50-imagenet.sbatch")
for _ in $(seq 600); do [[ $(squeue -h -j "$jid" -o %r 2>/dev/null) == BeginTime ]] && break; sleep 0.2; done
took=$((SECONDS - t0))
wait_done "$jid" 600
last=$(grep -o 'checkpoint .*/killck/ckpt-[0-9]*\.safetensors' "$D/kill.out" | sed -n '$p' | grep -o 'ckpt-[0-9]*')
resumed=$(sed -n 's|.*resumed from .*/killck/\(ckpt-[0-9]*\)\.safetensors.*|\1|p' "$D/kill.out" | head -1)
newest=$(sed -n '1,/requeueing/p' "$D/kill.out" | grep -o 'checkpoint .*/killck/ckpt-[0-9]*' | sed -n '$s|.*/||p')
if ((took < 90)) && grep -q 'a rank was killed by signal 9 (exit 137.*): requeueing (1 of 2), resuming from the newest checkpoint' "$D/kill.out" &&
   [[ -n $resumed && $resumed == "$newest" ]] && grep -q 'checkpoint .*/killck/ckpt-00001024.safetensors' "$D/kill.out" &&
   [[ $(grep -c "checkpoint .*/killck/ckpt-" "$D/kill.out") -ge 3 ]]; then
  ok "rank 1 killed with SIGKILL: step ended and job requeued in ${took} s; the second run resumed from the newest periodic checkpoint ($resumed) and completed"
else not_ok "killed rank (${took} s, resumed from ${resumed:-none}, newest before the kill ${newest:-none}, last ${last:-none})"; grep -v 'step [0-9]*/' "$D/kill.out" | tail -10 | diag; scancel "$jid" 2>/dev/null; fi
# As shipped, both templates checkpoint periodically (a setting at the top, 30 minutes).
if grep -q '^CHECKPOINT_MINUTES=${CHECKPOINT_MINUTES:-30}$' "$T/resnet50-imagenet.sbatch" "$T/health-check-train.sbatch" &&
   [[ $(grep -c -- '--checkpoint-minutes "$CHECKPOINT_MINUTES"' "$T/resnet50-imagenet.sbatch" "$T/health-check-train.sbatch" | grep -c ':1$') == 2 ]]; then
  ok "resnet50-imagenet.sbatch and health-check-train.sbatch pass --checkpoint-minutes, 30 by default"
else not_ok "periodic checkpoints in the templates"; fi
exit 0
