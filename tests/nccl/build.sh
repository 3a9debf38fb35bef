#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/nccl/build.sh OUTDIR: builds OUTDIR/harness (tests/nccl/harness.cc) from NCCL's own host-side
# topology code (src/graph/xml.cc, topo.cc, paths.cc, search.cc with debug.cc, misc/utils.cc,
# misc/param.cc, param/ and os/linux.cc) and the stand-ins of tests/nccl/, with g++ and the CUDA
# runtime and CCCL headers; no nvcc, no GPU, no CUDA library.
#   NCCL source: $DLT_NCCL_TARBALL, else nccl-*-src.tar.xz in ../shared/nccl-src/ next to the source
#     tree ($DLT_SRCDIR), or two levels up (a tarball unpacked inside the checkout: make distcheck).
#     BSD-3-Clause; it stays outside the tree and is extracted under OUTDIR only.
#   Headers: $DLT_CUDA_INCLUDE, else ${DLT_CUDA_HOME:-/usr/local/cuda}/include, else the PyPI wheels
#     nvidia-cuda-runtime-cu12 and nvidia-cuda-cccl-cu12 (pip download --no-deps, kept in OUTDIR;
#     DLT_CUDA_HOME=/nonexistent takes this way on a machine with a toolkit).
# Cached: NCCL's objects are rebuilt only when the tarball, the headers, the compiler or the flags
# change, the harness only when a stand-in changes. Status 0: built (or cached); 77: a prerequisite is
# missing, the reason on the last line; 1: the build failed (OUTDIR/build.log).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${1:?usage: build.sh OUTDIR}
SRCDIR=${DLT_SRCDIR:-$(cd "$HERE/../.." && pwd)}
CXX=${CXX_FOR_NCCL:-g++}
JOBS=${DLT_NCCL_JOBS:-2}
mkdir -p "$OUT" || exit 1
OUT=$(cd "$OUT" && pwd)
LOG=$OUT/build.log
missing() { echo "$*"; exit 77; }

# --- NCCL's source
TAR=${DLT_NCCL_TARBALL:-}
if [[ -z $TAR ]]; then
  for d in "$SRCDIR/../shared/nccl-src" "$SRCDIR/../../shared/nccl-src"; do
    for f in "$d"/nccl-*-src.tar.xz; do [[ -f $f ]] && TAR=$f; done
    [[ -n $TAR ]] && break
  done
fi
[[ -n $TAR && -f $TAR ]] || missing "no NCCL source tarball (nccl-*-src.tar.xz in ../shared/nccl-src/ beside $SRCDIR; or set DLT_NCCL_TARBALL)"
command -v "$CXX" >/dev/null || missing "no C++ compiler ($CXX)"
command -v xz >/dev/null || missing "no xz to unpack $TAR"

# --- CUDA runtime and CCCL headers
INC=() HDR='' CUDA_SYS=${DLT_CUDA_HOME:-/usr/local/cuda}
if [[ -n ${DLT_CUDA_INCLUDE:-} ]]; then
  HDR="DLT_CUDA_INCLUDE=$DLT_CUDA_INCLUDE"; INC=("$DLT_CUDA_INCLUDE" "$DLT_CUDA_INCLUDE/cccl")
elif [[ -f $CUDA_SYS/include/cuda_runtime.h ]]; then
  HDR=$CUDA_SYS/include; INC=("$CUDA_SYS/include" "$CUDA_SYS/include/cccl")
else
  W=$OUT/wheels
  if ! compgen -G "$W/unpacked/nvidia/cuda_runtime/include/cuda_runtime.h" >/dev/null ||
    ! compgen -G "$W/unpacked/nvidia/cuda_cccl/include/cuda" >/dev/null; then
    python3 -m pip --version >/dev/null 2>&1 ||
      missing "no CUDA headers: no $CUDA_SYS/include/cuda_runtime.h and no pip to fetch nvidia-cuda-runtime-cu12 / nvidia-cuda-cccl-cu12"
    command -v unzip >/dev/null || missing "no CUDA headers: no $CUDA_SYS/include and no unzip for the PyPI wheels"
    rm -rf "$W" && mkdir -p "$W/unpacked"
    if ! timeout 180 python3 -m pip download -q --retries 1 --timeout 20 --no-deps --only-binary=:all: -d "$W" \
      nvidia-cuda-runtime-cu12 nvidia-cuda-cccl-cu12 >"$W/pip.log" 2>&1; then
      missing "no CUDA headers: no $CUDA_SYS/include/cuda_runtime.h and pip download of nvidia-cuda-runtime-cu12 and nvidia-cuda-cccl-cu12 failed: $(tail -1 "$W/pip.log")"
    fi
    for whl in "$W"/*.whl; do unzip -q -o "$whl" 'nvidia/*' -d "$W/unpacked" || missing "cannot unzip $whl"; done
  fi
  HDR="wheels: $(cd "$W" && printf '%s ' ./*.whl)"
  INC=("$W/unpacked/nvidia/cuda_runtime/include" "$W/unpacked/nvidia/cuda_cccl/include")
fi
RTH=${INC[0]}/cuda_runtime_api.h
[[ -f $RTH ]] || missing "no cuda_runtime_api.h in ${INC[0]}"
cudart=$(sed -n 's/^#define CUDART_VERSION *\([0-9]*\).*/\1/p' "$RTH" | head -1)
[[ -n $cudart ]] || missing "no CUDART_VERSION in $RTH"

