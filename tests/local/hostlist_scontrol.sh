#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The project's host-list expansion (common/hostlist.c) against Slurm's own: `scontrol show hostnames
# LIST` on a table of lists (several bracket groups, zero padding, commas inside brackets, text after
# a bracket, malformed lists), run on this machine's Slurm under the grammar of its release. scontrol
# needs no controller for this: a private slurm.conf naming one node is enough. "Invalid hostlist"
# goes to stderr with status 0, so the text is what is compared.
. "$(dirname "$0")/../slurm/lib.sh"
EXPAND=$DLT_BUILDDIR/tests/local/hostlist_expand
[[ -x $EXPAND ]] || skip_all "tests/local/hostlist_expand not built"
command -v scontrol >/dev/null || skip_all "no scontrol on this machine (package slurm-client)"
rm -rf "${WORK:?}" && mkdir -p "$WORK"
printf 'ClusterName=hl\nSlurmctldHost=localhost\nNodeName=n1 CPUs=1\nPartitionName=p Nodes=n1\n' >"$WORK/slurm.conf"
export SLURM_CONF=$WORK/slurm.conf
version=$(timeout 10 scontrol --version 2>/dev/null | grep -oE '[0-9]+\.[0-9]+\.[0-9]+' | head -1)
[[ -n $version ]] || skip_all "scontrol --version printed no release number"

lists=(
  'x[3-4]y[1-2]' 'gpu-a[7,9-12]-ib' 'n[1-2]x[3-4]z[5-6]' 'n[1-2]-ib[3]' 'n[1-2][3-4]' 'rack[1-2]-n[01-02]'
  'n[1-2]x[3-4]z' 'a[1,3]b[2]' 'a[1]b[2-3],c' 'n[1-3]-ib' 'a[1-2]b,c'
  'n[001-003]' 'n[08-11]' 'n[01-3]' 'n[1-03]' 'n[0001-3]' 'n[9-10]' 'n8,n09,n10' 'n[08-09],n10' 'n9,n10'
  'n[1-2],n[03-4]' 'x01[1],x1[2]' 'n007,n8' 'n012' 'n[+1-3]'
  'gpu[007-010,12],login1' 'n1,n[2-3],m' 'n[9,10,11]' 'n[1,2]x,m' 'n1 n2' $'n[1-2]\tm3' 'n[1-2],,n3'
  'n[2,2]' 'n2,n2' '[1-2]' '1,2,3' 'n-1-[2-3]' 'n[1-]' 'n[1-1]'
  'n[3-1]' 'n[a]' 'n[]' 'n[1-2,]' 'n[-2]' 'n[1--2]' 'n[0x3]' 'n[1-2]]' 'n[0-65536]' 'a[0-65536]b[0-1]'
  'n[1-2' '[1-2' 'a]b[1,2]' 'n[a]x[1]y[2]' 'n[1-2]x[a]' 'n[0-4095]'
)
# Generated lists (a fixed seed, so a failure reproduces): pieces of host names, brackets, ranges and
# separators in random order, most of them malformed in some way. None starts with '-' (scontrol
# would take it for an option).
python3 - >"$WORK/generated" <<'PY'
import random
random.seed(7)
pieces = ["n", "gpu", "r", "[", "]", "0", "7", "10", "007", "-", ",", "\t", " ", "[1-3]", "[08-10]", "[1,3-4]",
          "[0-2,9]", "x", "-ib", "[001-2]", "[5]", "[2-1]", "[a]", "]["]
n = 0
while n < 200:
    s = "".join(random.choice(pieces) for _ in range(random.randint(1, 12)))
    if not s.startswith("-") and "\n" not in s:
        print(s)
        n += 1
PY
tap_plan $((${#lists[@]} + 2))
diag <<<"scontrol of Slurm $version (SLURM_CONF=$SLURM_CONF)"
hosts() { tr '\n' ' ' | sed 's/ $//'; }

for l in "${lists[@]}"; do
  ref_out=$(timeout 10 scontrol show hostnames "$l" 2>"$WORK/err")
  if grep -q '^Invalid hostlist' "$WORK/err"; then ref=INVALID; else ref=$(hosts <<<"$ref_out"); fi
  if mine_out=$("$EXPAND" "$version" "$l" 2>"$WORK/err2"); then mine=$(hosts <<<"$mine_out"); else mine=INVALID; fi
  shown="'${l//$'\t'/\\t}'"
  if [[ $ref == "$mine" ]]; then ok "$shown: ${mine:0:60}"
  else not_ok "$shown: scontrol '${ref:0:200}', project '${mine:0:200}'"; cat "$WORK/err2" | diag; fi
done
same=0 first_diff=
while IFS= read -r l; do
  ref_out=$(timeout 10 scontrol show hostnames "$l" 2>"$WORK/err")
  if grep -q '^Invalid hostlist' "$WORK/err"; then ref=INVALID; else ref=$(hosts <<<"$ref_out"); fi
  if mine_out=$("$EXPAND" "$version" "$l" 2>/dev/null); then mine=$(hosts <<<"$mine_out"); else mine=INVALID; fi
  if [[ $ref == "$mine" ]]; then same=$((same + 1))
  elif [[ -z $first_diff ]]; then first_diff="'$l': scontrol '${ref:0:120}', project '${mine:0:120}'"; fi
done <"$WORK/generated"
total=$(wc -l <"$WORK/generated")
if ((total == 200 && same == total)); then ok "$same generated lists (seed 7) expand as scontrol expands them"
else not_ok "$same of $total generated lists agree; first difference: $first_diff"; fi
# The comparison can fail: a project answer changed by one host is told apart from scontrol's.
ref=$(timeout 10 scontrol show hostnames 'n[1-3]' | hosts)
if [[ $ref == "n1 n2 n3" && $ref != "$("$EXPAND" "$version" 'n[1-2]' | hosts)" ]]; then ok "the comparison tells 'n[1-3]' from 'n[1-2]'"
else not_ok "the comparison's control: scontrol gave '$ref'"; fi
