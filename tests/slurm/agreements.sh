#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The agreements (trainer/comm/agree.c) on 2 nodes x 2 ranks, one rank at a time made to differ
# (its own arguments through bash -c): every rank stops promptly with the same decision, and the
# rank that differs is named. Start-up failures on one rank (the run's agreement on failures); a
# rank given another image folder (the data agreement: who sees what); a rank whose RecordIO index
# is damaged (the first failure, with its node); a rank that finds another checkpoint for --resume
# auto (the preflight's agreement with rank 0); and the first failure across modules on 4 ranks: a
# data loader failure in one rank's evaluation shard ends every rank with the loader's words.
. "$(dirname "$0")/lib.sh"
data_test_start 2 20 6
"$MK" folder "$WORK/A" 2 8 40 40 plain
"$MK" folder "$WORK/B" 3 8 40 40 plain
T=(--arch resnet18 --width 0.25 --image-size 32 --batch 2 --workers 1 --log-every 0 --stall-timeout 30)
SRUN=(srun --quiet -N2 --ntasks-per-node=2 --gpus-per-node=2 --mpi=pmix --dl-train)
# Runs the command on every rank, rank $1 with the arguments in $2 (one word) and the others with $3:
# out, rc and el (seconds) set.
one_rank() {
  local r=$1 mine=$2 theirs=$3 start=$SECONDS; shift 3
  out=$(timeout 90 "${SRUN[@]}" bash -c 'if [ "$SLURM_PROCID" = "$1" ]; then a=$2; else a=$3; fi; shift 3; exec "$@" $a' _ "$r" "$mine" "$theirs" "$@" 2>&1)
  rc=$?; el=$((SECONDS - start))
}
quiet_end() { [[ $1 != *watchdog* && $1 != *MPI_ABORT* && $1 != *"ending every rank"* ]]; }
# The run refused (exit 1) within 30 s, saying $1 once, and no rank was ended by an abort.
refused_once() { ((rc == 1 && el < 30)) && [[ $(grep -cF -- "$1" <<<"$out") == 1 ]] && quiet_end "$out"; }

: >"$WORK/empty"
one_rank 2 "--init=$WORK/empty" "" "$DLTRAIN" train --data "$WORK/A" "${T[@]}" --steps 2
if ((rc == 1 && el < 30)) && [[ $(grep -c 'could not start the run' <<<"$out") == 1 &&
      $out == *"rank 0: 1 of 4 ranks could not start the run (rank 2; their messages say why): every rank stops"* &&
      $out == *"rank 2: --init: $WORK/empty: file of 0 bytes is too short to be safetensors"* ]] && quiet_end "$out"; then
  ok "a damaged --init on rank 2 alone: every rank stops in ${el}s, rank 2 named once by rank 0, its cause by itself"
else not_ok "start-up failure on one rank (rc=$rc, ${el}s)"; echo "$out" | tail -6 | diag; fi

one_rank 3 "--data=$WORK/B" "--data=$WORK/A" "$DLTRAIN" train "${T[@]}" --steps 2
want="the ranks do not see the same training data: ranks 0,1,2 see 16 images in 2 classes; rank 3 sees 24 images in 3 classes (the class names differ, the file list differs): give every rank the same data"
if refused_once "$want"; then
  ok "another image folder on rank 3: refused in ${el}s, said once, naming ranks 0,1,2 and rank 3 and how they differ"
else not_ok "data agreement (rc=$rc, ${el}s)"; echo "$out" | tail -6 | diag; fi

"$DLTRAIN" data pack "$WORK/A/train" "$WORK/a.rec" >/dev/null 2>&1
cp "$WORK/a.rec" "$WORK/b.rec"; cp "$WORK/a.classes" "$WORK/b.classes" 2>/dev/null; echo "garbage line" >"$WORK/b.idx"
one_rank 2 "--data=$WORK/b.rec" "--data=$WORK/a.rec" "$DLTRAIN" train "${T[@]}" --steps 2
want="rank 2 on node n2: index $WORK/b.idx, line 1: 'garbage line' is not"
if refused_once "$want" && [[ $out != *"training resnet18"* ]]; then
  ok "a damaged RecordIO index on rank 2: every rank stops in ${el}s with rank 2's words and node, said once"
else not_ok "first failure of a per-rank open (rc=$rc, ${el}s)"; echo "$out" | tail -6 | diag; fi

timeout 90 "${SRUN[@]}" "$DLTRAIN" train --data "$WORK/A" "${T[@]}" --steps 2 --checkpoint-dir "$WORK/ck" >/dev/null 2>&1
mkdir -p "$WORK/ck2"
one_rank 3 "--checkpoint-dir=$WORK/ck2" "--checkpoint-dir=$WORK/ck" "$DLTRAIN" train --data "$WORK/A" "${T[@]}" --steps 4 --resume auto
if ((rc == 1 && el < 30)) && [[ $out == *"rank 3: the newest valid checkpoint in $WORK/ck2 is none here, but rank 0 finds another"* &&
      $(grep -c 'see other checkpoints' <<<"$out") == 1 && $out == *"1 rank(s) see other checkpoints in $WORK/ck than rank 0"* &&
      $out != *"training resnet18"* ]] && quiet_end "$out"; then
  ok "--resume auto where rank 3 finds no checkpoint: all stop in ${el}s, rank 3 says what it found, rank 0 counts"
else not_ok "resume agreement (rc=$rc, ${el}s)"; echo "$out" | tail -6 | diag; fi

cp -r "$WORK/A" "$WORK/V"
python3 - "$WORK/V/val/c01/img_0003.JPEG" <<'PY'
import sys
d = open(sys.argv[1], "rb").read(); open(sys.argv[1], "wb").write(d[: len(d) // 3])
PY
start=$SECONDS
out=$(timeout 90 "${SRUN[@]}" "$DLTRAIN" train --data "$WORK/V" "${T[@]}" --epochs 1 --strict 2>&1); rc=$?; el=$((SECONDS - start))
cause=$(grep -n 'rank [0-9]: evaluation: bad image .*/V/val/c01/img_0003.JPEG (--strict): not a readable JPEG' <<<"$out" | head -1)
ending=$(grep -n 'rank [0-9]: ending every rank of the run' <<<"$out" | head -1)
if ((rc != 0 && rc != 124 && el < 30)) && [[ -n $cause && -n $ending && ${cause%%:*} -lt ${ending%%:*} &&
      $(grep -c 'rank [0-9]: evaluation: bad image' <<<"$out") == 1 && $out != *watchdog* ]]; then
  ok "4 ranks, a bad validation image under --strict in one rank's shard: every rank ends in ${el}s; the loader's words are the cause said (${cause#*: })"
else not_ok "first failure across modules on 4 ranks (rc=$rc, ${el}s)"; echo "$out" | tail -8 | diag; fi

# ROOT/val on three ranks' folders and not on rank 3's (a copy without it): whether it exists is
# agreed first (a count), then the ranks that have it and the one that has none are named.
cp -r "$WORK/A" "$WORK/A-noval"; rm -rf "$WORK/A-noval/val"
one_rank 3 "--data=$WORK/A-noval" "--data=$WORK/A" "$DLTRAIN" train "${T[@]}" --epochs 1
want="the ranks do not see the same validation data: ranks 0,1,2 see 16 images in 2 classes; rank 3 has none: give every rank the same data"
if refused_once "$want"; then
  ok "validation images on ranks 0-2 and none on rank 3: refused in ${el}s before the first step, the ranks named"
else not_ok "validation agreement (rc=$rc, ${el}s)"; echo "$out" | tail -6 | diag; fi
