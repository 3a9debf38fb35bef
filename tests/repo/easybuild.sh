#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# easybuild.sh [TARBALL]: the EasyBuild install (contrib/easybuild/dltrain-VERSION.eb, doc/site-install.md
# "EasyBuild / Lmod"), as a site runs it. eb builds the easyconfig from the release tarball (default:
# the build tree's dltrain-VERSION.tar.gz, which make distcheck leaves; made with make dist-gzip when
# absent) into a private install path, offline: the source comes from --sourcepath, and the only
# download EasyBuild tries (ConfigureMake's newer config.guess) goes to a closed loopback port. Then,
# under Lmod, `module use PREFIX/modules/all; module load dltrain`: dltrain, dltrain-topo, libdltpmix,
# its pkg-config file and the man pages must be the module's, not a system copy, `dltrain --help`
# and a one-step synthetic training run, and `module unload` takes them away again.
# A full build (about a minute on 2 cores): not part of make check; .ci/run runs it after make
# distcheck. Skips, saying so, without eb (contrib/install-easybuild.sh) or Lmod.
. "$(dirname "$0")/../slurm/lib.sh"
VERSION=$(sed -n 's/^AC_INIT(\[dltrain\], \[\([^]]*\)\].*/\1/p' "$DLT_SRCDIR/configure.ac")
EC=$DLT_SRCDIR/contrib/easybuild/dltrain-$VERSION.eb
EB=${DLT_EB:-${DLT_EB_VENV:-/opt/ebvenv}/bin/eb}
[[ -x $EB ]] || EB=$(command -v eb 2>/dev/null) || EB=
[[ -n $EB ]] || skip_all "EasyBuild not installed (no ${DLT_EB_VENV:-/opt/ebvenv}/bin/eb, no eb on PATH): bash contrib/install-easybuild.sh"
LMOD_INIT=${LMOD_PKG:-/usr/share/lmod/lmod}/init/bash
[[ -f $LMOD_INIT ]] || skip_all "Lmod not installed (no $LMOD_INIT): apt-get install lmod, or bash contrib/install-easybuild.sh"
[[ -n $VERSION && -f $EC ]] || { echo "Bail out! no easyconfig for configure.ac's version '$VERSION' ($EC)"; exit 1; }
TARBALL=${1:-$DLT_BUILDDIR/dltrain-$VERSION.tar.gz}
if [[ ! -f $TARBALL ]]; then
  [[ $# -eq 0 ]] || { echo "Bail out! $TARBALL: no such file"; exit 1; }
  make -C "$DLT_BUILDDIR" dist-gzip >/dev/null 2>&1 || { echo "Bail out! make dist-gzip failed in $DLT_BUILDDIR"; exit 1; }
fi
tap_plan 9
rm -rf "${WORK:?}" && mkdir -p "$WORK/src" "$WORK/xdg" || exit 1
cp "$TARBALL" "$WORK/src/dltrain-$VERSION.tar.gz" || exit 1
PREFIX=$WORK/eb
ROOT=$PREFIX/software/dltrain/$VERSION
EBLOG=$WORK/eb.out

# A site's EasyBuild configuration (EASYBUILD_* variables, its config file) stays out of it, and so
# do the network and the machine's own modules.
for v in $(compgen -e | grep '^EASYBUILD_'); do unset "$v"; done
root_flag=()
[[ $(id -u) -eq 0 ]] && root_flag=(--allow-use-as-root-and-accept-consequences)
NOWHERE=http://127.0.0.1:9
t0=$SECONDS
(set +u; export MODULEPATH= XDG_CONFIG_HOME=$WORK/xdg http_proxy=$NOWHERE https_proxy=$NOWHERE HTTP_PROXY=$NOWHERE HTTPS_PROXY=$NOWHERE no_proxy= NO_PROXY=
  . "$LMOD_INIT" && PATH=$(dirname "$EB"):$PATH nice timeout 900 "$EB" "$EC" --prefix="$PREFIX" --installpath="$PREFIX" \
    --sourcepath="$WORK/src" --robot --module-syntax=Lua --parallel=2 --tmpdir="$WORK/tmp" "${root_flag[@]}") >"$EBLOG" 2>&1
rc=$?
took=$((SECONDS - t0))
if ((rc == 0)) && grep -q '^== COMPLETED: Installation ended successfully' "$EBLOG" && [[ -f $PREFIX/modules/all/dltrain/$VERSION.lua ]]; then
  ok "eb built and installed dltrain $VERSION from the tarball in ${took} s (module $PREFIX/modules/all/dltrain/$VERSION.lua)"
else not_ok "eb $(basename "$EC") (exit $rc, ${took} s)"; tail -25 "$EBLOG" | diag; fi

# EasyBuild's own sanity check ran the easyconfig's commands with the module loaded.
LOG=$(ls "$ROOT"/easybuild/easybuild-dltrain-"$VERSION"-*.log 2>/dev/null | head -1)
if [[ -n $LOG ]] && grep -q "result for command 'dltrain --help': OK" "$EBLOG" &&
  grep -q "result for command '.*dltrain train --synthetic.*--steps 1': OK" "$EBLOG" &&
  grep -q "file 'lib/slurm/spank_dltrain.so' found: OK" "$EBLOG"; then
  ok "the easyconfig's sanity check found the installed files and ran dltrain --help and one synthetic step"
else not_ok "sanity check results missing from the eb output"; grep -E '>> (result|file)|ERROR' "$EBLOG" | tail -20 | diag; fi

# Offline: every URL eb tried is the config.guess one (refused at the loopback port), nothing came
# of it, and the source was the tarball given.
urls=$(grep -o 'trying to download [^ ]*' "${LOG:-/dev/null}" | awk '{print $4}' | sort -u)
if [[ -n $LOG ]] && ! grep -v -q 'config\.guess' <<<"${urls:-config.guess}" && [[ ! -e $WORK/src/generic/eb_v*/ConfigureMake/config.guess ]] &&
  grep -q "$WORK/src/dltrain-$VERSION.tar.gz" "$LOG"; then
  ok "nothing downloaded: the source was --sourcepath's tarball (URLs tried: ${urls:-none})"
else not_ok "eb reached for the network or another source"; printf '%s\n' "$urls" | diag; fi

# configure took the CUDA backend exactly where the toolkit is (the easyconfig's rule).
if [[ -x /usr/local/cuda/bin/nvcc ]]; then want="--with-cuda=/usr/local/cuda" module_want=yes
else want="--without-cuda" module_want=no; fi
module_got=no
[[ -f $ROOT/lib/dltrain/dltrain_cuda.so ]] && module_got=yes
if [[ -n $LOG ]] && grep -q -- "configure --prefix=$ROOT $want " "$LOG" && [[ $module_got == "$module_want" ]]; then
  ok "configure $want (nvcc in /usr/local/cuda: $module_want; CUDA module installed: $module_got)"
else not_ok "CUDA choice: wanted $want and module $module_want, module $module_got"; grep -o 'configure --prefix=.*' "${LOG:-/dev/null}" | head -1 | diag; fi

# The module, under Lmod, from a login-like shell that knows no other modules.
in_module() {
  (set +u; export MODULEPATH= OMP_NUM_THREADS=2; unset LD_LIBRARY_PATH PKG_CONFIG_PATH MANPATH
    . "$LMOD_INIT" && module use "$PREFIX/modules/all" && module load dltrain && eval "$1")
}
out=$(in_module 'command -v dltrain; command -v dltrain-topo; echo "EBROOTDLTRAIN=$EBROOTDLTRAIN"' 2>&1)
if [[ $(sed -n 1p <<<"$out") == "$ROOT/bin/dltrain" && $(sed -n 2p <<<"$out") == "$ROOT/sbin/dltrain-topo" &&
  $(sed -n 3p <<<"$out") == "EBROOTDLTRAIN=$ROOT" ]]; then
  ok "module load dltrain: dltrain and dltrain-topo are the module's ($ROOT/bin, sbin)"
else not_ok "module load dltrain: not the module's programs"; echo "$out" | diag; fi

out=$(in_module 'dltrain --help' 2>&1); rc=$?
if ((rc == 0)) && grep -q '^usage: dltrain COMMAND' <<<"$out" && grep -q '^  train ' <<<"$out"; then
  ok "dltrain --help from the module: usage and the commands, status 0"
else not_ok "dltrain --help from the module (status $rc)"; echo "$out" | tail -10 | diag; fi

out=$(in_module 'cd "$WORK" && timeout 120 dltrain train --synthetic --arch resnet18 --width 0.25 --image-size 32 --classes 4 --batch 8 --synthetic-size 16 --steps 1' 2>&1); rc=$?
if ((rc == 0)) && grep -q 'epoch 1 step 1/1 loss [0-9.]\+' <<<"$out" && grep -q 'done: 1 step' <<<"$out"; then
  ok "one synthetic training step from the module: $(grep -o 'loss [0-9.]*' <<<"$out" | head -1), status 0"
else not_ok "synthetic training step from the module (status $rc)"; echo "$out" | tail -10 | diag; fi

# What it links and what developers find: libdltpmix and its .pc, and the man pages, are the module's.
out=$(in_module 'ldd "$(command -v dltrain)" | awk "/libdltpmix/ {print \$3}"; pkg-config --modversion dltpmix; pkg-config --variable=libdir dltpmix; man -w dltrain; man -w 8 spank_dltrain' 2>&1)
mapfile -t got <<<"$out"
if [[ ${got[0]:-} == "$ROOT/lib/libdltpmix.so.0" && ${got[1]:-} == "$VERSION" && ${got[2]:-} == "$ROOT/lib" &&
  ${got[3]:-} == "$ROOT/share/man/man1/dltrain.1" && ${got[4]:-} == "$ROOT/share/man/man8/spank_dltrain.8" ]]; then
  ok "dltrain runs on the module's libdltpmix; pkg-config dltpmix $VERSION and man dltrain, spank_dltrain(8) are the module's"
else not_ok "library, pkg-config or man pages not the module's"; echo "$out" | diag; fi

# Unloading takes it all away again; the plugin stays where plugstack.conf would name it.
out=$(in_module 'module unload dltrain; command -v dltrain || echo none; echo "${EBROOTDLTRAIN:-unset}"' 2>&1)
plugin=$ROOT/lib/slurm/spank_dltrain.so
if [[ $(sed -n 1p <<<"$out") != "$ROOT"/* && $(sed -n 2p <<<"$out") == unset ]] &&
  nm -D --defined-only "$plugin" 2>/dev/null | grep -q ' slurm_spank_init$'; then
  ok "module unload dltrain leaves no dltrain of the module on PATH; the plugin for plugstack.conf: $plugin (exports slurm_spank_init)"
else not_ok "module unload, or the plugin at $plugin"; echo "$out" | diag; fi
exit 0