N=$OUT/nccl
CXXFLAGS=(-std=c++17 -O1 -g0 -DNCCL_OS_LINUX -DCUDA_MAJOR=$((cudart / 1000)) -DCUDA_MINOR=$((cudart % 1000 / 10))
  -ffunction-sections -fdata-sections)
# NCCL's own directories first: /usr/local/cuda/include may carry another NCCL's nccl.h and nccl_device/.
INCS=(-I"$OUT/include" -I"$N/src" -I"$N/src/include" -I"$N/src/include/plugin")
for i in "${INC[@]}"; do INCS+=(-I"$i"); done
SYSINCS=("${INCS[@]/#-I/-isystem}") # the stand-ins' warnings are shown, not those of NCCL's headers
NCCL_SRCS=(graph/xml.cc graph/topo.cc graph/paths.cc graph/search.cc debug.cc misc/utils.cc misc/param.cc
  param/c_api.cc param/param.cc param/param_registry.cc os/linux.cc)
STANDINS=(harness.cc nvml.cc net.cc sysfs.cc core.cc cuda.cc)

sum() { sha256sum "$@" | cut -d' ' -f1 | sha256sum | cut -c1-16; }
tarsum=$(stat -c '%s %Y' "$TAR")
key_nccl=$( { echo "$TAR $tarsum"; echo "$HDR $cudart"; "$CXX" --version | head -1; echo "${CXXFLAGS[*]} ${INCS[*]}";
  echo "${NCCL_SRCS[*]}"; cat "$HERE/cpuid_standin.h"; } | sha256sum | cut -c1-16)
key_harness=$( { echo "$key_nccl"; cat "$HERE/build.sh" "$HERE/standins.h"; for s in "${STANDINS[@]}"; do cat "$HERE/$s"; done; } |
  sha256sum | cut -c1-16)
if [[ -x $OUT/harness && $(cat "$OUT/harness.key" 2>/dev/null) == "$key_harness" ]]; then
  echo "cached: $OUT/harness (NCCL from $TAR, headers: $HDR)"; exit 0
fi

t0=$(date +%s)
: >"$LOG"
if [[ $(cat "$OUT/nccl.key" 2>/dev/null) != "$key_nccl" ]]; then
  rm -rf "$N" "$OUT/obj" "$OUT/include" "$OUT/nccl.key" && mkdir -p "$N" "$OUT/obj" "$OUT/include" || exit 1
  tar -xJf "$TAR" -C "$N" --strip-components=1 --wildcards '*/src/*' '*/makefiles/version.mk' '*/LICENSE.txt' >>"$LOG" 2>&1 ||
    { echo "cannot unpack $TAR (build.log)"; exit 1; }
  v() { sed -n "s/^$1 *:= *\([0-9]*\).*/\1/p" "$N/makefiles/version.mk"; }
  maj=$(v NCCL_MAJOR) min=$(v NCCL_MINOR) pat=$(v NCCL_PATCH)
  sed -e "s/\${nccl:Major}/$maj/g" -e "s/\${nccl:Minor}/$min/g" -e "s/\${nccl:Patch}/$pat/g" -e "s/\${nccl:Suffix}//g" \
    -e "s/\${nccl:Version}/$(printf '%d%02d%02d' "$maj" "$min" "$pat")/g" "$N/src/nccl.h.in" >"$OUT/include/nccl.h" || exit 1
  # NCCL's sources build as NCCL builds them (warnings are NCCL's own: not shown), JOBS at a time.
  compile() {
    local s=$1 o extra=()
    o=$OUT/obj/$(echo "$1" | tr / _).o
    [[ $s == graph/xml.cc ]] && extra=(-include "$HERE/cpuid_standin.h")
    "$CXX" "${CXXFLAGS[@]}" -w "${INCS[@]}" "${extra[@]}" -c "$N/src/$s" -o "$o" || touch "$OUT/obj/FAILED"
  }
  for s in "${NCCL_SRCS[@]}"; do
    while (($(jobs -rp | wc -l) >= JOBS)); do wait -n; done
    compile "$s" >>"$LOG" 2>&1 &
  done
  wait
  if [[ -e $OUT/obj/FAILED ]]; then
    rm -f "$OUT"/obj/*.o "$OUT/obj/FAILED"
    echo "NCCL's sources did not build (build.log):"; tail -20 "$LOG"; exit 1
  fi
  echo "$key_nccl" >"$OUT/nccl.key"
fi
objs=()
for s in "${STANDINS[@]}"; do
  o=$OUT/obj/standin_${s%.cc}.o
  "$CXX" "${CXXFLAGS[@]}" -Wall -Wextra -I"$HERE" "${SYSINCS[@]}" -c "$HERE/$s" -o "$o" >>"$LOG" 2>&1 ||
    { echo "tests/nccl/$s did not build (build.log):"; tail -20 "$LOG"; exit 1; }
  objs+=("$o")
done
for s in "${NCCL_SRCS[@]}"; do objs+=("$OUT/obj/$(echo "$s" | tr / _).o"); done
if ! "$CXX" -o "$OUT/harness" "${objs[@]}" -Wl,--gc-sections -Wl,--wrap=realpath -Wl,--wrap=fopen -Wl,--wrap=opendir \
  -ldl -lpthread >>"$LOG" 2>&1; then
  echo "the harness did not link (build.log):"; tail -20 "$LOG"; exit 1
fi
echo "$key_harness" >"$OUT/harness.key"
echo "built: $OUT/harness in $(($(date +%s) - t0)) s (NCCL from $TAR, headers: $HDR)"
