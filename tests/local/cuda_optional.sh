#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The CUDA libraries are loaded only when a run asks for the GPU (dltrain(1) "CUDA LIBRARIES"):
# dltrain and libdltpmix link none of them, so a CUDA build starts a CPU run on a node without them
# or under `ulimit -v` (it used to die in the loader, "libcublasLt.so.13: failed to map segment",
# exit 127); --backend cuda where a library cannot be loaded is one message naming the library and
# its package; a module of another build, or a missing one, is refused by name; libdltpmix's NCCL
# bootstrap names libcudart/libnccl when they cannot be loaded.
. "$(dirname "$0")/../slurm/lib.sh"
DLTRAIN=$DLT_BUILDDIR/trainer/dltrain
MODULE=$DLT_BUILDDIR/trainer/.libs/dltrain_cuda.so
PROBE=$DLT_BUILDDIR/tests/slurm/pmix_probe
[[ -x $DLTRAIN ]] || skip_all "dltrain not built"
[[ -f $MODULE ]] || skip_all "built without the CUDA backend (no module to load)"
export OMP_NUM_THREADS=2
tap_plan 8
rm -rf "${WORK:?}" && mkdir -p "$WORK"
SYN=(--arch resnet18 --width 0.25 --image-size 32 --classes 4 --batch 4 --steps 2 --log-every 1)
REAL=$DLT_BUILDDIR/trainer/.libs/dltrain
[[ -x $REAL ]] || REAL=$DLTRAIN

cuda_libs() { LD_LIBRARY_PATH=$DLT_BUILDDIR/pmix/.libs ldd "$1" | grep -oE 'lib(cudart|cudnn|cublas|cublasLt|nccl)\.so[.0-9]*' | sort -u | tr '\n' ' '; }
got=$(cuda_libs "$REAL")$(cuda_libs "$DLT_BUILDDIR/pmix/.libs/libdltpmix.so")
mod=$(cuda_libs "$MODULE")
if [[ -z $got && $mod == *libcudnn* && $mod == *libnccl* ]]; then
  ok "dltrain and libdltpmix link no CUDA library; the module links them ($mod)"
else not_ok "CUDA libraries linked into dltrain/libdltpmix: '$got' (module: '$mod')"; fi

# A CPU run under an address-space cap too small to map cuBLASLt (600 MB; the run needs less).
# AddressSanitizer reserves terabytes of address space: no cap can be set under it.
if [[ ${DLT_SANITIZED:-} ]]; then
  ok "# SKIP ulimit -v under AddressSanitizer"; ok "# SKIP ulimit -v under AddressSanitizer"
else
out=$( (ulimit -v 600000; "$DLTRAIN" train --backend cpu "${SYN[@]}") 2>&1); rc=$?
out2=$( (ulimit -v 600000; "$DLTRAIN" train --backend auto "${SYN[@]}") 2>&1); rc2=$?
if [[ $rc == 0 && $rc2 == 0 && $out == *"done: 2 steps"* && $out2 == *"done: 2 steps"* ]]; then
  ok "ulimit -v 600000: --backend cpu and auto train (CUDA never mapped)"
else not_ok "ulimit -v: cpu rc=$rc auto rc=$rc2"; { echo "$out"; echo "$out2"; } | tail -6 | diag; fi

# --backend cuda under the same cap: the module cannot map cuBLASLt; one line names it and its package.
out=$( (ulimit -v 600000; "$DLTRAIN" train --backend cuda "${SYN[@]}") 2>&1); rc=$?
if [[ $rc != 0 && $out == *"CUDA backend cannot be loaded"*"libcublas"*"package libcublas-"* && $out != *"error while loading"* ]]; then
  ok "ulimit -v 600000 --backend cuda: exit $rc, names cuBLAS and its package"
else not_ok "--backend cuda under ulimit -v (rc=$rc)"; echo "$out" | tail -4 | diag; fi
fi

