#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Every C, header and CUDA file of the tree is as .clang-format says, with the pinned clang-format
# (14, Debian 12's: another version formats differently, so it would report files that are fine).
# A development tool, not a build requirement: without clang-format 14 the check skips, saying so;
# .ci/run installs it, so CI fails on a file that differs. The fix: clang-format -i FILE.
. "$(dirname "$0")/../slurm/lib.sh"
cd "$DLT_SRCDIR" || exit 1
CF=${CLANG_FORMAT:-}
for c in clang-format-14 clang-format; do
  [[ -z $CF ]] && command -v "$c" >/dev/null 2>&1 && [[ $("$c" --version) == *" version 14."* ]] && CF=$c
done
[[ -n $CF ]] || skip_all "no clang-format 14 (apt-get install clang-format on Debian 12; another version formats differently)"
git rev-parse --git-dir >/dev/null 2>&1 || skip_all "not a git checkout (the files to check are git's; make distcheck's tree has no .git)"
tap_plan 1
bad=()
while IFS= read -r f; do
  "$CF" --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done < <(git ls-files '*.c' '*.h' '*.cu')
if ((${#bad[@]} == 0)); then ok "every C, header and CUDA file is as .clang-format says ($("$CF" --version | grep -o '14\.[0-9.]*'))"
else not_ok "${#bad[@]} file(s) differ from .clang-format (run: $CF -i FILE)"; printf '%s\n' "${bad[@]}" | head -30 | diag; fi
