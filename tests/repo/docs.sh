#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The README and doc/*.md say what the tree has: the README stays a front door (at most 150 lines,
# the two fresh-machine commands as they are); in every one of them each link and #anchor leads
# somewhere, each repository path in `code` exists, each `dltrain COMMAND` is a command, and each
# --option is one that dltrain, its man pages, configure, or the named script or tool takes.
. "$(dirname "$0")/../slurm/lib.sh"
DLTRAIN=$DLT_BUILDDIR/trainer/dltrain
[[ -x $DLTRAIN ]] || skip_all "dltrain not built"
cd "$DLT_SRCDIR" || exit 1
DOCS=(README.md doc/training.md doc/gpu.md doc/pytorch.md doc/site-install.md doc/internals.md)
tap_plan 7

n=$(wc -l <README.md)
if ((n <= 150)) && grep -q -x -F '       bash contrib/quickstart.sh' README.md &&
  grep -q -x -F '       bash contrib/install-deps.sh && ./autogen.sh && ./configure --enable-test-hooks && make -j2 check && bash tests/summary.sh' README.md; then
  ok "README: $n lines (at most 150), the two fresh-machine commands as they are"
else not_ok "README: $n lines, or a fresh-machine command changed"; fi

missing=()
for f in "${DOCS[@]}"; do [[ -f $f ]] || missing+=("$f"); done
if ((${#missing[@]} == 0)); then ok "the documents exist: ${DOCS[*]}"; else not_ok "missing: ${missing[*]}"; fi

# Markdown links: relative to the linking file; an #anchor must be one of the target's headings
# (GitHub's slug: lower case, punctuation dropped, spaces as hyphens).
_slugs() { sed -n 's/^#\+ //p' "$1" | tr 'A-Z' 'a-z' | sed 's/[^a-z0-9 _-]//g; s/ /-/g'; }
bad=() links=0
for f in "${DOCS[@]}"; do
  while IFS= read -r target; do
    [[ $target == http* || $target == mailto:* ]] && continue
    links=$((links + 1))
    path=${target%%#*} anchor=
    [[ $target == *#* ]] && anchor=${target#*#}
    [[ -z $path ]] && path=$(basename "$f") # an anchor in the same file
    full=$(dirname "$f")/$path
    if [[ ! -e $full ]]; then bad+=("$f: $target (no $full)")
    elif [[ -n $anchor ]] && ! _slugs "$full" | grep -q -x -F -- "$anchor"; then bad+=("$f: $target (no heading #$anchor)"); fi
  done < <(grep -o -E '\]\([^)]+\)' "$f" | sed -E 's/^\]\(//; s/\)$//')
done
if ((${#bad[@]} == 0 && links >= 8)); then ok "$links links between the documents lead to files and headings that exist"
else not_ok "${#bad[@]} broken links (of $links)"; printf '%s\n' "${bad[@]}" | diag; fi

# Repository paths in `code`: plugin/..., tests/..., contrib/... (globs allowed; a program by its source).
bad=() paths=0
for f in "${DOCS[@]}"; do
  while IFS= read -r p; do
    paths=$((paths + 1))
    # A program is there as its source (a VPATH or distcheck build keeps programs out of the source tree).
    compgen -G "$p" >/dev/null || compgen -G "$p.c" >/dev/null || bad+=("$f: $p")
  done < <(grep -o '`[^`]*`' "$f" | tr -d '`' |
    grep -o -E '(^|[ (=])(\./)?(plugin|pmix|trainer|tests|contrib|doc|debian|man|\.ci)/[A-Za-z0-9_./*-]*' |
    sed -E 's/^[ (=]//; s/^\.\///; s/[.,]$//' | sort -u)
done
if ((${#bad[@]} == 0 && paths >= 40)); then ok "$paths repository paths named in the documents exist"
else not_ok "${#bad[@]} named paths do not exist (of $paths)"; printf '%s\n' "${bad[@]}" | diag; fi

# `dltrain COMMAND` in code: one of the commands dltrain --help lists.
cmds=$("$DLTRAIN" --help 2>&1 | sed -n 's/^  \([a-z]\+\) .*/\1/p' | tr '\n' ' ')
bad=() seen=0
for f in "${DOCS[@]}"; do
  while IFS= read -r c; do
    seen=$((seen + 1))
    [[ " $cmds " == *" $c "* ]] || bad+=("$f: dltrain $c")
  done < <({ grep -o '`[^`]*`' "$f"; grep -E '^    ' "$f"; } | grep -o -E '(^|[ `(])dltrain [a-z]+' | awk '{print $2}')
done
if ((${#bad[@]} == 0 && seen >= 10)); then ok "the $seen dltrain commands named in the documents are commands ($cmds)"
else not_ok "commands dltrain does not have: ${bad[*]} (it has: $cmds)"; fi

# --options: dltrain's (its commands' --help and man pages), the plugin's and the tools' man pages,
# configure's; else one of the scripts or outside tools named here, checked in that script.
known=$({ for c in train eval bench check info env "data pack"; do "$DLTRAIN" $c --help 2>&1; done
  sed 's/\\//g' man/*.[1-8]; ./configure --help 2>/dev/null || true; } | grep -o -E -- '--[a-z][a-z0-9-]*' | sort -u)
declare -A SCRIPT=([--svg]=contrib/report.py [--accuracy-svg]=contrib/report.py [--dry-run]=tests/device/run.sh
  [--slurm-only]=tests/device/pack.sh [--all]=tests/device/fusion_probe.c
  [--ranks]=tests/device/run.sh [--only]=tests/local/random_damage.sh [--peer]=tests/device/torch_bench.py [--self-check]=tests/device/torch_bench.py
  [--requeue]=contrib/sbatch/resnet50-imagenet.sbatch [--kill-on-bad-exit]=contrib/sbatch/resnet50-imagenet.sbatch
  [--cpus-per-task]=contrib/sbatch/resnet50-imagenet.sbatch [--exclusive]=contrib/sbatch/pytorch-ddp.sbatch
  [--installpath]=tests/repo/easybuild.sh [--sourcepath]=tests/repo/easybuild.sh [--robot]=tests/repo/easybuild.sh
  [--module-syntax]=tests/repo/easybuild.sh [--allow-use-as-root-and-accept-consequences]=tests/repo/easybuild.sh
  [--cgroup-manager]=tests/slurm/podman.sh [--ipc]=tests/slurm/podman.sh [--network]=tests/slurm/podman.sh
  [--runtime]=tests/slurm/podman.sh [--ulimit]=tests/slurm/podman.sh [--unseen]=tests/mutants/run.sh)
# Outside tools' own options: rpmbuild's, nvcc's, tensorboard's, torchrun's, srun's, eb's, pkg-config's, Apptainer's,
# the dynamic loader's.
OUTSIDE=" --nodeps --list-gpu-arch --logdir --nnodes --nproc-per-node --rdzv-backend --rdzv-endpoint --resv-ports --gpus --try-amend --inject-checksums --rebuild --cflags --libs --contain --containall --install --no-act --library-path "
bad=() opts=0
for f in "${DOCS[@]}"; do
  while IFS= read -r o; do
    opts=$((opts + 1))
    grep -q -x -F -- "$o" <<<"$known" && continue
    [[ $OUTSIDE == *" $o "* ]] && continue
    [[ -n ${SCRIPT[$o]:-} ]] && grep -q -F -- "$o" "${SCRIPT[$o]}" && continue
    bad+=("$f: $o")
  done < <(grep -o -E -- '(^|[^A-Za-z0-9_-])--[a-z][a-z0-9-]*' "$f" | sed -E 's/^.*--/--/' | sort -u)
done
if ((${#bad[@]} == 0 && opts >= 50)); then ok "the $opts options named in the documents exist (dltrain, man pages, configure, scripts)"
else not_ok "${#bad[@]} options named in the documents exist nowhere (of $opts)"; printf '%s\n' "${bad[@]}" | diag; fi

# The GPU status is said plainly in the README and in doc/gpu.md: run on one GPU, and what is untried.
if grep -q 'GPUs: run on one H200' README.md && grep -q 'Multi-GPU and multi-node GPU runs are untried' README.md &&
  grep -q 'the CUDA path has run on an H200' doc/gpu.md && grep -q 'Multi-GPU and multi-node runs have not been tried' doc/gpu.md; then
  ok "README and doc/gpu.md say plainly where the CUDA path has run (one H200) and what is untried"
else not_ok "the GPU status is not said plainly in README.md / doc/gpu.md"; fi
exit 0
