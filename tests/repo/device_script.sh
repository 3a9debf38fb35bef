#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The GPU check script without a GPU: its dry run lists every phase (the two-rank phases right after
# the op checks, the one-node Slurm's after the training, its teardown and the photos for the fed
# rows before the benchmark), the
# 420 s deadline, the kill rule and the budget arithmetic (the caps within the deadline with room,
# this call and a rerun inside one 900 s lease); --only narrows it, brings the Slurm start and
# teardown with any Slurm phase, and refuses an unknown phase; with no GPU it skips saying so; with
# a stand-in nvidia-smi and a deadline too short for any phase it starts nothing, prints the table
# and returns exactly three files (the device tool returns at most 8). The two-rank launcher gives
# each rank its rendezvous (and, asked, an NCCL_HOSTID of its own), ends the others when one fails,
# and leaves no rank behind when it is stopped; told to keep them (DLT_RANKS_KEEP=1, the kill-rank
# phase), it leaves the others be and says each rank's exit. The plan of an 8-GPU machine (--ranks
# 8): its 14 phases (topology, nccl, scaling and kill-rank among them, no same-GPU phase), 1 x 256
# against 8 x 32, weak scaling at 1, 2, 4, 8 ranks, rank 7 killed, launched without srun through
# two_ranks.sh, in one call of at most 480 s; a launcher command without %n and --ranks 0 are
# refused, naming the fix. The fusion phase reads the probe's lines (stand-in), and the probe checks
# its host fp16 conversions without a GPU. A pack made by tests/device/pack.sh fits one carry
# with room to spare, matches its checksums and, where Slurm is installed, carries it
# (tests/slurm/pack_slurm.sh starts it).
. "$(dirname "$0")/../slurm/lib.sh"
tap_plan 13
RUN=$DLT_SRCDIR/tests/device/run.sh
rm -rf "$WORK"
mkdir -p "$WORK/bin" "$WORK/nogpu"
cat >"$WORK/bin/nvidia-smi" <<'SH'
#!/bin/sh
case "$*" in
  *-L*) echo "GPU 0: Stand-in H200 (UUID: GPU-00000000-0000-0000-0000-000000000000)" ;;
  *) echo "Stand-in H200, 143771 MiB, 999.99" ;;
esac
SH
chmod +x "$WORK/bin/nvidia-smi"

out=$(OUT=$WORK/dry bash "$RUN" --dry-run 2>&1); rc=$?
phases=$(grep -c '^device: phase ' <<<"$out")
order=$(grep '^device: phase ' <<<"$out" | awk '{print $3}' | tr '\n' ' ')
ORDER="unpack ops fusion nccl-hostid nccl-samehost multi-rank train slurm-up slurm-env slurm-train slurm-two slurm-ddp slurm-down photos bench "
if ((rc == 0 && phases == 15)) && [[ $out == *"deadline 420 s"* && $order == "$ORDER" &&
      $out == *"nccl-samehost NOT TESTED, counted as cut"* && $out == *"timeout -k 5"* && $out == *"killed within 2 s"* &&
      $out == *"slurm phases: a one-node Slurm 22.05 from the pack (tests/device/slurm_node.sh"*"NOT TESTED, counted as cut"* &&
      $out == *"phase slurm-down (never skipped once slurm-up ran, at most 15 s)"* &&
      $out == *'command "bash tests/device/go.sh"'* ]]; then
  ok "dry run: $phases phases ($order), the 420 s deadline, timeout -k, the one command"
else not_ok "dry run (rc=$rc, $phases phases: $order)"; echo "$out" | diag; fi
# The budget: the caps fit the deadline with room, and this call plus a rerun call fit one 900 s
# lease with each machine start >= 240 s before the lease ends.
b=$(grep '^device: budget: lease' <<<"$out")
read -r lease su un dl ret first rest rr caps < <(sed -E 's/.*lease ([0-9]+) s = this call \(start-up ([0-9]+) \+ unpack ([0-9]+) \+ deadline ([0-9]+) \+ return ([0-9]+) = ([0-9]+) s\) \+ ([0-9]+) s left.*DLT_DEVICE_DEADLINE=([0-9]+).*add up to ([0-9]+) s/\1 \2 \3 \4 \5 \6 \7 \8 \9/' <<<"$b")
if [[ -n $b && $caps -lt $dl && $((su + un + dl + ret)) -eq $first && $((first + rest)) -eq $lease && $lease -le 900 &&
      $rest -ge 240 && $((su + un + rr + ret)) -le $rest && $rr -ge 60 && $su -ge 90 ]]; then
  ok "budget: caps $caps < deadline $dl ($((dl - caps)) s of room); first call $first s + rerun call $((su + un + rr + ret)) s <= lease $lease s; the rerun starts with $rest s >= 240 s left"
