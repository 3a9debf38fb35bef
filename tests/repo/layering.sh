#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The project's layering. The floors are read from doc/internals.md's table (| floor | folders |
# ...), so the page and the check cannot drift: every #include "DIR/FILE" of every folder the
# table names must be of the folder itself or of a folder on a lower floor, and every folder that
# holds sources must be in the table. Then rules within the floors: nothing above
# model/network.c touches batch-norm state (d_stats, bn_batches: network.c's verbs do), the
# training step is queued in train/step.c alone, no module above the reducer asks for it by name,
# and data/dataset_internal.h stays in data/. Lists each offending line.
. "$(dirname "$0")/../slurm/lib.sh"
cd "$DLT_SRCDIR" || exit 1
tap_plan 7

# floor of each folder, from the table's rows: | N | `a/`, `b/` | why |
declare -A FLOOR=()
while IFS='|' read -r _ floor folders _; do
  floor=${floor// /}
  for f in $(grep -o '`[^`]*/`' <<<"$folders" | tr -d '`'); do FLOOR[${f%/}]=$floor; done
done < <(grep -E '^\| *[0-9]+ *\|' doc/internals.md)
if ((${#FLOOR[@]} >= 8)); then ok "doc/internals.md's floor table read: ${#FLOOR[@]} folders"
else not_ok "doc/internals.md's floor table: only ${#FLOOR[@]} folders read"; fi

# every folder with C sources is in the table
missing=()
while IFS= read -r d; do
  [[ -n ${FLOOR[$d]:-} ]] || missing+=("$d")
done < <(git ls-files 'common/*.[ch]' 'pmix/*.[ch]' 'plugin/*.[ch]' 'trainer/*.[ch]' 'trainer/*.cu' | xargs -n1 dirname | sort -u)
if ((${#missing[@]} == 0)); then ok "every folder with sources has a floor in doc/internals.md"
else not_ok "folders without a floor in doc/internals.md: ${missing[*]}"; fi

# every include of a tabled folder points to itself or down
bad=()
for d in "${!FLOOR[@]}"; do
  while IFS= read -r line; do
    file=${line%%:*} inc=$(sed -n 's/.*#include "\([^"]*\)".*/\1/p' <<<"$line")
    [[ $inc == */* ]] || continue # config.h, a sibling by bare name
    to=$(dirname "$inc")
    [[ $to == "$d" ]] && continue
    if [[ -z ${FLOOR[$to]:-} ]]; then bad+=("$file: $inc ($to has no floor)")
    elif ((FLOOR[$to] >= FLOOR[$d])); then bad+=("$file: $inc (floor ${FLOOR[$d]} includes floor ${FLOOR[$to]})"); fi
  done < <(git grep -n '#include "' -- "$d/*.c" "$d/*.h" "$d/*.cu" 2>/dev/null | sed 's/^\([^:]*\):[0-9]*:/\1:/')
done
if ((${#bad[@]} == 0)); then ok "no include points up or sideways between the floors of doc/internals.md"
else not_ok "includes against the floors"; printf '%s\n' "${bad[@]}" | diag; fi

cd trainer || exit 1
src() { find "$@" -name '*.[ch]' -print0 | xargs -0 grep -n "${GREP_ARGS[@]}" 2>/dev/null; }
GREP_ARGS=(-e 'd_stats' -e 'bn_batches')
hits=$(src train cli checkpoint)
if [[ -z $hits ]]; then ok "nothing in train/, cli/ or checkpoint/ touches d_stats or bn_batches"
else not_ok "batch-norm state touched above network.c"; echo "$hits" | diag; fi
GREP_ARGS=(-e 'sgd_step' -e 'dlt_grad_reducer_agree' -e 'dlt_net_backward')
hits=$(src train | grep -v '^train/step\.c:')
if [[ -z $hits ]]; then ok "the step's backward, agreement and update are queued in train/step.c alone"
else not_ok "the step is queued outside train/step.c"; echo "$hits" | diag; fi
GREP_ARGS=(-e '"nccl-buckets"' -e '"host"' -e '"none"')
hits=$(src train cli | grep -i 'strcmp.*ops->name\|ops->name.*strcmp')
if [[ -z $hits ]]; then ok "no reducer path is asked for by name above comm/"
else not_ok "a reducer path asked for by name"; echo "$hits" | diag; fi
GREP_ARGS=(-e '#include "trainer/data/dataset_internal.h"')
hits=$(src . | grep -v '^\./data/')
if [[ -z $hits ]]; then ok "the data set's representation (data/dataset_internal.h) is included in data/ only"
else not_ok "dataset_internal.h included outside data/"; echo "$hits" | diag; fi
