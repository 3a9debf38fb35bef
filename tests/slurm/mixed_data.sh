#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Ranks that see different data (2 nodes x 2 ranks, one rank given another folder): before the
# first step every rank refuses (rank 0 says it once), naming the ranks that differ and how, and
# every rank ends within seconds (no hang, no watchdog, no abort banner). The same for the
# validation data: another validation folder on one rank, or none there.
. "$(dirname "$0")/lib.sh"
data_test_start 2 14 4
"$MK" folder "$WORK/A" 3 12 40 40 plain
# B: one class fewer and fewer images; C: the same counts, one file renamed.
cp -r "$WORK/A" "$WORK/B"; rm -r "$WORK/B/train/c02"; rm "$WORK"/B/train/c01/img_000[0-3].JPEG
cp -r "$WORK/A" "$WORK/C"; mv "$WORK/C/train/c01/img_0005.JPEG" "$WORK/C/train/c01/img_0005b.JPEG"
cp -r "$WORK/A" "$WORK/D"; rm -r "$WORK/D/val"
SMALL=(--arch resnet18 --width 0.25 --image-size 32 --batch 4 --workers 1 --log-every 0 --warmup-epochs 0 --epochs 1 --stall-timeout 20)
SRUN=(srun --quiet -N2 --ntasks-per-node=2 --gpus-per-node=2 --mpi=pmix --dl-train)
# mixed RANK DIR [dltrain options]: every rank trains on A, rank RANK on DIR.
mixed() {
  local rank=$1 dir=$2; shift 2
  timeout 120 "${SRUN[@]}" bash -c 'd=$1; [ "$SLURM_PROCID" = "$2" ] && d=$3; shift 3; exec "$@" --data "$d"' _ \
    "$WORK/A" "$rank" "$dir" "$DLTRAIN" train "${SMALL[@]}" "$@" 2>&1
}
# same_words OUT TEXT: TEXT said once (every rank decides alike; rank 0 speaks), every task of both
# nodes ended with status 1, nothing aborted or blamed.
same_words() {
  [[ $(grep -cF -- "$2" <<<"$1") == 1 && $1 == *"tasks 0-1: Exited with exit code 1"* &&
     $1 == *"tasks 2-3: Exited with exit code 1"* && $1 != *watchdog* && $1 != *MPI_ABORT* &&
     $1 != *"ending every rank"* ]]
}

start=$SECONDS; out=$(mixed 2 "$WORK/B"); rc=$?; el=$((SECONDS - start))
want="the ranks do not see the same training data: ranks 0,1,3 see 36 images in 3 classes; rank 2 sees 20 images in 2 classes (the class names differ, the file list differs): give every rank the same data"
if ((rc != 0 && rc != 124 && el < 60)) && same_words "$out" "$want"; then ok "rank 2 with another folder: every rank refuses, said once, in ${el}s, naming rank 2 and how it differs"
else not_ok "mixed training data (rc=$rc, ${el}s)"; echo "$out" | tail -8 | diag; fi
out=$(mixed 1 "$WORK/C"); rc=$?
want="ranks 0,2,3 see 36 images in 3 classes; rank 1 sees 36 images in 3 classes (the same classes, the file list differs)"
if ((rc != 0 && rc != 124)) && same_words "$out" "$want"; then ok "the same counts but another file list on rank 1: refused by its digest"
else not_ok "same counts, other files (rc=$rc)"; echo "$out" | tail -8 | diag; fi
# Validation data: ROOT/val missing on rank 0 (the same training images everywhere).
out=$(mixed 0 "$WORK/D"); rc=$?
want="the ranks do not see the same validation data: rank 0 has none; ranks 1,2,3 see 36 images in 3 classes"
if ((rc != 0 && rc != 124)) && same_words "$out" "$want"; then ok "validation images on three ranks and none on rank 0: refused on every rank"
else not_ok "validation on some ranks only (rc=$rc)"; echo "$out" | tail -8 | diag; fi
cp -r "$WORK/A" "$WORK/E"; rm "$WORK"/E/val/c00/img_000[0-2].JPEG
out=$(mixed 3 "$WORK/E"); rc=$?
want="the ranks do not see the same validation data: ranks 0,1,2 see 36 images in 3 classes; rank 3 sees 33 images in 3 classes (the same classes, the file list differs)"
if ((rc != 0 && rc != 124)) && same_words "$out" "$want"; then ok "another validation folder on rank 3 (the same training images): refused on every rank"
else not_ok "mixed validation data (rc=$rc)"; echo "$out" | tail -8 | diag; fi
exit 0
