#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Valgrind memcheck over the unit tests and a short CPU training run: no invalid access, no use of
# uninitialised memory, no definite leak. oneDNN is held to AVX2 (valgrind cannot run AVX-512).
. "$(dirname "$0")/../slurm/lib.sh"
command -v valgrind >/dev/null || skip_all "valgrind not installed"
[[ ${DLT_SANITIZED:-} ]] && skip_all "sanitizer build: valgrind does not run ASan binaries"
[[ ${DLT_DISTCHECK_LIGHT:-} ]] && skip_all "DLT_DISTCHECK_LIGHT: .ci/run's make check ran valgrind on the same sources"
# DLT_TEST_UNDER_VALGRIND: a unit test may leave a case that is only more of the same work to its
# plain run (test_hostlist's 2M-expansion bound: 0.2 s plain, 15 s here), saying so.
export OMP_NUM_THREADS=1 ONEDNN_MAX_CPU_ISA=AVX2 CMOCKA_MESSAGE_OUTPUT=STDOUT DLT_TEST_UNDER_VALGRIND=1
VG=(valgrind -q --error-exitcode=9 --leak-check=full --errors-for-leak-kinds=definite --show-leak-kinds=definite
    --suppressions="$DLT_SRCDIR/tests/local/valgrind.supp")
U=$DLT_BUILDDIR/tests/unit
tests=(test_options test_hostlist test_dltpmix_blob test_topology test_binding test_step_dir test_synthetic test_cpu_onednn test_transform test_dataset test_loader test_folder_list test_grad_reducer)
tap_plan $((${#tests[@]} + 1))
for t in "${tests[@]}"; do
  if [[ ! -x $U/$t ]]; then ok "# SKIP $t not built"; continue; fi
  bin=$U/$t; [[ -x $U/.libs/$t ]] && bin=$U/.libs/$t
  if out=$(LD_LIBRARY_PATH=$DLT_BUILDDIR/pmix/.libs timeout 900 "${VG[@]}" "$bin" 2>&1); then ok "memcheck clean: $t"; else not_ok "memcheck: $t"; echo "$out" | grep -E '==[0-9]+==' | head -20 | diag; fi
done
bin=$DLT_BUILDDIR/trainer/.libs/dltrain; [[ -x $bin ]] || bin=$DLT_BUILDDIR/trainer/dltrain
rm -rf "$WORK/ck"
if out=$(LD_LIBRARY_PATH=$DLT_BUILDDIR/pmix/.libs timeout 900 "${VG[@]}" "$bin" train --arch resnet18 --width 0.125 --image-size 32 --classes 4 --batch 4 \
    --synthetic-size 16 --steps 3 --log-every 1 --warmup-epochs 0 --checkpoint-dir "$WORK/ck" 2>&1) && [[ -f $WORK/ck/ckpt-00000003.safetensors ]]; then
  ok "memcheck clean: 3 training steps of a small ResNet-18 with a checkpoint"
else not_ok "memcheck: training"; echo "$out" | grep -E '==[0-9]+==' | head -20 | diag; fi
exit 0
