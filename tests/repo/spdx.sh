#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Every tracked source and script file states its licence in its first line (its second after a
# "#!" line): "SPDX-License-Identifier: Apache-2.0" (LICENSE holds the text). Sources and scripts:
# C, headers, CUDA, shell, Python, Makefile.am, configure.ac, m4, man pages, sbatch templates and
# any other file that starts with "#!". build-aux/tap-driver.sh is Automake's, under its own
# licence (debian/copyright names it). Lists every file that lacks the line.
. "$(dirname "$0")/../slurm/lib.sh"
cd "$DLT_SRCDIR" || exit 1
# A tarball unpacked inside a checkout (make distcheck, .ci/run's ASan copy) is not that checkout.
[[ $(git rev-parse --show-toplevel 2>/dev/null) == "$(pwd -P)" ]] ||
  skip_all "$DLT_SRCDIR is not the top of a git checkout (an unpacked tarball): which files are tracked is unknown; the checkout's make check runs this"
tap_plan 2
THIRD_PARTY='^build-aux/tap-driver\.sh$'
missing=() n=0
while IFS= read -r f; do
  [[ -f $f ]] || continue
  first=$(head -c 2 "$f")
  case "$f" in
    *.c|*.h|*.cu|*.sh|*.py|*.sbatch|*Makefile.am|configure.ac|*.m4|man/*.[1-8]) ;;
    *) [[ $first == '#!' ]] || continue ;;
  esac
  [[ $f =~ $THIRD_PARTY ]] && continue
  n=$((n + 1))
  if [[ $first == '#!' ]]; then line=$(sed -n 2p "$f"); else line=$(head -n 1 "$f"); fi
  [[ $line == *"SPDX-License-Identifier: Apache-2.0"* ]] || missing+=("$f")
done < <(git ls-files)
if ((${#missing[@]} == 0 && n > 100)); then ok "all $n tracked source and script files carry SPDX-License-Identifier: Apache-2.0"
else not_ok "${#missing[@]} of $n source/script files lack the SPDX line at the top"; printf '%s\n' "${missing[@]}" | diag; fi
if cmp -s LICENSE /usr/share/common-licenses/Apache-2.0 2>/dev/null ||
   { [[ ! -e /usr/share/common-licenses/Apache-2.0 ]] && grep -q '^ *Apache License$' LICENSE && grep -q 'END OF TERMS AND CONDITIONS' LICENSE; }; then
  ok "LICENSE is the Apache License 2.0 text ($(wc -l <LICENSE) lines)"
else not_ok "LICENSE differs from /usr/share/common-licenses/Apache-2.0"; diff LICENSE /usr/share/common-licenses/Apache-2.0 2>&1 | head -5 | diag; fi
