#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/device/pack.sh: builds, here, what tests/device/run.sh runs and packs it with the shared
# libraries a bare GPU machine lacks (oneDNN, PMIx, libjpeg-turbo, stb, hwloc, ...) into
# .devpack/dltrain-device.tar.gz (ignored by git; name .devpack in the device tool's carry). The
# CUDA runtime, cuDNN, cuBLAS and NCCL are not packed: at run time the GPU machine's own serve
# (its CUDA 13 toolkit and PyTorch's nvidia-* wheels; run.sh finds them). Built without MPI:
# GPU ranks talk through NCCL.
#
# --nccl: also carry an NCCL >= 2.30 (two ranks on one GPU need it: NCCL_MULTI_RANK_GPU_ENABLE,
# src/init.cc), from the PyPI wheel nvidia-nccl-cu13 (DLT_NCCL_VERSION, default 2.30.7; or a wheel
# already downloaded: DLT_NCCL_WHEEL=FILE). Its libnccl.so.2 is about 250 MB (215 MB compressed),
# more than one device run carries (64 MiB), so it goes into .devpack/nccl/ as gzip parts of 56 MiB
# with a MANIFEST of their sha256 and the VERSION NCCL reports: carry them in successive runs on the
# same (warm) machine; run.sh joins and checks them when all are there, else uses the machine's
# own NCCL and says "multi-rank: NOT TESTED" when that is older than 2.30.
set -euo pipefail
cd "$(dirname "$0")/../.."
SRC=$PWD
WITH_NCCL=0
case ${1:-} in --nccl) WITH_NCCL=1 ;; "") ;; *) echo "usage: tests/device/pack.sh [--nccl]" >&2; exit 2 ;; esac
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
if [ "$WITH_NCCL" = 1 ]; then
  ver=${DLT_NCCL_VERSION:-2.30.7} wheel=${DLT_NCCL_WHEEL:-}
  if [ -z "$wheel" ]; then
    pip download --no-deps --only-binary=:all: "nvidia-nccl-cu13==$ver" -d "$B/wheel" >"$B/pip.log" 2>&1 ||
      { tail -5 "$B/pip.log"; exit 1; }
    wheel=$(ls "$B"/wheel/nvidia_nccl_cu13-*.whl)
  fi
  mkdir -p "$B/nccl"
  python3 - "$wheel" "$B/nccl/libnccl.so.2" <<'EOF'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open("nvidia/nccl/lib/libnccl.so.2") as src, open(sys.argv[2], "wb") as dst:
    shutil.copyfileobj(src, dst)
EOF
  # The version the library itself reports (ncclGetVersion needs no GPU) must be the one asked for.
  got=$(python3 -c 'import ctypes, sys
v = ctypes.c_int(0); ctypes.CDLL(sys.argv[1]).ncclGetVersion(ctypes.byref(v)); print(v.value)' "$B/nccl/libnccl.so.2")
  IFS=. read -r ma mi pa <<<"$ver"
  if [ "$got" != $((ma * 10000 + mi * 100 + pa)) ] || [ "$got" -lt 23000 ]; then
    echo "pack: $wheel: libnccl.so.2 reports version $got, not $ver (>= 2.30 needed)"; exit 1
  fi
  rm -rf "$SRC/.devpack/nccl"; mkdir -p "$SRC/.devpack/nccl"
  gzip -c "$B/nccl/libnccl.so.2" | split -b 56m -d - "$SRC/.devpack/nccl/part-"
  (cd "$SRC/.devpack/nccl" && sha256sum part-* >MANIFEST)
  echo "NCCL $ver ($(strings -n 12 "$B/nccl/libnccl.so.2" | grep -m1 -E '^NCCL version [0-9]'))" >"$SRC/.devpack/nccl/VERSION"
  echo "pack: NCCL $ver in $(wc -l <"$SRC/.devpack/nccl/MANIFEST") parts under .devpack/nccl/ ($(du -sh "$SRC/.devpack/nccl" | cut -f1)): carry them in successive runs"
fi
echo "pack: $(du -h "$SRC/.devpack/dltrain-device.tar.gz" | cut -f1) .devpack/dltrain-device.tar.gz ($(ls "$P/lib" | wc -l) libraries)"
