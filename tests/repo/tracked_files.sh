#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# What git tracks is source: no compiled object (an ELF file: a program, a library, an object
# file) and no file over 256 KiB unless it is a fixture listed here, so that a build output
# committed by mistake (tests/unit/test_planning was, 2.4 MB without its source) fails CI.
# Outside a git checkout (the dist tarball) there is nothing to check.
. "$(dirname "$0")/../slurm/lib.sh"
cd "$DLT_SRCDIR" || exit 1
git rev-parse --is-inside-work-tree >/dev/null 2>&1 || skip_all "not a git checkout (a dist tarball)"
MAX=$((256 * 1024))
FIXTURES=()  # path -> allowed over MAX: none yet
tap_plan 2
elf=() big=()
while IFS= read -r -d '' f; do
  [[ -f $f && ! -L $f ]] || continue
  [[ $(head -c 4 "$f" | od -An -tx1 | tr -d ' \n') == 7f454c46 ]] && elf+=("$f")
  size=$(stat -c %s "$f")
  if ((size > MAX)); then
    listed=0
    for x in "${FIXTURES[@]}"; do [[ $x == "$f" ]] && listed=1; done
    ((listed)) || big+=("$f ($size bytes)")
  fi
done < <(git ls-files -z)
if ((${#elf[@]} == 0)); then ok "no tracked file is a compiled object (ELF)"
else not_ok "${#elf[@]} tracked ELF file(s): build outputs belong in .gitignore"; printf '%s\n' "${elf[@]}" | diag; fi
if ((${#big[@]} == 0)); then ok "no tracked file over $((MAX / 1024)) KiB outside the fixture list"
else not_ok "${#big[@]} tracked file(s) over $((MAX / 1024)) KiB"; printf '%s\n' "${big[@]}" | diag; fi
