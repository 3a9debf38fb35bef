#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Bounded random damage on one rank (tests/local/random_damage.py): a few hundred short dltrain runs
# over damaged image folders, RecordIO files (the index against the record file), labels files and
# validation class folders, and checkpoints, seeded and reproducible, within a wall-clock limit.
# Each must end in a clear error or a correct result: no signal, no hang past 30 s, no NaN/inf
# printed as a result, no damaged checkpoint or RecordIO pair accepted, no validation class scored
# that the checkpoint does not name, every present image scored once. (Ranks that see different
# data need several ranks: tests/slurm/mixed_data.sh.) DLT_RANDOM_SEED,
# DLT_RANDOM_RUNS, DLT_RANDOM_SECONDS change seed and bounds; a violation prints the --only N that
# repeats it.
. "$(dirname "$0")/../slurm/lib.sh"
DLTRAIN=$DLT_BUILDDIR/trainer/dltrain
MK=$DLT_BUILDDIR/tests/fixtures/mkjpegs
[[ -x $DLTRAIN && -x $MK ]] || skip_all "dltrain or mkjpegs not built"
command -v python3 >/dev/null || skip_all "python3 not installed"
tap_plan 2
seed=${DLT_RANDOM_SEED:-1}
out=$(python3 "$DLT_SRCDIR/tests/local/random_damage.py" --dltrain "$DLTRAIN" --mkjpegs "$MK" --work "$WORK" \
  --seed "$seed" --runs "${DLT_RANDOM_RUNS:-300}" --seconds "${DLT_RANDOM_SECONDS:-150}" 2>&1); rc=$?
echo "$out" | grep '^# random damage' || true
res=$(grep '^RESULT' <<<"$out")
runs=$(sed -n 's/.*runs=\([0-9]*\).*/\1/p' <<<"$res"); bad=$(sed -n 's/.*violations=\([0-9]*\).*/\1/p' <<<"$res")
if ((rc == 0)) && [[ -n $runs ]] && ((runs >= 50)); then ok "$runs random damage runs (seed $seed): ${res#RESULT }"
else not_ok "random damage driver (rc=$rc, runs=${runs:-none})"; echo "$out" | tail -10 | diag; fi
if [[ $bad == 0 ]]; then ok "every run a clear dltrain error or a correct result: no signal, hang, NaN result or accepted damage"
else not_ok "$bad violation(s)"; grep '^# ' <<<"$out" | grep -v '^# random damage' | head -60; fi
[[ $bad == 0 ]] && rm -rf "${WORK:?}"
exit 0
