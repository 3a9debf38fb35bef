#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/device/pack.sh: builds, here, what tests/device/run.sh runs on a lent GPU machine and puts
# everything that machine lacks into .devpack/ (ignored by git), ONE folder to name in the device
# tool's carry, under its 64 MiB limit:
#   .devpack/dltrain-device.tar.xz  dltrain and its CUDA module, cuda_ops_check, nccl_check, libdltpmix and the shared
#                                   libraries a bare GPU machine lacks (oneDNN, PMIx, libjpeg-turbo,
#                                   hwloc, ...); CUDA's runtime, cuDNN and cuBLAS are not packed (the
#                                   machine's CUDA 13 toolkit and PyTorch's nvidia-* wheels serve)
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
set -euo pipefail
cd "$(dirname "$0")/../.."
SRC=$PWD
[ $# -eq 0 ] || { echo "usage: tests/device/pack.sh   (environment: DLT_NCCL_DIR, NCCL_SRC, DLT_PACK_MAX_MIB)" >&2; exit 2; }
NCCL_VER=2.30.7
NCCL_XZ=libnccl.so.$NCCL_VER-sm90.xz
B=$SRC/.devbuild
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
  make -j"$(nproc)" tests/device/cuda_ops_check tests/device/nccl_check >>make.log 2>&1 || { tail -20 make.log; exit 1; }
)
P=$(mktemp -d /tmp/dlt-devpack.XXXXXX)
trap 'rm -rf "$P"' EXIT
mkdir -p "$P/bin" "$P/lib"
for t in trainer/dltrain tests/device/cuda_ops_check tests/device/nccl_check; do
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
git -C "$SRC" rev-parse HEAD >"$P/COMMIT" 2>/dev/null || true
git -C "$SRC" status --short | grep -q . && echo "(with uncommitted changes)" >>"$P/COMMIT"
rm -rf "$SRC/.devpack"; mkdir -p "$SRC/.devpack"
tar -cf - -C "$P" . | xz -T2 -6 >"$SRC/.devpack/dltrain-device.tar.xz"

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