# A library that is there but unusable (an empty libcudnn.so.9 first on the search path).
mkdir -p "$WORK/badlib"; : >"$WORK/badlib/libcudnn.so.9"
out=$(LD_LIBRARY_PATH=$WORK/badlib "$DLTRAIN" train --backend cuda "${SYN[@]}" 2>&1); rc=$?
out2=$(LD_LIBRARY_PATH=$WORK/badlib "$DLTRAIN" train --backend auto "${SYN[@]}" 2>&1); rc2=$?
if [[ $rc != 0 && $out == *"libcudnn.so.9: file too short"*"package libcudnn9-cuda-"*"--backend cpu"* && $(grep -c . <<<"$out") -le 2 &&
      $rc2 == 0 && $out2 == *"done: 2 steps"* ]]; then
  ok "unusable libcudnn.so.9: --backend cuda names it and its package (exit $rc); auto trains on the CPU"
else not_ok "unusable libcudnn (cuda rc=$rc, auto rc=$rc2)"; { echo "$out"; echo "$out2"; } | tail -6 | diag; fi

out=$(DLTRAIN_CUDA_MODULE=$WORK/nowhere.so "$DLTRAIN" train --backend cuda "${SYN[@]}" 2>&1); rc=$?
if [[ $rc != 0 && $out == *"module $WORK/nowhere.so is missing"* ]]; then ok "a missing module is named (exit $rc)"
else not_ok "missing module (rc=$rc)"; echo "$out" | tail -3 | diag; fi

# A module of another build (another table version) is refused, not called.
cat >"$WORK/other.c" <<'C'
struct { int abi; const char *version; } dlt_cuda_module_table = {999, "0.0-other"};
C
if cc -shared -fPIC -o "$WORK/other.so" "$WORK/other.c" 2>"$WORK/cc.err"; then
  out=$(DLTRAIN_CUDA_MODULE=$WORK/other.so "$DLTRAIN" train --backend cuda "${SYN[@]}" 2>&1); rc=$?
  if [[ $rc != 0 && $out == *"belongs to another dltrain build (version 0.0-other"* ]]; then
    ok "a module of another build is refused by name (exit $rc)"
  else not_ok "foreign module (rc=$rc)"; echo "$out" | tail -3 | diag; fi
else not_ok "cannot build the stand-in module"; diag <"$WORK/cc.err"; fi

# libdltpmix's NCCL bootstrap, for programs that are not dltrain: the runtime, then NCCL, by name.
if [[ -x $PROBE ]]; then
  mkdir -p "$WORK/badrt" "$WORK/badnccl"
  rt=$(basename "$(ldd "$MODULE" | grep -oE '/[^ ]*libcudart\.so\.[0-9]+' | head -1)")
  : >"$WORK/badrt/$rt"; : >"$WORK/badnccl/libnccl.so.2"
  o1=$(LD_LIBRARY_PATH=$WORK/badrt "$PROBE" --nccl-init 0 2>&1); r1=$?
  o2=$(LD_LIBRARY_PATH=$WORK/badnccl "$PROBE" --nccl-init 0 2>&1); r2=$?
  if [[ $r1 != 0 && $o1 == *"cannot load $rt"*"install the CUDA runtime"* && $r2 != 0 && $o2 == *"cannot load libnccl.so.2"*"libnccl2"* ]]; then
    ok "dltpmix_nccl_comm_init names $rt and libnccl.so.2 when they cannot be loaded"
  else not_ok "dltpmix NCCL loading (rc $r1/$r2)"; { echo "$o1"; echo "$o2"; } | diag; fi
  # With both loadable the call gets as far as the GPU (none here, or the device on a GPU node).
  o3=$("$PROBE" --nccl-init 0 2>&1)
  if [[ $o3 == *"nccl-init rc=0"* || $o3 == *"cudaSetDevice"* ]]; then ok "with the libraries present the bootstrap reaches the device: ${o3#*: }"
  else not_ok "bootstrap with the libraries present"; echo "$o3" | diag; fi
else
  ok "# SKIP pmix_probe not built"; ok "# SKIP pmix_probe not built"
fi
