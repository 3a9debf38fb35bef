#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/mutants/run.sh [NAME...]: the mutant corpus. Each tests/mutants/NAME.patch is a small,
# realistic bug (a boundary moved, a check dropped, a factor lost) with the tests that must catch it
# on its "# kill:" line. For each, in a scratch copy of this built tree (configured again there, so
# every path is the copy's), the patch is applied, the tree rebuilt incrementally, those tests run
# (make check TESTS=...), and the patch taken back. A mutant whose tests all pass survived: the run
# ends 1, naming it. It prints each mutant's fate and the kill rate. Needs the tree built first
# (./configure && make check TESTS= builds the test programs); Slurm cluster tests need root.
# Environment: DLT_MUTANT_DIR, the scratch folder (default: a fresh one under /tmp, removed after).
#
# tests/mutants/run.sh --unseen DIR: the suite measured on mutants outside the corpus (DIR/*.patch,
# absolute path, written without reading tests/; no "# kill:" line needed): each through the unit
# tests, then, if it survives them, the local tests (tests/local/ and tests/repo/), as the README's
# suite runs them; a mutant that does not build is left out of the rate. Prints each fate, the
# stage that killed it and the kill rate; exits 0 (survivors are the finding, not a failure).
set -u
SRC=$(cd "$(dirname "$0")/../.." && pwd)
cd "$SRC" || exit 2
[[ -f config.status ]] || { echo "mutants: configure and build the tree first (./configure && make check TESTS=)"; exit 2; }
UNSEEN=
if [[ ${1:-} == --unseen ]]; then
  [[ -d ${2:-} && ${2:0:1} == / ]] || { echo "mutants: --unseen DIR: an absolute folder of .patch files"; exit 2; }
  UNSEEN=$2
  mapfile -t ALL < <(ls "$UNSEEN"/*.patch 2>/dev/null | sort)
  UNIT=$(ls tests/unit/test_*.c | sed 's/\.c$//' | tr '\n' ' ')
  LOCAL=$(grep -o 'tests/\(local\|repo\)/[a-z0-9_]*\.sh' Makefile.am | sort -u | tr '\n' ' ')
else
  mapfile -t ALL < <(ls tests/mutants/*.patch 2>/dev/null | sort)
  if (($#)); then
    ALL=()
    for n in "$@"; do ALL+=("tests/mutants/$n.patch"); done
  fi
fi
((${#ALL[@]})) || { echo "mutants: no mutant"; exit 2; }
for m in "${ALL[@]}"; do
  [[ -f $m ]] || { echo "mutants: $m: no such mutant"; exit 2; }
  [[ -n $UNSEEN ]] || grep -q '^# kill: .' "$m" || { echo "mutants: $m has no '# kill:' line naming its tests"; exit 2; }
done
args=$(./config.status --config)
# The scratch copy has no ../shared beside it: tests that build NCCL's topology code from there
# (tests/local/nccl_topo.sh) are pointed at this tree's.
if [[ -z ${DLT_NCCL_TARBALL:-} ]]; then
  for f in "$SRC"/../shared/nccl-src/nccl-*-src.tar.xz "$SRC"/../../shared/nccl-src/nccl-*-src.tar.xz; do
    [[ -f $f ]] && export DLT_NCCL_TARBALL=$f && break
  done
fi
W=${DLT_MUTANT_DIR:-$(mktemp -d /tmp/dltrain-mutants.XXXXXX)}
[[ -n ${DLT_MUTANT_DIR:-} ]] || trap 'rm -rf "$W"' EXIT
mkdir -p "$W"
echo "mutants: copying the built tree to $W and configuring it there"
tar -C "$SRC" --exclude=./tests/tmp --exclude=./.git --exclude=./_asan --exclude=./_deb --exclude=./_rpm \
  --exclude='./dltrain-*' -cf - . | tar -C "$W" -xf - || exit 2
cd "$W" || exit 2
eval "./configure $args" >configure.out 2>&1 || { tail -5 configure.out; echo "mutants: configure failed in $W"; exit 2; }
make -j"$(nproc)" check TESTS= >build.out 2>&1 || { tail -20 build.out; echo "mutants: the unmutated tree does not build"; exit 2; }
killed=0 survived=0 broken=0 names=""
if [[ -n $UNSEEN ]]; then
  unbuilt=0
  for m in "${ALL[@]}"; do
    name=$(basename "$m" .patch) t0=$SECONDS
    patch -s -p1 <"$m" || { echo "BROKEN   $name: does not apply"; broken=$((broken + 1)); continue; }
    if ! make -j"$(nproc)" check TESTS= >"$name.build" 2>&1; then
      echo "UNBUILT  $name: does not build (left out)"; unbuilt=$((unbuilt + 1))
    elif ! make -j2 check TESTS="$UNIT" >"$name.unit" 2>&1; then
      echo "KILLED   $name unit ($((SECONDS - t0)) s): $(grep -hE '^(FAIL|ERROR):' "$name.unit" | head -1 | cut -c1-150)"
      killed=$((killed + 1))
    elif ! make -j2 check TESTS="$LOCAL" >"$name.local" 2>&1; then
      echo "KILLED   $name local ($((SECONDS - t0)) s): $(grep -hE '^(FAIL|ERROR):' "$name.local" | head -1 | cut -c1-150)"
      killed=$((killed + 1))
    else
      echo "SURVIVED $name ($((SECONDS - t0)) s): the unit and local tests passed: $(sed -n 's/^# mutant: //p' "$m")"
      survived=$((survived + 1))
    fi
    patch -s -R -p1 <"$m" || { echo "mutants: cannot take $name back"; exit 2; }
  done
  total=$((killed + survived))
  echo "mutants: unseen: $killed of $total killed (${total:+$((100 * killed / (total ? total : 1)))}%); $unbuilt did not build, $broken did not apply"
  exit 0
fi
for m in "${ALL[@]}"; do
  name=$(basename "$m" .patch)
  desc=$(sed -n 's/^# mutant: //p' "$m")
  tests=$(sed -n 's/^# kill: //p' "$m")
  t0=$SECONDS
  if ! patch -s -p1 <"$SRC/$m"; then
    echo "BROKEN   $name: the patch does not apply (the code moved: remake it)"
    broken=$((broken + 1)); names+=" $name"; continue
  fi
  if ! make -j"$(nproc)" check TESTS= >"$name.build" 2>&1; then
    echo "KILLED   $name ($((SECONDS - t0)) s): it does not build ($desc)"
    killed=$((killed + 1))
  elif make -j2 check TESTS="$tests" >"$name.check" 2>&1; then
    echo "SURVIVED $name ($((SECONDS - t0)) s): $tests passed with it: $desc"
    survived=$((survived + 1)); names+=" $name"
  else
    fails=$(grep -hE '^(FAIL|ERROR):' "$name.check" | head -2 | cut -c1-160 | tr '\n' ' ')
    echo "KILLED   $name ($((SECONDS - t0)) s): ${fails:-a test failed}"
    killed=$((killed + 1))
  fi
  patch -s -R -p1 <"$SRC/$m" || { echo "mutants: cannot take $name back"; exit 2; }
done
total=$((killed + survived + broken))
echo "mutants: $killed of $total killed ($((100 * killed / total))%)${names:+; not killed:$names}"
((survived == 0 && broken == 0))