else not_ok "budget arithmetic ($b)"; fi
o1=$(bash "$RUN" --dry-run --only multi-rank,bench 2>&1); r1=$?
o2=$(bash "$RUN" --dry-run --only multi-rnak 2>&1); r2=$?
o3=$(bash "$RUN" --dry-run --only slurm-ddp,ops 2>&1); r3=$?
if ((r1 == 0 && r2 == 2 && r3 == 0)) && [[ $(grep '^device: phase ' <<<"$o1" | awk '{print $3}' | tr '\n' ' ') == "unpack multi-rank bench " &&
      $(grep '^device: phase ' <<<"$o3" | awk '{print $3}' | tr '\n' ' ') == "unpack ops slurm-up slurm-ddp slurm-down " &&
      $o2 == *"no phase 'multi-rnak'"* ]]; then
  ok "--only: the named phases after unpack, a Slurm phase with the Slurm start and teardown; an unknown phase refused, naming the phases"
else not_ok "--only (r1=$r1 r2=$r2 r3=$r3)"; { echo "$o1"; echo "$o2"; echo "$o3"; } | diag; fi

out=$(PATH=$WORK/nogpu:/usr/bin:/bin OUT=$WORK/nogpu-out bash "$RUN" 2>&1); rc=$?
if ((rc == 0)) && [[ $out == *"SKIP: no GPU visible"* ]]; then ok "no GPU: skipped, saying so"; else not_ok "no GPU (rc=$rc)"; echo "$out" | diag; fi

start=$SECONDS
out=$(PATH=$WORK/bin:$PATH DLT_DEVICE_DEADLINE=2 OUT=$WORK/short bash "$RUN" 2>&1); rc=$?
files=$(cd "$WORK/short" 2>/dev/null && ls | tr '\n' ' ')
if ((rc == 2 && SECONDS - start < 30)) && [[ $out == *"unpack not started"* && $out == *"unpack           cut: deadline"* &&
      $out == *"bench            not run"* && $out == *"of 2 s"* && $files == "device-results.tar.gz device-run.log device-table.txt " ]] &&
   grep -q "0 passed, 0 failed" "$WORK/short/device-run.log" && tar -tzf "$WORK/short/device-results.tar.gz" | grep -q table.txt; then
  ok "a deadline too short for any phase: nothing started, the table printed, exit 2; \$OUT holds 3 files ($files)"
else not_ok "deadline handling (rc=$rc, files: $files)"; echo "$out" | diag; fi

# The fusion phase with a stand-in pack whose fusion_probe answers as the real one prints: graphs
# cuDNN refuses are findings (ok), a graph that disagrees with the unfused ops is a FAIL.
mkdir -p "$WORK/fpack/bin"
for t in dltrain cuda_ops_check nccl_check; do printf '#!/bin/sh\nexit 0\n' >"$WORK/fpack/bin/$t"; done
cat >"$WORK/fpack/bin/fusion_probe" <<'SH'
#!/bin/sh
echo "fusion: Stand-in H200 (sm_90), cuDNN 91900, batch 256, fp16 NHWC, fp32 statistics"
echo "fusion: layer1 1x1 64->64                 unfused      0.210 ms conv (algo 1), 0.150 ms batch norm (training forward)"
echo "fusion: layer1 1x1 64->64                 conv+gs      ok   engine 12 of 3 proposed, 0.230 ms, Y 1.0e-03, sums 2.0e-05"
echo "fusion: layer1 1x1 64->64                 sbr+conv+gs  refused: 0 engine configuration(s) proposed, none finalized: heuristics mode fallback proposed no engine"
echo "fusion: layer1 1x1 64->64                 wgrad-f32    ok   engine 5 of 8 proposed, 0.400 ms (fp16 dW 0.380 ms, then its cast), dW 2.0e-04"
[ "${FAKE_FUSION_BAD:-0}" = 1 ] && echo "fusion: layer1 3x3 64->64                 conv+gs      FAIL engine 7: Y 3.0e-01 (bound 1e-2), sums 1.0e-05, 0.300 ms"
echo "fusion: total over the shapes probed: conv 0.210 + batch norm 0.150 ms unfused; conv+gs 0.230 ms where its conv alone took 0.210; sbr+conv+gs 0.000 ms where conv + batch norm took 0.000"
if [ "${FAKE_FUSION_BAD:-0}" = 1 ]; then echo "2 passed, 1 failed"; exit 1; fi
echo "2 passed, 0 failed"
SH
chmod +x "$WORK/fpack/bin/"*
f1=$(PATH=$WORK/bin:$PATH DLT_PACK=$WORK/fpack OUT=$WORK/fusion1 bash "$RUN" --only fusion 2>&1); r1=$?
f2=$(PATH=$WORK/bin:$PATH DLT_PACK=$WORK/fpack FAKE_FUSION_BAD=1 OUT=$WORK/fusion2 bash "$RUN" --only fusion 2>&1); r2=$?
if ((r1 == 0 && r2 == 1)) && [[ $f1 == *"ok   fusion: 2 fused graph(s) ran and matched the unfused ops, 1 refused by cuDNN; total over the shapes probed: conv 0.210"* &&
      $f1 == *"sbr+conv+gs  refused: 0 engine configuration(s) proposed"* &&
      $f2 == *"FAIL fusion: fusion_probe exit 1 (2 passed, 1 failed)"* && $f2 == *"conv+gs      FAIL engine 7: Y 3.0e-01"* ]]; then
  ok "fusion phase: the probe's lines shown; refused graphs counted as findings, a disagreeing graph a FAIL"
