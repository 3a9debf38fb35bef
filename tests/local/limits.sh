#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Resource limits end a run with words, never with garbage or silence. Under `ulimit -v` a
# ResNet-18 at 224 px used to fail with "planning layer layer2.1.conv2: ^@X\xe6k..." (an
# allocation failure that set no message), an empty reason, or a bare segfault inside oneDNN's
# code generator. A sweep of address-space limits: every run trains, or fails naming the memory
# limit, or (oneDNN's crash) says what it was doing (planning a layer, or the first forward or
# backward of one: oneDNN generates its GEMM's kernels at their first call) and the limit.
# OMP_NUM_THREADS above the task's CPUs (100000 crashed libgomp; 8 on 2 CPUs ran at 2 images/s) is
# capped, said once.
. "$(dirname "$0")/../slurm/lib.sh"
DLTRAIN=$DLT_BUILDDIR/trainer/dltrain
[[ -x $DLTRAIN ]] || skip_all "dltrain not built"
[[ ${DLT_SANITIZED:-} ]] && skip_all "AddressSanitizer reserves terabytes of address space: no ulimit -v under it"
tap_plan 3
rm -rf "${WORK:?}" && mkdir -p "$WORK"

# From 400 MB up in 50 MB steps until a run trains (at most 2.5 GB): every limit below the model's
# need, wherever this CPU's kernels put it.
bad=0 said="" fails=0 n=0
for v in $(seq 400000 50000 2500000); do
  n=$((n + 1))
  out=$( (ulimit -v "$v"; OMP_NUM_THREADS=2 timeout 120 "$DLTRAIN" train --arch resnet18 --image-size 224 --batch 16 --steps 1 --log-every 0) 2>&1); rc=$?
  last=$(grep '^dltrain: ' <<<"$out" | tail -1)
  if [[ $rc == 0 ]]; then kind=trained
  elif [[ $rc == 1 && $last =~ (out of (host )?memory|lower --batch) ]] && LC_ALL=C grep -qv '[^[:print:]]' <<<"$last"; then kind=oom
  elif [[ $rc == 139 && $out =~ "crashed with SIGSEGV while "("planning layer "|"the first forward of layer "|"the first backward of layer ")[^\ ]+"; the address-space limit is "[0-9]+" MiB (ulimit -v)" ]]; then kind=crash-said
  else kind=BAD; bad=$((bad + 1)); echo "ulimit -v $v: rc=$rc: $(tail -c 300 <<<"$out")" | diag; fi
  said="$said $((v / 1000))M:$kind"
  [[ $kind == trained ]] && break
  fails=$((fails + 1))
done
if ((bad == 0 && fails > 0)) && [[ $kind == trained ]]; then ok "$n address-space limits up to the first that trains: each run trains or says why it cannot ($said)"
else not_ok "$bad run(s) without a readable reason, $fails limited ($said)"; fi

out=$(OMP_NUM_THREADS=100000 timeout 120 "$DLTRAIN" train --arch resnet18 --width 0.25 --image-size 32 --classes 4 --batch 8 --synthetic-size 64 --steps 4 --log-every 0 2>&1); rc=$?
cpus=$(nproc)
if [[ $rc == 0 && $(grep -c "OMP_NUM_THREADS=100000 is above the $cpus CPU(s) this task may use .*: using $cpus" <<<"$out") == 1 ]]; then
  ok "OMP_NUM_THREADS=100000: capped to the task's $cpus CPU(s), said once, and the run ends"
else not_ok "OMP_NUM_THREADS=100000 (rc=$rc)"; echo "$out" | tail -3 | diag; fi

out=$(OMP_NUM_THREADS=$cpus timeout 120 "$DLTRAIN" train --arch resnet18 --width 0.25 --image-size 32 --classes 4 --batch 8 --synthetic-size 64 --steps 4 --log-every 0 2>&1); rc=$?
if [[ $rc == 0 && $out != *OMP_NUM_THREADS* ]]; then ok "OMP_NUM_THREADS=$cpus (the task's CPUs): no warning"
else not_ok "OMP_NUM_THREADS=$cpus (rc=$rc)"; echo "$out" | tail -3 | diag; fi
