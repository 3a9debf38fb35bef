#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/device/pack.sh: builds, here, what tests/device/run.sh runs on a lent GPU machine and puts
# everything that machine lacks into .devpack/ (ignored by git), ONE folder to name in the device
# tool's carry, under its 64 MiB limit:
#   .devpack/dltrain-device.tar.xz  dltrain and its CUDA module, cuda_ops_check, nccl_check,
#                                   fusion_probe, libdltpmix and the shared libraries a bare GPU
#                                   machine lacks (oneDNN, PMIx, libjpeg-turbo,
#                                   hwloc, ...); CUDA's runtime, cuDNN and cuBLAS are not packed (the
#                                   machine's CUDA 13 toolkit and PyTorch's nvidia-* wheels serve);
#                                   photos/: two real photographs (scikit-learn's sample images, 0.2
#                                   MB) for the fed-training rows
#   .devpack/dltrain-slurm.tar.xz   slurm/: this machine's Slurm 22.05 (Debian's packages) for a
#                                   one-node cluster there (tests/device/slurm_node.sh): slurmctld,
#                                   slurmd, slurmstepd, munged, srun, sinfo, squeue, scontrol, scancel,
#                                   munge, unmunge, the Slurm plugins the configuration loads,
#                                   libslurmfull, PMIx 4 with its components and help files, the
#                                   dltrain plugin and every library they load but the C and C++
#                                   runtimes; without Slurm here it is left out (the slurm-* phases
#                                   then say NOT TESTED)
#   .devpack/libnccl.so.2.30.7-sm90.xz  NCCL 2.30.7 built for sm_90 (H100/H200) alone: two ranks on
#                                   one GPU of one host need NCCL >= 2.30 (NCCL_MULTI_RANK_GPU_ENABLE,
#                                   src/init.cc); taken from $DLT_NCCL_DIR (default ../shared/device)
#                                   after checking its sha256 against the README there, or built
#                                   from $NCCL_SRC (a checkout of NVIDIA/nccl v2.30.7) with the
#                                   command documented in doc/gpu.md
#   .devpack/SHA256SUMS             what go.sh checks before it unpacks anything
# The build lives in .devbuild/ (ignored) and is incremental: a second pack after a small change
# takes seconds to minutes, not a full build. Built without MPI: GPU ranks talk through NCCL.
# Prints the total carried and fails when it is over DLT_PACK_MAX_MIB (default 56: room to spare
# under the tool's 64 MiB for the tracked tree that travels with it).
# --slurm-only DIR writes DIR/dltrain-slurm.tar.xz alone, in seconds, without the CUDA build: the
# dltrain plugin is $DLT_PLUGIN, else this tree's build, else .devbuild's (tests/slurm/pack_slurm.sh
# starts it on this machine).
set -euo pipefail
cd "$(dirname "$0")/../.."
SRC=$PWD
usage() { echo "usage: tests/device/pack.sh [--slurm-only DIR]   (environment: DLT_NCCL_DIR, NCCL_SRC, DLT_PACK_MAX_MIB, DLT_PLUGIN)" >&2; exit 2; }
SLURM_ONLY=
case $# in
  0) ;;
  2) [ "$1" = --slurm-only ] || usage; SLURM_ONLY=$2 ;;
  *) usage ;;
esac
NCCL_VER=2.30.7
NCCL_XZ=libnccl.so.$NCCL_VER-sm90.xz
B=$SRC/.devbuild
TMPS=()
trap 'rm -rf "${TMPS[@]}"' EXIT

# ------------------------------------------------------------------ the Slurm part
SLURM_LIBDIR=/usr/lib/x86_64-linux-gnu/slurm-wlm
PMIX_DIR=/usr/lib/x86_64-linux-gnu/pmix2
# The plugins cluster.sh's configuration makes slurmctld, slurmd, slurmstepd and srun load (each
# named in it, or Slurm's default for a setting it leaves out), seen in the daemons' memory maps and
# logs; tests/slurm/pack_slurm.sh fails when one is missing.
SLURM_PLUGINS="accounting_storage_none acct_gather_energy_none acct_gather_filesystem_none
  acct_gather_interconnect_none acct_gather_profile_none auth_munge cgroup_v1 cred_munge core_spec_none
  ext_sensors_none gpu_generic gres_gpu hash_k12 job_container_none jobacct_gather_none jobcomp_none
  launch_slurm mcs_none mpi_none mpi_pmix_v4 preempt_none prep_script priority_basic
  proctrack_linuxproc route_default sched_builtin select_cons_res select_cons_tres select_linear
  switch_none task_none topology_none"
