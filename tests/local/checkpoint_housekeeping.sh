#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The checkpoint folder over a run's life: a save past `ulimit -f` fails with the file named and
# the limit said (it used to end the process by SIGXFSZ, status 153, no word); the temporary
# files of a save that never finished (a killed run) are removed at the next start, named; and
# --keep-checkpoints N keeps the N newest checkpoints, touching nothing else in the folder. A
# rollback (--resume of an older checkpoint in the same folder) starts a new line: the next
# --resume auto follows it instead of jumping back to the abandoned line's higher steps, and
# pruning removes the abandoned line's checkpoints first.
. "$(dirname "$0")/../slurm/lib.sh"
DLTRAIN=$DLT_BUILDDIR/trainer/dltrain
[[ -x $DLTRAIN ]] || skip_all "dltrain not built"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
tap_plan 6
rm -rf "${WORK:?}" && mkdir -p "$WORK"
SYN=(--arch resnet18 --width 0.25 --image-size 32 --classes 4 --batch 8 --synthetic-size 64 --log-every 0)

out=$( (ulimit -f 100; "$DLTRAIN" train "${SYN[@]}" --steps 2 --checkpoint-dir "$WORK/big") 2>&1); rc=$?
if [[ $rc == 1 && $out == *"checkpoint at step 2 FAILED"*"cannot write $WORK/big/ckpt-00000002.safetensors.tmp."*"File too large (the file size limit: \`ulimit -f\`"* ]] &&
   [[ -z $(ls "$WORK/big" | grep -v '^\.') ]]; then
  ok "ulimit -f 100: the save fails naming the file and the limit (exit 1, not SIGXFSZ's 153), nothing left behind"
else not_ok "ulimit -f (rc=$rc)"; echo "$out" | tail -2 | diag; ls -a "$WORK/big" | diag; fi

mkdir -p "$WORK/ck"
echo partial >"$WORK/ck/ckpt-00000005.safetensors.tmp.4242"
echo partial >"$WORK/ck/ckpt-00000005.state.safetensors.tmp.4242"
echo mine >"$WORK/ck/notes.txt"
echo mine >"$WORK/ck/ckpt-00000001.safetensors.bak"
out=$("$DLTRAIN" train "${SYN[@]}" --steps 6 --checkpoint-every 1 --keep-checkpoints 2 --checkpoint-dir "$WORK/ck" 2>&1); rc=$?
if [[ $rc == 0 && $out == *"removed 2 unfinished checkpoint file(s) in $WORK/ck left by a save that did not finish"*"ckpt-00000005.safetensors.tmp.4242"* ]] &&
   [[ -z $(ls "$WORK/ck" | grep '\.tmp\.') ]]; then
  ok "a killed save's temporary files are removed at the next start, and named"
else not_ok "unfinished saves (rc=$rc)"; echo "$out" | head -3 | diag; ls "$WORK/ck" | diag; fi

have=$(ls "$WORK/ck" | grep '^ckpt-0*[0-9]*\.\(state\.\)\?safetensors$' | tr '\n' ' ')
if [[ $have == "ckpt-00000005.safetensors ckpt-00000005.state.safetensors ckpt-00000006.safetensors ckpt-00000006.state.safetensors " ]] &&
   [[ -f $WORK/ck/notes.txt && -f $WORK/ck/ckpt-00000001.safetensors.bak ]]; then
  ok "--keep-checkpoints 2 with a checkpoint every step: steps 5 and 6 stay; the user's own files are untouched"
else not_ok "--keep-checkpoints (have: $have)"; ls "$WORK/ck" | diag; fi

out=$("$DLTRAIN" train "${SYN[@]}" --steps 8 --checkpoint-every 1 --keep-checkpoints 2 --checkpoint-dir "$WORK/ck" --resume auto 2>&1); rc=$?
have=$(ls "$WORK/ck" | grep '^ckpt-0*[0-9]*\.safetensors$' | tr '\n' ' ')
if [[ $rc == 0 && $out == *"resumed from $WORK/ck/ckpt-00000006.safetensors"* && $have == "ckpt-00000007.safetensors ckpt-00000008.safetensors " ]]; then
  ok "a resumed run keeps to the same bound (7 and 8 stay)"
else not_ok "resume with --keep-checkpoints (rc=$rc, have: $have)"; echo "$out" | tail -3 | diag; fi

# ---- a rollback: back to step 4 of 2,4,6,8, then on to 7 (6 and 7 rewritten)
"$DLTRAIN" train "${SYN[@]}" --steps 8 --checkpoint-every 2 --checkpoint-dir "$WORK/rb" >/dev/null 2>&1
"$DLTRAIN" train "${SYN[@]}" --steps 7 --checkpoint-every 1 --checkpoint-dir "$WORK/rb" --resume "$WORK/rb/ckpt-00000004.safetensors" >/dev/null 2>&1
out=$("$DLTRAIN" train "${SYN[@]}" --steps 9 --checkpoint-dir "$WORK/rb" --resume auto 2>&1); rc=$?
if [[ $rc == 0 && $out == *"resumed from $WORK/rb/ckpt-00000007.safetensors at step 7"* ]]; then
  ok "after a rollback to step 4, --resume auto follows the new line (step 7), not the abandoned step 8"
else not_ok "resume after a rollback (rc=$rc)"; echo "$out" | grep -m2 'resum' | diag; fi

"$DLTRAIN" train "${SYN[@]}" --steps 8 --checkpoint-every 2 --checkpoint-dir "$WORK/rk" >/dev/null 2>&1
"$DLTRAIN" train "${SYN[@]}" --steps 7 --checkpoint-every 1 --keep-checkpoints 2 --checkpoint-dir "$WORK/rk" --resume "$WORK/rk/ckpt-00000004.safetensors" >/dev/null 2>&1
have=$(ls "$WORK/rk" | grep '^ckpt-0*[0-9]*\.safetensors$' | tr '\n' ' ')
out=$("$DLTRAIN" train "${SYN[@]}" --steps 9 --checkpoint-dir "$WORK/rk" --resume auto 2>&1); rc=$?
if [[ $rc == 0 && $have == "ckpt-00000006.safetensors ckpt-00000007.safetensors " && $out == *"resumed from $WORK/rk/ckpt-00000007.safetensors at step 7"* ]]; then
  ok "--keep-checkpoints 2 after a rollback keeps the new line's 6 and 7 and removes the abandoned step 8"
else not_ok "pruning after a rollback (rc=$rc, have: $have)"; echo "$out" | grep -m2 'resum' | diag; fi
