#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# One scan of an image folder per job (2 nodes x 2 ranks): rank 0 lists it and only rank 0 opens
# the class folders (strace of every rank); a node whose copy of the folder lacks files is refused,
# naming the node, said once; a rank 0 that cannot list it ends every rank with its words.
. "$(dirname "$0")/lib.sh"
command -v strace >/dev/null || skip_all "strace not installed (contrib/install-deps.sh installs it)"
data_test_start 2 19 4
"$MK" folder "$WORK/A" 4 12 40 40 plain
SMALL=(--arch resnet18 --width 0.25 --image-size 32 --batch 4 --workers 1 --log-every 0 --warmup-epochs 0 --steps 2 --stall-timeout 30)
SRUN=(srun --quiet -N2 --ntasks-per-node=2 --gpus-per-node=2 --mpi=pmix --dl-train)

# Every rank under strace: which of them opened a class folder of the data.
out=$(timeout 180 "${SRUN[@]}" bash -c 'exec strace -f -qq -e trace=openat,open -o "$1/trace.$SLURM_PROCID" "${@:2}"' _ "$WORK" \
  "$DLTRAIN" train --data "$WORK/A" "${SMALL[@]}" 2>&1); rc=$?
opens=""
for k in 0 1 2 3; do opens+="$k:$(grep -c "\"$WORK/A/train/c0[0-3]\".*O_DIRECTORY" "$WORK/trace.$k" 2>/dev/null) "; done
if ((rc == 0)) && [[ $opens == "0:4 1:0 2:0 3:0 " && $out == *"listed once for all 4 ranks"* ]]; then
  ok "4 ranks: only rank 0 lists the class folders ($opens), the others build the data set from its list"
else not_ok "one scan per job (rc=$rc, opens: $opens)"; echo "$out" | tail -6 | diag; fi
rm -f "$WORK"/trace.*

# n2 mounts another copy of the folder at the same path: simulated by giving the ranks on n2 a
# folder (a per-node path) that lacks two classes' files.
cp -r "$WORK/A" "$WORK/A-n1"; cp -r "$WORK/A" "$WORK/A-n2"; rm -f "$WORK"/A-n2/train/c0[12]/*.JPEG
mkdir -p "$WORK/mnt-n1" "$WORK/mnt-n2"
ln -sfn "$WORK/A-n1" "$WORK/mnt-n1/data"; ln -sfn "$WORK/A-n2" "$WORK/mnt-n2/data"
start=$SECONDS
out=$(timeout 180 "${SRUN[@]}" bash -c 'cd "$1/mnt-$SLURMD_NODENAME" && exec "${@:2}"' _ "$WORK" \
  "$DLTRAIN" train --data data "${SMALL[@]}" 2>&1); rc=$?; el=$((SECONDS - start))
want="as listed on node n1 (rank 0) is not what this node sees: the nodes do not share that folder"
if ((rc != 0 && rc != 124 && el < 60)) && [[ $(grep -cF -- "$want" <<<"$out") == 1 && $out == *"rank 2 on node n2"* &&
      $out == *"No such file or directory"* && $out != *watchdog* ]]; then
  ok "a node whose copy lacks files: refused in ${el}s, naming node n2, said once"
else not_ok "other copy on n2 (rc=$rc, ${el}s)"; echo "$out" | tail -8 | diag; fi

# Rank 0 cannot list the folder (it is not on n1): every rank ends with rank 0's words, once.
rm -rf "${WORK:?}"/A-n1/*
out=$(timeout 180 "${SRUN[@]}" bash -c 'cd "$1/mnt-$SLURMD_NODENAME" && exec "${@:2}"' _ "$WORK" \
  "$DLTRAIN" train --data data "${SMALL[@]}" 2>&1); rc=$?
if ((rc != 0 && rc != 124)) && [[ $(grep -c "data has no class subdirectories" <<<"$out") == 1 && $out != *watchdog* ]]; then
  ok "rank 0 cannot list the folder: every rank stops with its words, said once"
else not_ok "rank 0 cannot list (rc=$rc)"; echo "$out" | tail -8 | diag; fi
sleep 1
check "every node idle afterwards" bash -c '[[ $(sinfo -h -N -o "%t" | sort -u) == idle ]]'
exit 0