SLURM_DAEMONS="slurmctld slurmd slurmstepd munged"
SLURM_COMMANDS="srun sinfo squeue scontrol scancel munge unmunge"
slurm_here() {
  local n
  for n in $SLURM_DAEMONS; do [ -x "/usr/sbin/$n" ] || return 1; done
  for n in $SLURM_COMMANDS; do [ -x "/usr/bin/$n" ] || return 1; done
  for n in $SLURM_PLUGINS libslurmfull; do [ -f "$SLURM_LIBDIR/$n.so" ] || return 1; done
  [ -f "$PMIX_DIR/lib/libpmix.so.2" ]
}
# Every library the given ELF files load that is not in the pack already, except the C runtime
# (glibc's libraries and loader) and the C++ runtime: a GPU machine with PyTorch has newer ones.
libs_of() {
  { LD_LIBRARY_PATH=$1/lib:$1/pmix2/lib ldd "${@:2}" 2>/dev/null || true; } | awk '/=> \// {print $3}' | sort -u | while read -r lib; do
    case $lib in "$1"/*) continue ;; esac
    case $(basename "$lib") in
      libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|libresolv.so*|libutil.so*|libanl.so*|ld-linux*) ;;
      libstdc++.so*|libgcc_s.so*) ;;
      *) echo "$lib" ;;
    esac
  done
}
# pack_slurm OUT PLUGIN: OUT/dltrain-slurm.tar.xz holding slurm/ (layout in tests/device/slurm_node.sh).
pack_slurm() {
  local out=$1 plugin=$2 T S n lib interp libpath glibc
  T=$(mktemp -d /tmp/dlt-slurmpack.XXXXXX); TMPS+=("$T")
  S=$T/slurm
  mkdir -p "$S"/{bin,sbin,libexec,lib/slurm,lib/pristine,pmix2/lib/pmix,pmix2/share/pmix}
  for n in $SLURM_DAEMONS; do cp "$(readlink -f "/usr/sbin/$n")" "$S/libexec/$n"; done
  for n in $SLURM_COMMANDS; do cp "$(readlink -f "/usr/bin/$n")" "$S/libexec/$n"; done
  cp "$SLURM_LIBDIR/libslurmfull.so" "$S/lib/"
  for n in $SLURM_PLUGINS; do cp "$SLURM_LIBDIR/$n.so" "$S/lib/slurm/"; done
  ln -s mpi_pmix_v4.so "$S/lib/slurm/mpi_pmix.so"
  # mpi/pmix dlopens libpmix.so from the folder compiled into it: slurm_node.sh writes the plugin
  # from this copy with that folder replaced by the pack's.
  cp "$SLURM_LIBDIR/mpi_pmix_v4.so" "$S/lib/pristine/"
  libpath=$PMIX_DIR/lib
  [ "$(grep -c -a -F "$libpath" "$SLURM_LIBDIR/mpi_pmix_v4.so")" = 1 ] ||
    { echo "pack: $SLURM_LIBDIR/mpi_pmix_v4.so does not name $libpath once: where does it look for libpmix.so?"; exit 1; }
  echo "$libpath" >"$S/lib/pristine/libpmix-dir"
  cp "$plugin" "$S/lib/spank_dltrain.so"
  cp "$(readlink -f "$PMIX_DIR/lib/libpmix.so.2")" "$S/pmix2/lib/libpmix.so.2"
  ln -s libpmix.so.2 "$S/pmix2/lib/libpmix.so"
  cp "$PMIX_DIR"/lib/pmix/*.so "$S/pmix2/lib/pmix/"
  cp "$PMIX_DIR"/share/pmix/help-*.txt "$S/pmix2/share/pmix/"
  [ ! -f "$PMIX_DIR/share/pmix-mca-params.conf" ] || cp "$PMIX_DIR/share/pmix-mca-params.conf" "$S/pmix2/share/"
  libs_of "$S" "$S"/libexec/* "$S"/lib/*.so "$S"/lib/slurm/*.so "$S"/pmix2/lib/libpmix.so.2 "$S"/pmix2/lib/pmix/*.so |
    while read -r lib; do cp -L "$lib" "$S/lib/"; done
  strip --strip-debug "$S/lib/spank_dltrain.so"
  interp=$(readelf -l "$S/libexec/srun" | sed -n 's/.*program interpreter: \(.*\)]$/\1/p')
  [ -n "$interp" ] || { echo "pack: no program interpreter in srun"; exit 1; }
  # Daemons: their libraries and PMIx's install folders through the environment (slurmstepd,
  # which hosts the PMIx server, inherits slurmd's); /proc/PID/exe stays the pack's program. hwloc
  # (PMIx's, slurmd's) looks for its plugins in a folder that does not exist, here as there: its
  # built-in Linux discovery alone, instead of whatever plugins (X11, OpenCL) a machine has.
  for n in slurmctld slurmd munged; do
    cat >"$S/sbin/$n" <<SH
#!/bin/sh
# Written by tests/device/pack.sh: the carried $n with the carried libraries.
d=\$(cd "\$(dirname "\$0")/.." && pwd)
LD_LIBRARY_PATH=\$d/lib:\$d/pmix2/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
PMIX_PREFIX=\$d/pmix2 PMIX_EXEC_PREFIX=\$d/pmix2 PMIX_LIBDIR=\$d/pmix2/lib PMIX_PKGLIBDIR=\$d/pmix2/lib/pmix
PMIX_DATADIR=\$d/pmix2/share PMIX_PKGDATADIR=\$d/pmix2/share/pmix PMIX_SYSCONFDIR=\$d/pmix2/share
PMIX_MCA_mca_base_component_path=\$d/pmix2/lib/pmix HWLOC_PLUGINS_PATH=\$d/lib/hwloc-none
export LD_LIBRARY_PATH PMIX_PREFIX PMIX_EXEC_PREFIX PMIX_LIBDIR PMIX_PKGLIBDIR PMIX_DATADIR PMIX_PKGDATADIR PMIX_SYSCONFDIR
export PMIX_MCA_mca_base_component_path HWLOC_PLUGINS_PATH
exec "\$d/libexec/$n" "\$@"
SH
  done
  # Commands: through the dynamic loader with --library-path, which does not go into the
  # environment: srun hands its environment to the tasks, and they are not to load these.
  for n in $SLURM_COMMANDS; do
    cat >"$S/bin/$n" <<SH
#!/bin/sh
# Written by tests/device/pack.sh: the carried $n with the carried libraries.
d=\$(cd "\$(dirname "\$0")/.." && pwd)
exec $interp --library-path "\$d/lib:\$d/pmix2/lib" "\$d/libexec/$n" "\$@"
SH
  done
  chmod 755 "$S"/sbin/* "$S"/bin/*
  { for n in slurmd slurmctld slurm-client slurm-wlm-basic-plugins munge libmunge2 libpmix2; do
      dpkg-query -W -f '${Package} ${Version}\n' "$n" 2>/dev/null || echo "$n (version unknown)"
    done
    echo "dltrain plugin: $plugin"; } >"$S/VERSIONS"
  mkdir -p "$out"
  tar -cf - -C "$T" slurm | xz -T2 -9 >"$out/dltrain-slurm.tar.xz"
  glibc=$(find "$S" -type f \( -name '*.so*' -o -path '*/libexec/*' \) -exec objdump -T {} + 2>/dev/null | grep -o 'GLIBC_2\.[0-9]*' | sort -t. -k2 -n -u | tail -1)
  echo "pack: Slurm part: $(du -sk "$S" | cut -f1) KiB in $(find "$S" -type f | wc -l) files, $(($(stat -c %s "$out/dltrain-slurm.tar.xz") / 1024)) KiB compressed ($(head -1 "$S/VERSIONS"); needs ${glibc:-GLIBC_?} or newer)"
}

if [ -n "$SLURM_ONLY" ]; then
  slurm_here || { echo "pack: Slurm 22.05's packages are not installed here (slurmctld slurmd slurm-client munge libpmix2; contrib/install-deps.sh)"; exit 1; }
  plugin=
  for c in "${DLT_PLUGIN:-}" "$SRC/plugin/.libs/spank_dltrain.so" "$B/plugin/.libs/spank_dltrain.so"; do
    [ -n "$c" ] && [ -f "$c" ] && { plugin=$c; break; }
  done
  [ -n "$plugin" ] || { echo "pack: no spank_dltrain.so built (make, or set DLT_PLUGIN)"; exit 1; }
  pack_slurm "$SLURM_ONLY" "$plugin"
  exit 0
fi

# ------------------------------------------------------------------ the whole pack
mkdir -p "$B"
echo "pack: building in $B"
# Copy the tree keeping mtimes, so that make rebuilds only what changed.
git ls-files -co --exclude-standard | grep -v -e '^\.devbuild/' -e '^\.devpack/' | tar -cf - -T - | tar -xf - -C "$B"
(
  cd "$B"
  if [ ! -f Makefile ]; then
    ./autogen.sh >/dev/null 2>&1
    ./configure --without-mpi --enable-test-hooks >configure.log 2>&1 || { tail -20 configure.log; exit 1; }
  fi
  grep -q "CUDA backend *yes" configure.log || { echo "pack: configure did not enable the CUDA backend"; exit 1; }
  make -j"$(nproc)" >make.log 2>&1 || { tail -20 make.log; exit 1; }
  make -j"$(nproc)" tests/device/cuda_ops_check tests/device/nccl_check tests/device/fusion_probe >>make.log 2>&1 || { tail -20 make.log; exit 1; }
)
P=$(mktemp -d /tmp/dlt-devpack.XXXXXX); TMPS+=("$P")
mkdir -p "$P/bin" "$P/lib"
for t in trainer/dltrain tests/device/cuda_ops_check tests/device/nccl_check tests/device/fusion_probe; do
  d=$(dirname "$t") n=$(basename "$t")
  if [ -x "$B/$d/.libs/$n" ]; then cp "$B/$d/.libs/$n" "$P/bin/"; else cp "$B/$t" "$P/bin/"; fi
done
# dltrain opens its CUDA module from its own folder (trainer/backend/cuda_loader.c).
cp "$B/trainer/.libs/dltrain_cuda.so" "$P/bin/"
cp -P "$B"/pmix/.libs/libdltpmix.so* "$P/lib/"
# Every library the programs load, except the C runtime, the C++ runtime and CUDA's own.
LD_LIBRARY_PATH=$B/pmix/.libs ldd "$P"/bin/* | awk '/=> \// {print $3}' | sort -u | while read -r lib; do
  case $(basename "$lib") in
    libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libstdc++.so*|libgcc_s.so*) ;;
    libcuda*|libnccl*|libcudnn*|libcublas*|libnvrtc*|libnvJitLink*) ;;
    libdltpmix*) ;;
    *) cp -L "$lib" "$P/lib/" ;;
  esac
done
# PMIx loads its components from its install prefix; a singleton needs none, but keep them.
[ -d /usr/lib/x86_64-linux-gnu/pmix2/lib/pmix ] && cp -r /usr/lib/x86_64-linux-gnu/pmix2/lib/pmix "$P/lib/pmix-mca"
strip --strip-debug "$P"/bin/* "$P"/lib/*.so* 2>/dev/null || true
# Two real photographs for the fed-training rows (run.sh's photos phase makes ILSVRC-sized JPEGs
# of them with tests/bench/make_photos.py): scikit-learn's sample images (china.jpg, flower.jpg,
# 640x427; see their README.txt there), taken from the Python that has scikit-learn here.
mkdir -p "$P/photos"
for py in "${DLT_TORCH_PYTHON:-/opt/torchvenv/bin/python}" python3; do
  imgs=$("$py" -c 'import os, sklearn.datasets; print(os.path.join(os.path.dirname(sklearn.datasets.__file__), "images"))' 2>/dev/null) &&
    [ -f "$imgs/china.jpg" ] && [ -f "$imgs/flower.jpg" ] && cp "$imgs/china.jpg" "$imgs/flower.jpg" "$imgs/README.txt" "$P/photos/" && break
done
[ -f "$P/photos/china.jpg" ] || echo "pack: no scikit-learn here: no photographs carried (the photos phase will say NOT TESTED)"
git -C "$SRC" rev-parse HEAD >"$P/COMMIT" 2>/dev/null || true
git -C "$SRC" status --short | grep -q . && echo "(with uncommitted changes)" >>"$P/COMMIT"
rm -rf "$SRC/.devpack"; mkdir -p "$SRC/.devpack"
tar -cf - -C "$P" . | xz -T2 -6 >"$SRC/.devpack/dltrain-device.tar.xz"

# The one-node Slurm: the plugin of the same build.
if slurm_here && [ -f "$B/plugin/.libs/spank_dltrain.so" ]; then
  pack_slurm "$SRC/.devpack" "$B/plugin/.libs/spank_dltrain.so"
else
  echo "pack: no Slurm 22.05 here (or no plugin in $B): the slurm-* phases will say NOT TESTED"
fi

# The sm_90 NCCL: a prepared build checked against its published sha256, else built from source.
ND=${DLT_NCCL_DIR:-$SRC/../shared/device}
if [ -f "$ND/$NCCL_XZ" ]; then
  want=$(grep -o 'compressed: [0-9]* bytes, sha256 [0-9a-f]*' "$ND/README.md" | awk '{print $5}')
  have=$(sha256sum "$ND/$NCCL_XZ" | cut -d' ' -f1)
  [ -n "$want" ] && [ "$want" = "$have" ] || { echo "pack: $ND/$NCCL_XZ: sha256 $have, README says ${want:-nothing}: not used"; exit 1; }
  cp "$ND/$NCCL_XZ" "$SRC/.devpack/"
  echo "pack: NCCL $NCCL_VER sm_90 from $ND (sha256 checked)"
elif [ -n "${NCCL_SRC:-}" ]; then
  # doc/gpu.md "NCCL for the device check": /usr/local/cuda/include carries another NCCL's
  # nccl_device/ headers that shadow the source tree's own, so CUDA_HOME is a copy without them.
  C=$B/cuda-no-nccl; rm -rf "$C"; mkdir -p "$C/include"
  for f in /usr/local/cuda/*; do [ "$(basename "$f")" = include ] || ln -s "$f" "$C/"; done
  for f in /usr/local/cuda/include/*; do case $(basename "$f") in nccl*) ;; *) ln -s "$f" "$C/include/" ;; esac; done
  make -C "$NCCL_SRC" -j"$(nproc)" src.build CUDA_HOME="$C" NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" >"$B/nccl-build.log" 2>&1 ||
    { tail -20 "$B/nccl-build.log"; exit 1; }
  cp "$NCCL_SRC/build/lib/libnccl.so.$NCCL_VER" "$B/libnccl.so.2"
  strip --strip-debug "$B/libnccl.so.2"
  xz -T2 -6 -c "$B/libnccl.so.2" >"$SRC/.devpack/$NCCL_XZ"
  echo "pack: NCCL $NCCL_VER sm_90 built from $NCCL_SRC"
else
  echo "pack: no NCCL $NCCL_VER sm_90 ($ND/$NCCL_XZ absent, NCCL_SRC unset): the same-host two-rank phase will say NOT TESTED"
fi
(cd "$SRC/.devpack" && sha256sum -- * >SHA256SUMS)
total=$(du -cb "$SRC"/.devpack/* | tail -1 | cut -f1)
max=$((${DLT_PACK_MAX_MIB:-56} * 1048576))
echo "pack: .devpack/ $((total / 1048576)) MiB ($total bytes) in $(ls "$SRC/.devpack" | wc -l) files; carry [\".devpack\"]; command: bash tests/device/go.sh"
[ "$total" -le "$max" ] || { echo "pack: over ${DLT_PACK_MAX_MIB:-56} MiB: too big for one carry"; exit 1; }
