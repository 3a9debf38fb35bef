#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/device/pack.sh: builds, here, what tests/device/run.sh runs and packs it with the shared
# libraries a bare GPU machine lacks (oneDNN, PMIx, libjpeg-turbo, stb, hwloc, ...) into
# .devpack/dltrain-device.tar.gz (ignored by git; name .devpack in the device tool's carry). The
# CUDA runtime, cuDNN, cuBLAS and NCCL are not packed: at run time the GPU machine's own serve
# (its CUDA 13 toolkit and PyTorch's nvidia-* wheels; run.sh finds them). Built without MPI:
# GPU ranks talk through NCCL.
set -euo pipefail
cd "$(dirname "$0")/../.."
SRC=$PWD
B=$(mktemp -d /tmp/dlt-devpack.XXXXXX)
trap 'rm -rf "$B"' EXIT
echo "pack: building in $B"
git ls-files -co --exclude-standard | tar -cf - -T - | tar -xf - -C "$B"
(
  cd "$B"
  ./autogen.sh >/dev/null 2>&1
  ./configure --without-mpi >configure.log 2>&1 || { tail -20 configure.log; exit 1; }
  grep -q "CUDA backend *yes" configure.log || { echo "pack: configure did not enable the CUDA backend"; exit 1; }
  make -j"$(nproc)" >make.log 2>&1 || { tail -20 make.log; exit 1; }
  make -j"$(nproc)" tests/device/cuda_ops_check tests/device/nccl_check >>make.log 2>&1 || { tail -20 make.log; exit 1; }
)
P=$B/pack
mkdir -p "$P/bin" "$P/lib"
for t in trainer/dltrain tests/device/cuda_ops_check tests/device/nccl_check; do
  d=$(dirname "$t") n=$(basename "$t")
  if [ -x "$B/$d/.libs/$n" ]; then cp "$B/$d/.libs/$n" "$P/bin/"; else cp "$B/$t" "$P/bin/"; fi
done
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
git -C "$SRC" rev-parse HEAD >"$P/COMMIT" 2>/dev/null || true
mkdir -p "$SRC/.devpack"
tar -czf "$SRC/.devpack/dltrain-device.tar.gz" -C "$P" .
echo "pack: $(du -h "$SRC/.devpack/dltrain-device.tar.gz" | cut -f1) .devpack/dltrain-device.tar.gz ($(ls "$P/lib" | wc -l) libraries)"