else not_ok "fusion phase (r1=$r1 r2=$r2)"; { echo "$f1"; echo "$f2"; } | grep -E 'fusion|FAIL' | diag; fi

# The probe itself without a GPU: its host fp16 conversions (the references its checks compare
# with) against their definition over every half, a skip that says so, a bad option refused.
FP=$DLT_BUILDDIR/tests/device/fusion_probe
if [[ -x $FP ]]; then
  s1=$("$FP" --self-test 2>&1); q1=$?
  s2=$("$FP" 2>&1); q2=$?
  s3=$("$FP" --batch 0 2>&1); q3=$?
  if ((q1 == 0 && q2 == 0 && q3 == 2)) && [[ $s1 == *"host fp16 conversions: ok (0 disagreements"* &&
        $s2 == *"SKIP: the CUDA runtime sees no GPU"* && $s3 == *"--batch must be 1..4096"* ]]; then
    ok "fusion_probe: host fp16 conversions exact over every half and midpoint; no GPU: skipped, saying so; --batch 0 refused"
  else not_ok "fusion_probe without a GPU (q1=$q1 q2=$q2 q3=$q3)"; { echo "$s1"; echo "$s2"; echo "$s3"; } | diag; fi
else ok "# SKIP fusion_probe not built (no CUDA backend in this build)"; fi

TWO=$DLT_SRCDIR/tests/device/two_ranks.sh
out=$(DLT_RANK_HOSTID=1 bash "$TWO" 2 sh -c 'echo "rank $DLTPMIX_TEST_RANK of $DLTPMIX_TEST_SIZE dir=${DLTPMIX_TEST_RENDEZVOUS:+set} host=${NCCL_HOSTID:-}"' 2>&1); rc=$?
out2=$(timeout 20 bash "$TWO" 2 sh -c 'if [ "$DLTPMIX_TEST_RANK" = 1 ]; then exit 3; fi; exec sleep 15' 2>&1); rc2=$?
if ((rc == 0 && rc2 == 3)) && [[ $out == *"[rank 0] rank 0 of 2 dir=set host=dlt-rank-0"* && $out == *"[rank 1] rank 1 of 2 dir=set host=dlt-rank-1"* &&
      $out2 == *"rank 1 exited 3: ending the others"* ]]; then
  ok "two_ranks.sh: both ranks with their rendezvous and NCCL_HOSTID; a failing rank ends the other, its status returned"
else not_ok "two_ranks.sh (rc=$rc, rc2=$rc2)"; { echo "$out"; echo "$out2"; } | diag; fi
# Stopped by its phase's cap: the ranks (in sessions of their own, ignoring TERM) are gone within 2 s
# of the KILL that follows the TERM.
marker=dlt-two-ranks-test-$$
timeout -k 3 1 bash "$TWO" 2 bash -c "trap '' TERM; exec -a $marker sleep 30" >/dev/null 2>&1
sleep 1.5
left=$(pgrep -f "^$marker" | wc -l)
if ((left == 0)); then ok "two_ranks.sh stopped by timeout -k: no rank left 2 s after (ranks that ignore TERM included)"
else not_ok "two_ranks.sh left $left ranks running"; pkill -KILL -f "^$marker"; fi

