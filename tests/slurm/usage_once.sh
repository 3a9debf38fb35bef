#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Usage errors and missing paths across ranks (2 nodes x 2 ranks): what every rank finds alike
# (--precision fp16 on the CPU backend, a --data folder missing everywhere, a bad labels file) is
# said once and ends every rank without an abort (no MPI_ABORT banner, no CANCELLED, no Killed),
# with status 2 for a usage error or a missing path; a --data folder missing on one rank only ends
# every rank promptly, naming that rank. Usage errors the command line decides alone (fp16 on the
# CPU, --init with --resume, --target-top1 without validation) are said in the same words on one rank
# as on four, and --comm single on four ranks is said once with status 2; srun --help lists every
# --dl-train key.
. "$(dirname "$0")/lib.sh"
data_test_start 2 17 7
"$MK" folder "$WORK/ds" 2 4 40 40 plain >/dev/null # 8 train and 8 val images, 2 classes
TINY=(--arch resnet18 --width 0.25 --image-size 32 --workers 1 --log-every 0 --batch 2)
SRUN=(srun -N2 --ntasks-per-node=2 --gpus-per-node=2 --mpi=pmix --dl-train)
# no_abort OUT: none of the words an aborted step leaves.
no_abort() { [[ $1 != *MPI_ABORT* && $1 != *CANCELLED* && $1 != *Killed* && $1 != *"ending every rank"* ]]; }
# tries RCVAR ELVAR OUTVAR CMD...: runs a step, bounded.
tries() { local -n _r=$1 _e=$2 _o=$3; shift 3; local t0=$SECONDS; _o=$(timeout 120 "$@" 2>&1); _r=$?; _e=$((SECONDS - t0)); }

tries rc el out "${SRUN[@]}" "$DLTRAIN" train --synthetic "${TINY[@]}" --classes 2 --synthetic-size 64 --steps 1 --backend cpu --precision fp16
n=$(grep -c "needs the CUDA backend" <<<"$out")
if ((rc == 2 && n == 1 && el < 60)) && no_abort "$out"; then ok "--precision fp16 on the CPU backend, 4 ranks: said once, every rank exits 2 in ${el}s, no abort"
else not_ok "fp16 on the CPU across ranks (rc=$rc, said $n times, ${el}s)"; echo "$out" | tail -8 | diag; fi

# The same refusal on one rank (no srun) and on four: the same line, once.
SYN=(--synthetic "${TINY[@]}" --classes 2 --synthetic-size 64 --steps 1 --backend cpu)
bad=""
for a in "--precision fp16" "--init $WORK/w.safetensors --resume $WORK/w.safetensors" "--target-top1 0.5 --checkpoint-dir $WORK/ck"; do
  : >"$WORK/w.safetensors"
  one=$(timeout 60 "$DLTRAIN" train "${SYN[@]}" $a 2>&1); rc1=$?
  tries rc el out "${SRUN[@]}" "$DLTRAIN" train "${SYN[@]}" $a
  said=$(grep -v '^srun: error: .*Exited with exit code' <<<"$out") # srun's own lines aside
  ((rc1 == 2 && rc == 2 && el < 60)) && [[ -n $one && $said == "$one" ]] && no_abort "$out" || bad+=" [$a: one rank rc $rc1 '$one'; four rc $rc '$(tr '\n' '|' <<<"$out")']"
done
if [[ -z $bad ]]; then ok "fp16 on the CPU, --init with --resume, --target-top1 without validation: one line, the same on one rank and on four, status 2 before the bootstrap"
else not_ok "usage errors across ranks:$bad"; fi

tries rc el out "${SRUN[@]}" "$DLTRAIN" train "${SYN[@]}" --comm single
n=$(grep -c "cannot serve 4 ranks" <<<"$out")
if ((rc == 2 && n == 1 && el < 60)) && no_abort "$out"; then ok "--comm single on 4 ranks: said once, every rank exits 2 in ${el}s"
else not_ok "--comm single on 4 ranks (rc=$rc, said $n times)"; echo "$out" | tail -8 | diag; fi

out=$(srun --help 2>&1)
u=$(tr -s ' \n' ' ' <<<"$out")
if [[ $u == *"bind=closest|none, gpus=task|step|none, nccl=auto|off, nic=auto|NAME, verbose"* ]]; then ok "srun --help: --dl-train lists every key (gpus=task|step|none too)"
else not_ok "srun --help --dl-train keys"; grep -A4 -- --dl-train <<<"$out" | diag; fi

tries rc el out "${SRUN[@]}" "$DLTRAIN" train --data "$WORK/missing" "${TINY[@]}" --steps 1
n=$(grep -c "No such file or directory" <<<"$out")
if ((rc == 2 && n == 1 && el < 60)) && [[ $out == *"--data $WORK/missing: No such file or directory (every rank)"* ]] && no_abort "$out"; then
  ok "a --data folder missing on every rank: said once, every rank exits 2 in ${el}s, no abort"
else not_ok "data missing everywhere (rc=$rc, said $n times, ${el}s)"; echo "$out" | tail -8 | diag; fi

tries rc el out "${SRUN[@]}" bash -c "d=$WORK/ds; [ \$SLURM_PROCID = 2 ] && d=$WORK/missing2; exec $DLTRAIN train --data \$d ${TINY[*]} --steps 1"
if ((rc == 2 && el < 60)) && [[ $(grep -c "rank 2: --data $WORK/missing2: No such file or directory" <<<"$out") == 1 && $out == *"1 of 4 ranks cannot start (rank 2, each said why): no rank starts"* && $out != *"training resnet18"* ]] && no_abort "$out"; then
  ok "a --data folder missing on rank 2 only: rank 2 says so, rank 0 names it, every rank exits 2 in ${el}s, no abort"
else not_ok "data missing on one rank (rc=$rc, ${el}s)"; echo "$out" | tail -8 | diag; fi

# A labels file with a line that is not "FILENAME CLASS": every rank's loader refuses it alike.
mkdir -p "$WORK/flat"
for f in "$WORK"/ds/val/*/*.JPEG; do c=$(basename "$(dirname "$f")"); cp "$f" "$WORK/flat/${c}_$(basename "$f")"; done
{ n=0; for f in "$WORK"/flat/*.JPEG; do echo "$(basename "$f") c$((n % 2))"; n=$((n + 1)); done; echo "garbage"; } >"$WORK/labels.txt"
tries rc el out "${SRUN[@]}" "$DLTRAIN" train --data "$WORK/ds" "${TINY[@]}" --steps 1 --val-data "$WORK/flat" --val-labels "$WORK/labels.txt" --eval-every 1
n=$(grep -c "labels.txt" <<<"$out")
if ((rc == 1 && n == 1 && el < 60)) && no_abort "$out"; then ok "a bad --val-labels file on 4 ranks: the line said once, every rank exits 1 in ${el}s, no abort"
else not_ok "labels error across ranks (rc=$rc, said $n times, ${el}s)"; echo "$out" | tail -8 | diag; fi