out=$(DLT_RANKS_KEEP=1 timeout 20 bash "$TWO" 3 sh -c 'if [ "$DLTPMIX_TEST_RANK" = 2 ]; then kill -KILL $$; fi; sleep 1; exit 4' 2>&1); rc=$?
if ((rc == 137)) && [[ $out == *"two_ranks: rank 2 exited 137"* && $out == *"two_ranks: rank 0 exited 4"* &&
      $out == *"two_ranks: rank 1 exited 4"* && $out != *"ending the others"* ]]; then
  ok "two_ranks.sh DLT_RANKS_KEEP=1: a killed rank leaves the others be; each rank's exit said, the first failure's status returned"
else not_ok "two_ranks.sh keep mode (rc=$rc)"; echo "$out" | diag; fi

out=$(OUT=$WORK/dry8 bash "$RUN" --dry-run --ranks 8 2>&1); rc=$?
order=$(grep '^device: phase ' <<<"$out" | awk '{print $3}' | tr '\n' ' ')
ORDER8="unpack topology ops nccl multi-rank scaling kill-rank train slurm-up slurm-env slurm-train slurm-ddp slurm-down bench "
read -r call caps < <(sed -nE 's/^device: budget: one call of ([0-9]+) s .* add up to ([0-9]+) s$/\1 \2/p' <<<"$out")
if ((rc == 0)) && [[ $order == "$ORDER8" && $out == *"deadline 440 s"* && $out == *"through env DLTPMIX_TIMEOUT=60 bash tests/device/two_ranks.sh 8"* &&
      $out == *"1 rank x 256 images against 8 ranks x 32"* && $out == *"at 1,2,4,8 ranks"* && $out == *"rank 7 killed with SIGKILL"* &&
      $out == *"nvidia-smi topo -m"*"fabric"* && $out == *"NCCL's own detection against the plugin's topology XML"* &&
      $out == *'command "bash tests/device/go.sh --ranks 8", timeout_s 480'* && -n $call && $call -le 480 && $caps -le 440 ]]; then
  ok "--dry-run --ranks 8: ${order% }; 1 x 256 against 8 x 32, scaling at 1,2,4,8, rank 7 killed; two_ranks.sh, no srun; one call of $call s (caps $caps s)"
else not_ok "--dry-run --ranks 8 (rc=$rc: $order; call ${call:-?} s, caps ${caps:-?} s)"; echo "$out" | diag; fi

o1=$(DLT_LAUNCH="srun -n 8 --mpi=pmix" bash "$RUN" --dry-run --ranks 8 2>&1); r1=$?
o2=$(bash "$RUN" --dry-run --ranks 0 2>&1); r2=$?
o3=$(DLT_LAUNCH="srun -n %n --gpus-per-task=1 --mpi=pmix" bash "$RUN" --dry-run --ranks 3 2>&1); r3=$?
if ((r1 == 2 && r2 == 2 && r3 == 0)) && [[ $o1 == *"write it as %n"* && $o2 == *"give the number of GPUs"* &&
      $o3 == *"through srun -n 3 --gpus-per-task=1 --mpi=pmix"* && $o3 == *"at 1,2,3 ranks"* && $o3 == *"1 rank x 126 images against 3 ranks x 42"* ]]; then
  ok "DLT_LAUNCH without %n and --ranks 0 refused, naming the fix; DLT_LAUNCH with %n used (3 GPUs: scaling at 1,2,3)"
else not_ok "launcher and --ranks checks (r1=$r1 r2=$r2 r3=$r3)"; { echo "$o1"; echo "$o2"; echo "$o3"; } | diag; fi

P=$DLT_SRCDIR/.devpack
if [[ -f $P/SHA256SUMS ]]; then
  total=$(du -cb "$P"/* | tail -1 | cut -f1)
  # pack.sh carries Slurm when this machine has it (where it takes the files from).
  slurm="the Slurm part inside"
  [[ -x /usr/sbin/slurmd ]] || slurm="no Slurm here to carry"
  if ((total <= 56 * 1048576)) && (cd "$P" && sha256sum -c --quiet SHA256SUMS) && ls "$P"/libnccl.so.*-sm90.xz >/dev/null 2>&1 &&
     { [[ ! -x /usr/sbin/slurmd ]] || [[ -f $P/dltrain-slurm.tar.xz ]]; }; then
    ok "the pack: $((total / 1048576)) MiB <= 56 MiB (the carry limit is 64 MiB), checksums match, the sm_90 NCCL inside, $slurm"
  else not_ok "the pack: $total bytes, or its checksums, the NCCL or the Slurm part are off"; ls -l "$P" | diag; fi
else ok "# SKIP no .devpack here (tests/device/pack.sh makes it; .ci/run packs when nvcc and ../shared/device are present)"; fi
exit 0
