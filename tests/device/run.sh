#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/device/run.sh: everything that needs a GPU, as one script for a lent GPU machine, inside a
# global deadline (default 420 s, DLT_DEVICE_DEADLINE; doc/gpu.md "The budget" says why 420):
# phases that would start past it are not started, every command is ended at its phase's cap
# (timeout -k: TERM, then KILL 5 s later), whatever a phase left running (ranks started in
# sessions of their own) is killed within 2 s of its end and checked gone before the next phase,
# and the table of what ran (status and seconds of each phase) is printed whatever happens. A phase
# or check ended by time, not by a wrong result, is "cut", never "FAIL" and never "ok"; so is what
# could not run here (the same-host two-rank phase without NCCL >= 2.30).
# Usually started by tests/device/go.sh, which unpacks .devpack/ (tests/device/pack.sh) and sets
# DLT_PACK; without it, a build in place.
#   unpack        the pack's programs find every library they load
#   ops           cuda_ops_check (every CUDA op against the CPU backend in fp32, tf32, fp16, bf16),
#                 then dltrain check's GEMM (fp16 8192^2, exact) against torch.matmul (cuBLAS)
#   fusion        tests/device/fusion_probe: which convolution + batch-norm fusions cuDNN's graph
#                 API runs here in fp16 (conv + statistics; the previous batch norm + ReLU in the
#                 convolution's prologue: ConvBNfprop; the filter gradient written in fp32) on
#                 ResNet-50's shapes at batch 256, each against the unfused ops' results and times;
#                 a graph cuDNN refuses is a finding
#   nccl-hostid   two ranks on the one GPU with the machine's own NCCL: each rank a host of its own
#                 to NCCL (NCCL_HOSTID differs, so its duplicate-GPU check passes) talking over the
#                 socket transport on loopback: nccl_check's exact sums over sizes across the bucket
#                 boundaries in float, double and half, and the all-reduce busbw
#   nccl-samehost the same with the carried NCCL 2.30.7 (NCCL_MULTI_RANK_GPU_ENABLE=1), both ranks
#                 one host: NCCL's intra-node path
#   multi-rank    ResNet-50 fp32 --deterministic, 1 rank x 128 images against 2 ranks x 64 plain and
#                 as a CUDA graph (losses within 2% per step, the two 2-rank runs equal bit for bit,
#                 the ranks' weights bit-identical at every step), then fp16 on 2 ranks with
#                 --allreduce-lowp against the fp32-reduced run (differ, within 2%). Through the
#                 NCCL of whichever two-rank phase passed, same-host first
#   train         one rank: fp32 through NCCL buckets and as a CUDA graph repeat the plain losses
#                 bit for bit; the loss falls in fp16 (CUDA graph) and bf16; fp16 --fuse-bn on
#                 trains like plain fp16 (4 steps, losses within 2%)
#   slurm-up      a one-node Slurm from the pack (tests/device/slurm_node.sh: munged, slurmctld,
#                 slurmd with the machine's GPUs as gres and the pack's dltrain plugin), node idle
#   slurm-env     srun -n1 --gpus=1 --mpi=pmix --dl-train=verbose dltrain env, and a step that shows
#                 the task's environment and its NCCL topology file: the plugin's GPU (PCI bus id),
#                 its NUMA node, the CPUs near it and those the task is bound to, each against
#                 nvidia-smi -q, nvidia-smi topo -m and sysfs, every side printed
#   slurm-train   dltrain train fp16 on one rank under srun --dl-train, NCCL bootstrapped through
#                 Slurm's PMIx server: the loss falls
#   slurm-two     srun -n2 --gpus=1: the plugin binds both tasks to the one GPU (local rank modulo
#                 the step's GPUs) and dltrain env refuses the sharing, naming it; then two ranks
#                 train on it through the carried NCCL 2.30.7 with NCCL_MULTI_RANK_GPU_ENABLE=1,
#                 their weights bit-identical at every step
#   slurm-ddp     tests/torch/ddp_contract.py --backend nccl: PyTorch DDP on the GPU, 2 ranks from
#                 the plugin's env:// contract alone (PyTorch's own NCCL, NCCL_HOSTID per rank)
#   slurm-down    every daemon stopped and checked gone; runs once slurm-up ran, also past the
#                 deadline and when the run is interrupted. Without a carried Slurm (or as
#                 another user than root) the slurm phases say NOT TESTED (counted as cut)
#   bench         dltrain bench vs torchvision ResNet-50 in PyTorch (channels_last), same GPU and
#                 batch, as ratios against two peers (tests/device/torch_bench.py): eager AMP, and the
#                 strongest (SGD(fused=True), static loss scale, the whole step one CUDA graph, checked
#                 against eager before it is timed); the fp16 row is the verdict (PASS at >=
#                 DLT_BENCH_MIN_RATIO against eager, DLT_BENCH_STRONG_MIN_RATIO against the strongest,
#                 both default 1.0; tests/device/bench_table.py); further rows while time is left
# Every dltrain launch shares one cuDNN algorithm cache (--cudnn-cache): each shape is searched once
# per run of this script, not once per launch.
# Options: --dry-run (the phases, their caps and the deadline; runs nothing), --only P1,P2 (only those
# phases, with NCCL_DEBUG=INFO and cuDNN's error log on: the rerun of what failed or was cut),
# --ranks N (a machine with N GPUs, one rank each; its own plan, one call of at most 480 s, deadline
# 440 s):
#   topology      nvidia-smi topo -m (the link between every pair of the N GPUs), the fabric state
#                 of each GPU (nvidia-smi -q: an NVSwitch machine's NVLinks work only once
#                 nvidia-fabricmanager has set them up), NVLink status
#   nccl          nccl_check on N ranks (exact sums, busbw), then dltrain check's all-reduce sweep
#   multi-rank    as above with N ranks: 1 rank x B against N ranks x B/N (B = 128, or 32 N when
#                 that is more: 1 x 256 against 8 x 32), on a synthetic set of B images
#   scaling       weak scaling in fp16, batch 256 per GPU, as a CUDA graph: 1, 2, 4, ... N ranks, each
#                 run's images/s per rank against the one-rank run's (dltrain's --baseline)
#   kill-rank     N ranks training, the last one killed with SIGKILL: every other rank must end by
#                 itself (the launcher leaves them be), within its stall timeout and a margin, each
#                 naming a lost peer
#   then train, the Slurm phases with the machine's N GPUs (slurm-env compares NCCL's own detection
#   with the plugin's XML; no slurm-two: every task has a GPU of its own), bench.
#   The ranks start through tests/device/two_ranks.sh (no srun or PMIx server needed: libdltpmix's
#   test rendezvous; rank R uses GPU R), or through $DLT_LAUNCH, a command with %n for the number
#   of ranks (e.g. "srun -n %n --gpus-per-task=1 --mpi=pmix --dl-train").
# Results: $OUT (default /tmp/dlt-device) receives three files, the log, the table and one archive
# of everything else (the device tool returns at most 8 files); the work happens in a private folder.
# Without a GPU it says so and exits 0 (skipped). Exit: 0 all passed, 1 a failure, 2 something cut.
set -uo pipefail
cd "$(dirname "$0")/../.."
DRY=0 RANKS=1 ONLY=
while [ $# -gt 0 ]; do
  case $1 in
    --dry-run) DRY=1 ;;
    --ranks) RANKS=${2:?--ranks N}; shift
      [[ $RANKS =~ ^[1-9][0-9]?$ ]] || { echo "run.sh: --ranks $RANKS: give the number of GPUs, 1 to 99" >&2; exit 2; } ;;
    --only) ONLY=,${2:?--only PHASE[,PHASE...]},; shift ;;
    *) echo "usage: tests/device/run.sh [--dry-run] [--only PHASE[,PHASE...]] [--ranks N]" >&2; exit 2 ;;
  esac
  shift
done
if [ "$RANKS" -gt 1 ] && [ -n "${DLT_LAUNCH:-}" ] && [[ $DLT_LAUNCH != *%n* ]]; then
  echo "run.sh: DLT_LAUNCH='$DLT_LAUNCH' does not say where the number of ranks goes: write it as %n (e.g. 'srun -n %n --gpus-per-task=1 --mpi=pmix --dl-train'); the scaling phase launches 1, 2, 4 ... ranks" >&2
  exit 2
fi
OUT=${OUT:-/tmp/dlt-device}
DEADLINE=${DLT_DEVICE_DEADLINE:-420}
[ "$RANKS" -gt 1 ] && DEADLINE=${DLT_DEVICE_DEADLINE:-440}
KILL_AFTER=5
# Phases in order of importance: name, the seconds it needs at least to be worth starting, its cap.
# The caps add up to 415 s, within the 420 s deadline (doc/gpu.md "The budget"). A phase that
# needs 0 s (the Slurm teardown) is never skipped and always has its whole cap.
PHASES=(
  "unpack 5 15" "ops 20 25" "fusion 10 20" "nccl-hostid 15 20" "nccl-samehost 15 25" "multi-rank 30 45"
  "train 25 35" "slurm-up 10 20" "slurm-env 10 25" "slurm-train 20 25" "slurm-two 20 30"
  "slurm-ddp 20 35" "slurm-down 0 15" "photos 20 30" "bench 40 50"
)
# A machine of N GPUs (--ranks N): one call of at most 480 s (8 minutes; unpack 15 + deadline 440 +
# 25 s to return). The caps add up to 430 s.
if [ "$RANKS" -gt 1 ]; then
  PHASES=(
    "unpack 5 15" "topology 5 10" "ops 20 25" "nccl 15 30" "multi-rank 30 60" "scaling 30 60"
    "kill-rank 30 45" "train 25 25" "slurm-up 10 20" "slurm-env 10 30" "slurm-train 20 30"
    "slurm-ddp 20 30" "slurm-down 0 15" "bench 35 35"
  )
fi
for p in "${PHASES[@]}"; do read -r n _ _ <<<"$p"; ALL="${ALL:-} $n"; done
if [ -n "$ONLY" ]; then
  for n in ${ONLY//,/ }; do [[ " $ALL " == *" $n "* ]] || { echo "run.sh: --only: no phase '$n' (phases:$ALL)" >&2; exit 2; }; done
fi
# With --only, unpack always runs, and any slurm phase brings slurm-up and slurm-down with it.
wanted() {
  [ -z "$ONLY" ] || [ "$1" = unpack ] || [[ $ONLY == *",$1,"* ]] && return 0
  [[ ($1 == slurm-up || $1 == slurm-down) && $ONLY == *",slurm-"* ]]
}

# ranks_launch K: the command that starts K ranks, one per GPU, into LAUNCH_K: $DLT_LAUNCH with %n
# replaced by K, else tests/device/two_ranks.sh K (libdltpmix's test rendezvous: no srun or PMIx
# server needed; rank R is local rank R, so dltrain and nccl_check open GPU R).
LAUNCH_K=()
ranks_launch() {
  if [ -n "${DLT_LAUNCH:-}" ]; then read -r -a LAUNCH_K <<<"${DLT_LAUNCH//%n/$1}"
  else LAUNCH_K=(env DLTPMIX_TIMEOUT=60 bash tests/device/two_ranks.sh "$1"); fi
}
# mr_sizes N: the multi-rank comparison's sizes: MR_PER images per rank (64 with 2 ranks, at least
# 32), MR_TOTAL = N x MR_PER, the one rank's batch and the synthetic set.
mr_sizes() {
  MR_PER=$((128 / $1)); [ "$MR_PER" -ge 32 ] || MR_PER=32
  MR_TOTAL=$(($1 * MR_PER))
}
# scaling_counts N: 1, 2, 4, ... up to N, and N itself.
scaling_counts() {
  local k=1 out=
  while [ "$k" -lt "$1" ]; do out+="$k "; k=$((k * 2)); done
  echo "$out$1"
}
# kill-rank: the survivors' stall timeout, and the margin past it within which they must have ended.
KILL_STALL=10 KILL_MARGIN=10
echo "device: deadline ${DEADLINE} s for all phases; ranks ${RANKS}${ONLY:+; only${ONLY//,/ }}"
if [ "$DRY" = 1 ]; then
  for p in "${PHASES[@]}"; do
    read -r n lo hi <<<"$p"
    if [ "$lo" = 0 ]; then wanted "$n" && echo "device: phase $n (never skipped once slurm-up ran, at most ${hi} s)"
    else wanted "$n" && echo "device: phase $n (starts with >= ${lo} s left, at most ${hi} s)"; fi
  done
  if [ "$RANKS" -gt 1 ]; then
    ranks_launch "$RANKS"
    echo "device: $RANKS ranks, one per GPU (rank R on GPU R), through ${LAUNCH_K[*]}"
    echo "device: topology: nvidia-smi topo -m (the link between every pair of the $RANKS GPUs), each GPU's fabric state (nvidia-smi -q: NVSwitch NVLinks need nvidia-fabricmanager), nvidia-smi nvlink -s"
    echo "device: nccl: nccl_check on $RANKS ranks (exact sums in float/double/half, busbw), then dltrain check's all-reduce sweep up to 256 MiB"
    echo "device: slurm-env: the plugin's view of the task's GPU against nvidia-smi and sysfs, and NCCL's own detection against the plugin's topology XML (NCCL_TOPO_DUMP_FILE both ways, tests/device/topo_compare.py)"
    mr_sizes "$RANKS"
    echo "device: multi-rank: 1 rank x $MR_TOTAL images against $RANKS ranks x $MR_PER (synthetic set of $MR_TOTAL), plain and as a CUDA graph (bit for bit), the ranks' weights bit-identical at every step"
    echo "device: scaling: fp16, batch 256 per rank, CUDA graph, at $(scaling_counts "$RANKS" | tr ' ' ',') ranks, images/s per rank against one rank's"
    echo "device: kill-rank: $RANKS ranks, rank $((RANKS - 1)) killed with SIGKILL after step 3; the others must end by themselves within their stall timeout (${KILL_STALL} s) + ${KILL_MARGIN} s, naming a lost peer"
  else echo "device: two-rank phases: two NCCL ranks on one GPU (tests/device/two_ranks.sh): nccl-hostid with the machine's NCCL (NCCL_HOSTID per rank, socket transport), nccl-samehost with NCCL >= 2.30 (NCCL_MULTI_RANK_GPU_ENABLE=1); without NCCL >= 2.30: nccl-samehost NOT TESTED, counted as cut"; fi
  echo "device: slurm phases: a one-node Slurm 22.05 from the pack (tests/device/slurm_node.sh up \$DLT_SLURM_PACK: munged, slurmctld, slurmd, gres /dev/nvidia*, the pack's plugin); without a carried Slurm or root: NOT TESTED, counted as cut; slurm-down runs whenever slurm-up ran, past the deadline and on interruption too"
  echo "device: every command ends at its phase's cap: timeout -k ${KILL_AFTER} (TERM, then KILL); leftover ranks are killed within 2 s"
  caps=0; for p in "${PHASES[@]}"; do read -r n _ hi <<<"$p"; wanted "$n" && caps=$((caps + hi)); done
  if [ "$RANKS" -gt 1 ]; then
    # An N-GPU machine: the whole plan in one call of at most 8 minutes (doc/gpu.md "Several GPUs").
    call=$((15 + DEADLINE + 25))
    echo "device: budget: one call of $call s (unpack 15 + deadline ${DEADLINE} + 25 s to return) <= 480 s (8 minutes); the phases' caps add up to ${caps} s"
    if [ "$caps" -gt "$DEADLINE" ] || [ "$call" -gt 480 ]; then echo "device: budget: DOES NOT FIT (caps over the deadline, or the call over 480 s)"; exit 1; fi
    echo "device: tool call: run(carry [\".devpack\"], command \"bash tests/device/go.sh --ranks $RANKS\", timeout_s $call)"
    echo "device: dry run: nothing run"
    exit 0
  fi
  # The budget (doc/gpu.md "The budget"): one lease of GPU-machine time holds this call and a rerun.
  LEASE=900 STARTUP=90 UNPACK=15 RETURN=20 MIN_START=240
  first=$((STARTUP + UNPACK + DEADLINE + RETURN)) rest=$((LEASE - STARTUP - UNPACK - DEADLINE - RETURN))
  rerun=$((rest - STARTUP - UNPACK - RETURN))
  echo "device: budget: lease ${LEASE} s = this call (start-up ${STARTUP} + unpack ${UNPACK} + deadline ${DEADLINE} + return ${RETURN} = ${first} s) + ${rest} s left: a rerun call (start-up ${STARTUP} + unpack ${UNPACK} + --only phases with DLT_DEVICE_DEADLINE=${rerun} + return ${RETURN}); the phases' caps add up to ${caps} s"
  if [ "$caps" -gt "$DEADLINE" ] || [ "$rest" -lt "$MIN_START" ] || [ "$rerun" -lt 60 ]; then
    echo "device: budget: DOES NOT FIT (caps over the deadline, or no room for a rerun: a machine starts only with >= ${MIN_START} s left)"; exit 1
  fi
  echo "device: tool call: run(carry [\".devpack\"], command \"bash tests/device/go.sh\", timeout_s $((UNPACK + DEADLINE + 25)))"
  echo "device: dry run: nothing run"
  exit 0
fi
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "device: SKIP: no GPU visible (nvidia-smi -L failed)"
  exit 0
fi
mkdir -p "$OUT"
W=$(mktemp -d /tmp/dlt-device-work.XXXXXX)
LOG=$OUT/device-run.log
exec 3>&1 4>&2
exec > >(tee "$LOG") 2>&1
TEE_PID=$!
# A signal from outside (timeout's, sent to the whole process group) may end tee first: a write to
# its pipe must then fail, not end this shell before the interruption's trap has stopped the
# one-node Slurm and saved the results. A caught signal is not inherited: the programs started
# here keep SIGPIPE's default.
trap : PIPE
START=$SECONDS
if [ -n "$ONLY" ]; then
  # A rerun: the words of NCCL and cuDNN on what went wrong.
  export NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,P2P,SHM,GRAPH CUDNN_LOGLEVEL_DBG=2 CUDNN_LOGDEST_DBG=stderr
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
passed=0 failed=0 cut=0
declare -A STATUS ELAPSED
ok() { passed=$((passed + 1)); echo "device: ok   $*"; }
# A failed check: "cut" when a command of this phase was ended by its time cap (time, not a wrong
# result, ended it), else FAIL.
bad() {
  if [ "$PHASE_TIMED_OUT" = 1 ]; then cut=$((cut + 1)); PHASE_CUT=1; echo "device: CUT  (time cap) $*"
  else failed=$((failed + 1)); echo "device: FAIL $*"; fi
}
not_tested() { cut=$((cut + 1)); PHASE_CUT=1; echo "device: NOT TESTED $*"; }
left() { echo $((DEADLINE - (SECONDS - START))); }
cap() { local l; l=$(left); echo $(($1 < l ? $1 : (l > 1 ? l : 1))); }
table() {
  echo "device: phase            status       seconds"
  for p in "${PHASES[@]}"; do
    read -r n _ _ <<<"$p"
    printf 'device: %-16s %-12s %s\n' "$n" "${STATUS[$n]:-not run}" "${ELAPSED[$n]:--}"
  done
  echo "device: $passed passed, $failed failed, $cut cut (ended by time, or not testable here) in $((SECONDS - START)) s of ${DEADLINE} s"
}
# The programs of this run (the pack's, else the build's): what reap looks for.
PROGS_RE=
# Whether a one-node Slurm was started (slurm-up), so that it is stopped whatever happens.
SLURM_UP=0
# Kills whatever this run's programs left running (ranks in sessions of their own outlive their
# launcher): KILL to each, then waits up to 2 s for them to go; says what it killed.
reap() {
  [ -n "$PROGS_RE" ] || return 0
  local pids i
  pids=$(pgrep -f "$PROGS_RE" | grep -v -x "$$" | tr '\n' ' ')
  [ -n "${pids// /}" ] || return 0
  echo "device: killing processes left running after phase $1: $pids"
  # shellcheck disable=SC2086
  for p in $pids; do kill -KILL -- "-$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null; done
  for i in $(seq 20); do pgrep -f "$PROGS_RE" >/dev/null || return 0; sleep 0.1; done
  echo "device: processes still alive 2 s after KILL: $(pgrep -f "$PROGS_RE" | tr '\n' ' ')"
  return 1
}
# Everything under W into one archive, the log and the table beside it: three files in $OUT.
finish() {
  local rc=0
  # The one-node Slurm never outlives the run (a deadline passed, an interruption).
  [ "$SLURM_UP" != 1 ] || slurm_stop
  table | tee "$W/table.txt"
  [ "$failed" -gt 0 ] && rc=1 || { [ "$cut" -gt 0 ] && rc=2; }
  echo "device: log $LOG, table $OUT/device-table.txt, everything else $OUT/device-results.tar.gz"
  exec 1>&3 2>&4
  wait "$TEE_PID" 2>/dev/null
  cp "$W/table.txt" "$OUT/device-table.txt"
  tar -czf "$OUT/device-results.tar.gz" -C "$W" . 2>/dev/null
  rm -rf "$W"
  exit "$rc"
}
trap 'echo "device: interrupted"; reap interrupt; finish' TERM INT
# run_phase NAME FUNCTION: runs it when asked for and enough time is left; records status and seconds.
run_phase() {
  local name=$1 fn=$2 lo hi t0 f0=$failed
  [[ " $ALL " == *" $name "* ]] || return 0 # not a phase of this plan (--ranks)
  wanted "$name" || return 0
  for p in "${PHASES[@]}"; do read -r n l h <<<"$p"; [ "$n" = "$name" ] && lo=$l hi=$h; done
  if [ "$lo" -gt 0 ] && [ "$(left)" -lt "$lo" ]; then
    STATUS[$name]="cut: deadline"; cut=$((cut + 1)); echo "device: $name not started: $(left) s left"; return
  fi
  [ "$lo" = 0 ] || hi=$(cap "$hi")
  echo "device: --- $name (cap $hi s)"
  t0=$SECONDS
  PHASE_END=$((SECONDS + hi))
  PHASE_TIMED_OUT=0 PHASE_CUT=0 PHASE_STATUS=
  "$fn"
  reap "$name" || bad "processes of phase $name survive KILL"
  ELAPSED[$name]=$((SECONDS - t0))
  if [ "$failed" -gt "$f0" ]; then STATUS[$name]=FAIL
  elif [ "$PHASE_CUT" = 1 ]; then STATUS[$name]=cut
  else STATUS[$name]=${PHASE_STATUS:-ok}; fi
}
# What a command may still take in this phase (timeout's argument; its KILL comes KILL_AFTER later).
tmo() { local t=$((PHASE_END - SECONDS - KILL_AFTER)); echo $((t > 1 ? t : 1)); }
# A command bounded by the phase's cap: TERM at the cap, KILL KILL_AFTER seconds later. Notes when
# time ended it (timeout's 124, or 137 after the KILL).
tm() {
  local rc
  timeout -k "$KILL_AFTER" "$(tmo)" "$@"; rc=$?
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then PHASE_TIMED_OUT=1; echo "device: time cap reached: $1 ... ended" >&2; fi
  return "$rc"
}
ver_text() { echo "$(($1 / 10000)).$(($1 / 100 % 100)).$(($1 % 100))"; }
# The version of the NCCL a program would load with LD_LIBRARY_PATH=$1 (2.30.7 -> 23007; 0 unknown).
nccl_version() {
  LD_LIBRARY_PATH=$1 python3 -c 'import ctypes
v = ctypes.c_int(0)
try:
    ctypes.CDLL("libnccl.so.2").ncclGetVersion(ctypes.byref(v))
except OSError:
    pass
print(v.value)' 2>/dev/null || echo 0
}

phase_unpack() {
  local NV
  # CUDA 13 libraries: the toolkit's and those of PyTorch's nvidia-* wheels (cuDNN, NCCL, cuBLAS).
  NV=$(python3 -c 'import glob, os, nvidia
print(":".join(sorted({os.path.dirname(p) for d in nvidia.__path__ for p in glob.glob(os.path.join(d, "**", "lib*.so*"), recursive=True)})))' 2>/dev/null || true)
  if [ -n "${DLT_PACK:-}" ]; then
    export LD_LIBRARY_PATH=$DLT_PACK/lib${NV:+:$NV}:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    BIN=$DLT_PACK/bin DLT=$DLT_PACK/bin/dltrain OPS=$DLT_PACK/bin/cuda_ops_check NCCLCHK=$DLT_PACK/bin/nccl_check
    FUSION=$DLT_PACK/bin/fusion_probe
    PROGS_RE="^$DLT_PACK/bin/"
  elif { [ -x configure ] || ./autogen.sh >/dev/null; } &&
       { [ -f Makefile ] || ./configure --enable-werror >"$W/configure.log" 2>&1; } &&
       tm make -j"$(nproc)" >"$W/make.log" 2>&1 &&
       tm make -j"$(nproc)" tests/device/nccl_check tests/device/cuda_ops_check tests/device/fusion_probe >>"$W/make.log" 2>&1; then
    DLT=$PWD/trainer/dltrain OPS=$PWD/tests/device/cuda_ops_check NCCLCHK=$PWD/tests/device/nccl_check
    FUSION=$PWD/tests/device/fusion_probe
    PROGS_RE="^($DLT|$OPS|$NCCLCHK|$FUSION)( |$)"
  else
    bad "build (see configure.log, make.log in the results; without the packages of contrib/install-deps.sh run tests/device/pack.sh beforehand and carry .devpack)"
    tail -20 "$W/make.log" 2>/dev/null || tail -20 "$W/configure.log"; return
  fi
  local missing; missing=$(ldd "$DLT" "$OPS" "$NCCLCHK" "$FUSION" | grep "not found" | sort -u)
  if [ -n "$missing" ]; then bad "the programs miss libraries:"; echo "$missing"; return; fi
  MACHINE_NCCL=$(nccl_version "$LD_LIBRARY_PATH")
  echo "device: the machine's NCCL: $(ver_text "$MACHINE_NCCL") (single-rank phases, nccl-hostid)"
  if [ -n "${DLT_NCCL230:-}" ] && [ -f "$DLT_NCCL230/libnccl.so.2" ]; then
    CARRIED_NCCL=$(nccl_version "$DLT_NCCL230:$LD_LIBRARY_PATH")
    echo "device: the carried NCCL: $(ver_text "$CARRIED_NCCL") ($DLT_NCCL230; nccl-samehost)"
  else CARRIED_NCCL=0; echo "device: no NCCL carried (nccl-samehost needs one >= 2.30)"; fi
  ok "the programs of $(cat "${DLT_PACK:-.}/COMMIT" 2>/dev/null | tr '\n' ' ' || echo "this tree") find their libraries"
  CACHE=$W/cudnn-algos.txt
}

# Two ranks on the one GPU, each rank a host of its own to NCCL (machine's NCCL, socket transport),
# or one host (NCCL >= 2.30, NCCL_MULTI_RANK_GPU_ENABLE=1); with --ranks N, N ranks through
# DLT_LAUNCH. What is set, and why (NCCL 2.28.9 and 2.30.7 sources; doc/gpu.md "Two ranks on one
# GPU"): NCCL_MAX_CTAS=2, because each rank's kernels spin on flags the other rank's time-sliced
# kernels set and NCCL's guide for several ranks per GPU (docs/userguide env.rst,
# NCCL_MULTI_RANK_GPU_ENABLE) says to lower it if a run hangs; NCCL_MULTI_RANK_GPU_ENABLE=1 for
# 2.30's check (init.cc, "Multiple Ranks are using the same GPU") and dltrain's own (2.28 ignores
# it); nccl-hostid adds NCCL_SOCKET_IFNAME=lo (named interfaces are used as given, misc/socket.cc)
# and NCCL_IB_DISABLE=1 (net_ib.cc returns at once). Not set: NCCL_NVLS_ENABLE (NVLS is never
# probed with fewer than 2 GPUs, transport/nvls.cc), NCCL_MIN_CTAS (its default is already 1).
# /dev/shm: with the socket transport each rank maps a 32.6 MiB proxy pool there (proxy.cc).
TWO_COMMON=(NCCL_MAX_CTAS=2 NCCL_MULTI_RANK_GPU_ENABLE=1 DLTPMIX_TIMEOUT=60)
HOSTID_LAUNCH=() SAMEHOST_LAUNCH=() TRAIN_LAUNCH=() TRAIN_NCCL=
hostid_launch() {
  HOSTID_LAUNCH=(env "${TWO_COMMON[@]}" NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 DLT_RANK_HOSTID=1
                 bash tests/device/two_ranks.sh 2)
}
samehost_launch() {
  SAMEHOST_LAUNCH=(env "${TWO_COMMON[@]}" LD_LIBRARY_PATH="$DLT_NCCL230:$LD_LIBRARY_PATH" bash tests/device/two_ranks.sh 2)
}
# nccl_pair NAME LAUNCHER...: nccl_check's exact sums and busbw on two ranks, the transport NCCL chose.
nccl_pair() {
  local name=$1; shift
  if tm "$@" env NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,P2P,SHM "$NCCLCHK" >"$W/nccl-$name.log" 2>&1 &&
     grep -q "all exact" "$W/nccl-$name.log" && grep -q "all-reduce correct" "$W/nccl-$name.log"; then
    ok "nccl_check on $(grep -o 'communicator of [0-9]* ranks' "$W/nccl-$name.log" | head -1 | awk '{print $3}') ranks ($name): $(grep -o 'NCCL [0-9][0-9.]*' "$W/nccl-$name.log" | head -1), exact sums in float/double/half across the bucket boundaries; $(grep -o 'algbw.*' "$W/nccl-$name.log" | head -1); transport: $(grep -oE 'via (NET/[A-Za-z]+|P2P/[A-Za-z]+|SHM[A-Za-z/]*)' "$W/nccl-$name.log" | sort -u | tr '\n' ' ')"
    return 0
  fi
  bad "nccl_check ($name)"; grep -v "NCCL INFO" "$W/nccl-$name.log" | tail -8; grep "NCCL WARN" "$W/nccl-$name.log" | head -5
  return 1
}
shm_room() {
  local kib; kib=$(df -Pk /dev/shm 2>/dev/null | awk 'NR == 2 {print $4}')
  echo "device: /dev/shm: ${kib:-?} KiB free (two socket-transport ranks map 2 x 32.6 MiB there)"
  [ -z "$kib" ] || [ "$kib" -ge 131072 ] || echo "device: warning: /dev/shm has under 128 MiB free: NCCL may fail 'failed to extend /dev/shm/nccl-...'"
}
phase_nccl_hostid() {
  hostid_launch
  shm_room
  echo "device: NCCL $(ver_text "$MACHINE_NCCL") (the machine's), NCCL_HOSTID per rank"
  nccl_pair hostid "${HOSTID_LAUNCH[@]}" && [ -z "$TRAIN_NCCL" ] && TRAIN_LAUNCH=("${HOSTID_LAUNCH[@]}") && TRAIN_NCCL="machine's NCCL, NCCL_HOSTID per rank"
}
phase_nccl_samehost() {
  if [ "${CARRIED_NCCL:-0}" -lt 23000 ]; then
    not_tested "nccl-samehost: no NCCL >= 2.30 carried (two ranks of one host on one GPU need it; tests/device/pack.sh packs 2.30.7)"; return
  fi
  samehost_launch
  echo "device: NCCL $(ver_text "$CARRIED_NCCL") (carried), one host, NCCL_MULTI_RANK_GPU_ENABLE=1"
  nccl_pair samehost "${SAMEHOST_LAUNCH[@]}" && TRAIN_LAUNCH=("${SAMEHOST_LAUNCH[@]}") && TRAIN_NCCL="NCCL $(ver_text "$CARRIED_NCCL"), one host"
  # The all-reduce sweep as users see it, from dltrain check, on the same pair.
  if [ "${#TRAIN_LAUNCH[@]}" -gt 0 ]; then allreduce_sweep check-2 2 64M "${TRAIN_LAUNCH[@]}"
  else bad "dltrain check on 2 ranks: no pair of ranks passed nccl_check"; fi
}
# allreduce_sweep NAME RANKS MAX-BYTES LAUNCHER...: dltrain check's all-reduce sweep on RANKS ranks up
# to MAX-BYTES (its log NAME.log): every sum exact, the busbw of the largest sizes.
allreduce_sweep() {
  local name=$1 n=$2 max=$3 bus; shift 3
  if tm "$@" "$DLT" check --backend cuda --gemm-size 1024 --max-bytes "$max" --no-isolate --min-fraction 0 --json >"$W/$name.log" 2>&1 &&
     bus=$(sed -n 's/^\(\[rank 0\] \)\{0,1\}\({"verdict".*\)/\2/p' "$W/$name.log" | python3 -c 'import json, sys
d = json.loads(sys.stdin.readline())
assert d["ranks"] == int(sys.argv[1]) and all(p["wrong"] == 0 for p in d["allreduce"])
print(" ".join("%s:%s" % (p.get("bytes"), p["busbw_gbs"]) for p in d["allreduce"][-3:]))' "$n"); then
    ok "dltrain check on $n ranks: all-reduce sums exact at every size up to $max; busbw at the largest sizes (bytes:GB/s) $bus"
  else bad "dltrain check on $n ranks"; tail -5 "$W/$name.log"; fi
}

# ------------------------------------------------------------------ a machine of N GPUs (--ranks N)
phase_topology() {
  local n verdict line fm
  n=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
  tm nvidia-smi topo -m >"$W/nvidia-smi-topo.txt" 2>&1
  tm nvidia-smi -q >"$W/nvidia-smi-q.txt" 2>&1
  tm nvidia-smi nvlink -s >"$W/nvidia-smi-nvlink.txt" 2>&1
  cat "$W/nvidia-smi-topo.txt"
  fm=$(systemctl is-active nvidia-fabricmanager 2>/dev/null) || fm="${fm:-unknown} (systemctl)"
  pgrep -x nv-fabricmanager >/dev/null 2>&1 && fm="$fm, nv-fabricmanager running"
  echo "device: nvidia-fabricmanager: $fm; NVLink status: $(grep -c 'Link [0-9]*: [0-9.]* GB/s' "$W/nvidia-smi-nvlink.txt") links up"
  if [ "$n" -ge "$RANKS" ]; then ok "topology: $n GPUs (nvidia-smi -L) for --ranks $RANKS"
  else bad "topology: $n GPU(s) here, --ranks $RANKS asks for more: run with --ranks $n"; fi
  while IFS=$'\t' read -r verdict line; do
    if [ "$verdict" = OK ]; then ok "topology: $line"; else bad "topology: $line"; fi
  done < <(python3 tests/device/gpu_links.py "$RANKS" "$W/nvidia-smi-topo.txt" "$W/nvidia-smi-q.txt")
}
# nccl: N ranks, one per GPU: nccl_check's exact sums and busbw, then dltrain check's sweep.
phase_nccl() {
  ranks_launch "$RANKS"
  echo "device: NCCL $(ver_text "$MACHINE_NCCL") (the machine's), $RANKS ranks through ${LAUNCH_K[*]}"
  nccl_pair "$RANKS-gpus" "${LAUNCH_K[@]}" && TRAIN_LAUNCH=("${LAUNCH_K[@]}") && TRAIN_NCCL="$RANKS GPUs"
  allreduce_sweep check-n "$RANKS" 256M "${LAUNCH_K[@]}"
}
# scaling: weak scaling in fp16, 256 images per rank, CUDA graph, at 1, 2, 4 ... N ranks; each
# run's images/s per rank against the one-rank run's (its --metrics file as --baseline).
SC_LAUNCH=()
phase_scaling() {
  local k eff row extra worst=100 base=$W/scale-1.jsonl
  : >"$W/scaling.txt"
  for k in $(scaling_counts "$RANKS"); do
    if [ $((PHASE_END - SECONDS - KILL_AFTER)) -lt 15 ]; then not_tested "scaling at $k ranks: not started (under 15 s of the cap left)"; continue; fi
    SC_LAUNCH=() extra=()
    if [ "$k" -gt 1 ]; then ranks_launch "$k"; SC_LAUNCH=("${LAUNCH_K[@]}"); extra=(--baseline "$base"); fi
    if train SC_LAUNCH fp16 nccl 40 "$W/scale-$k.jsonl" --batch 256 --synthetic-size $((256 * k)) --lr 0.1 --cuda-graphs \
         --log-every 10 "${extra[@]}" >"$W/scale-$k.log" 2>&1 &&
       row=$(grep -o 'summary: [0-9.]* images/s, [0-9.]* per rank, [0-9]* rank(s)\(, scaling efficiency [0-9.]*%\)\{0,1\}' "$W/scale-$k.log" | tail -1) &&
       [ -n "$row" ]; then
      echo "device: scaling: $row" | tee -a "$W/scaling.txt"
      eff=$(grep -o 'efficiency [0-9.]*' <<<"$row" | awk '{print $2}')
      [ -z "$eff" ] || worst=$(python3 -c 'import sys; print(min(float(sys.argv[1]), float(sys.argv[2])))' "$worst" "$eff")
    else
      bad "scaling: the $k-rank run failed"; tail -5 "$W/scale-$k.log"
      [ "$k" = 1 ] && return
    fi
  done
  if python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) >= 90 else 1)' "$worst"; then
    ok "scaling: fp16 ResNet-50, 256 images per GPU: the worst efficiency $worst% (images/s per rank against one rank's; at least 90%)"
  else bad "scaling: the efficiency fell to $worst% (below 90%: scaling.txt; NCCL_DEBUG=INFO in a rerun shows the transport)"; fi
}
# rank_pid R: the dltrain process of rank R (two_ranks.sh's DLTPMIX_TEST_RANK, or Slurm's SLURM_PROCID).
rank_pid() {
  local p pp all
  all=$(pgrep -f "^$DLT ")
  for p in $all; do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx -e "DLTPMIX_TEST_RANK=$1" -e "SLURM_PROCID=$1" || continue
    # A child of the rank (a forked worker, a shell's subshell) has its command line and
    # environment: the rank is the one whose parent is not one of them.
    pp=$(awk '{ print $4 }' "/proc/$p/stat" 2>/dev/null)
    [ -n "$pp" ] && grep -qx -- "$pp" <<<"$all" && continue
    echo "$p"; return 0
  done
  return 1
}
# steps_in METRICS: how many step lines the metrics file has (0 before it exists).
steps_in() { local c; c=$(grep -c '"step":' "$1" 2>/dev/null); echo "${c:-0}"; }
# kill-rank: N ranks training; the last one killed with SIGKILL after step 3. With two_ranks.sh
# (DLT_RANKS_KEEP=1: it leaves the others be) every other rank must end by itself, naming a lost
# peer (NCCL's asynchronous error, or dltrain's watchdog), within its stall timeout + KILL_MARGIN.
# With DLT_LAUNCH (srun) the launcher's own ending of the step is what is timed.
phase_kill_rank() {
  local victim lp t0 el st r named=0 keep=1 m=$W/kill.jsonl bound=$((KILL_STALL + KILL_MARGIN))
  ranks_launch "$RANKS"
  [ -n "${DLT_LAUNCH:-}" ] && keep=0
  rm -f "$m"
  DLT_RANKS_KEEP=$keep timeout -k "$KILL_AFTER" "$(tmo)" "${LAUNCH_K[@]}" "$DLT" train --backend cuda --precision fp16 --comm nccl \
    --arch resnet50 --batch 64 --synthetic-size $((64 * RANKS)) --steps 100000 --log-every 1 --check-every 0 --lr 0.1 \
    --stall-timeout "$KILL_STALL" --cudnn-cache "$CACHE" --metrics "$m" >"$W/kill.log" 2>&1 &
  lp=$!
  # Step 3 reached and the victim found: a rank still starting is not yet a rank to kill.
  # The victim is the one found when the loop ends (asked once: not a second lookup that could differ).
  while kill -0 "$lp" 2>/dev/null && { [ "$(steps_in "$m")" -lt 3 ] || ! victim=$(rank_pid $((RANKS - 1))); } &&
        [ $((PHASE_END - SECONDS)) -gt $((bound + KILL_AFTER)) ]; do victim=; sleep 0.5; done
  if [ -z "$victim" ] || ! kill -0 "$lp" 2>/dev/null || [ "$(steps_in "$m")" -lt 3 ]; then
    kill -TERM "$lp" 2>/dev/null; wait "$lp"
    bad "kill-rank: the $RANKS ranks did not reach step 3 in time (or rank $((RANKS - 1)) was not found)"; tail -8 "$W/kill.log"; return
  fi
  kill -KILL "$victim"; t0=$SECONDS
  echo "device: kill-rank: rank $((RANKS - 1)) (pid $victim) killed with SIGKILL at step $(steps_in "$m")"
  wait "$lp"; st=$?; el=$((SECONDS - t0))
  if [ "$keep" = 1 ]; then
    for ((r = 0; r < RANKS - 1; r++)); do grep -q "^\[rank $r\] .*peer" "$W/kill.log" && named=$((named + 1)); done
    if [ "$st" != 0 ] && [ "$el" -le "$bound" ] && [ "$named" = $((RANKS - 1)) ] &&
       [ "$(grep -c '^two_ranks: rank [0-9]* exited [1-9]' "$W/kill.log")" = "$RANKS" ]; then
      ok "kill-rank: rank $((RANKS - 1)) killed (SIGKILL): the $((RANKS - 1)) others ended by themselves in ${el} s (stall timeout ${KILL_STALL} s), each naming a lost peer: $(grep -o '\] dltrain: .*peer[^:]*' "$W/kill.log" | head -1 | cut -c3-)"
    else bad "kill-rank: after SIGKILL to rank $((RANKS - 1)): launcher exit $st in ${el} s (bound ${bound} s), $named of $((RANKS - 1)) others named a lost peer"; grep -E 'exited|peer|error' "$W/kill.log" | head -12; fi
  elif [ "$st" != 0 ] && [ "$el" -le "$bound" ]; then
    ok "kill-rank: rank $((RANKS - 1)) killed (SIGKILL): $DLT_LAUNCH ended the step in ${el} s, exit $st"
  else bad "kill-rank: after SIGKILL to rank $((RANKS - 1)): $DLT_LAUNCH exit $st in ${el} s (bound ${bound} s)"; tail -8 "$W/kill.log"; fi
}

# fusion: the probe's lines, then one verdict. Graphs cuDNN refuses are what the phase is for
# (where the fused path can exist), not failures; a graph that runs and disagrees with the unfused
# ops, or a probe that fails, is a FAIL. Its shapes stop 3 s before the cap, so the totals print.
phase_fusion() {
  local rc runs refused
  [ -n "${FUSION:-}" ] && [ -x "$FUSION" ] || { bad "fusion: no fusion_probe in this build"; return; }
  tm "$FUSION" --batch 256 --budget $(($(tmo) > 4 ? $(tmo) - 3 : 1)) >"$W/fusion.txt" 2>&1; rc=$?
  grep -v '^[0-9]* passed' "$W/fusion.txt"
  runs=$(grep -c '^fusion: .* ok   engine' "$W/fusion.txt") refused=$(grep -c '^fusion: .* refused' "$W/fusion.txt")
  if [ "$rc" = 0 ] && grep -q SKIP "$W/fusion.txt"; then bad "fusion: the probe saw no GPU"
  elif [ "$rc" = 0 ]; then
    ok "fusion: $runs fused graph(s) ran and matched the unfused ops, $refused refused by cuDNN; $(grep -o 'total over.*' "$W/fusion.txt" | cut -c1-300)"
  else bad "fusion: fusion_probe exit $rc ($(tail -1 "$W/fusion.txt"))"; grep 'FAIL' "$W/fusion.txt" | head -8; fi
}

phase_ops() {
  local tf peak
  if tm "$OPS" >"$W/cuda_ops_check.txt" 2>&1 && ! grep -q SKIP "$W/cuda_ops_check.txt"; then
    ok "cuda_ops_check ($(tail -1 "$W/cuda_ops_check.txt"))"
  else
    bad "cuda_ops_check ($(grep -c '^FAIL' "$W/cuda_ops_check.txt") failing checks)"; grep '^FAIL' "$W/cuda_ops_check.txt" | head -20; tail -3 "$W/cuda_ops_check.txt"
  fi
  # dltrain check's GEMM against torch.matmul (cuBLAS) at the same size and dtype, same run.
  if tm "$DLT" check --backend cuda --precision fp16 --gemm-size 8192 --max-bytes 1M --json >"$W/check-1.json" 2>"$W/check-1.log" &&
     tf=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["compute"][0]["exact"]; print(d["compute"][0]["tflops"])' "$W/check-1.json") &&
     peak=$(tm "${DLT_TORCH_PYTHON:-python3}" -c 'import torch, time
a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16); b = torch.randn_like(a)
for _ in range(3): a @ b
torch.cuda.synchronize(); t = time.time(); n = 20
for _ in range(n): a @ b
torch.cuda.synchronize(); print(2 * 8192 ** 3 * n / (time.time() - t) / 1e12)' 2>>"$W/check-1.log"); then
    if python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) >= 0.7 * float(sys.argv[2]) else 1)' "$tf" "$peak"; then
      ok "dltrain check: GEMM fp16 8192^2 exact, ${tf} TFLOP/s vs torch.matmul (cuBLAS) ${peak} TFLOP/s"
    else bad "dltrain check: GEMM ${tf} TFLOP/s below 0.7 x torch.matmul's ${peak}"; fi
  else bad "dltrain check (one rank)"; tail -5 "$W/check-1.log"; fi
}

# train LAUNCHER-ARRAY-NAME precision comm steps metrics-file [extra options]: ResNet-50 on
# synthetic images; the defaults below, then the extra options (a later --batch wins).
train() {
  local -n L=$1; local p=$2 c=$3 n=$4 m=$5; shift 5
  rm -f "$m"
  tm "${L[@]}" "$DLT" train --backend cuda --precision "$p" --comm "$c" --arch resnet50 --batch 64 \
    --synthetic-size 64 --steps "$n" --log-every 1 --warmup-epochs 0 --milestones 100000 --lr 0.4 \
    --check-every 0 --stall-timeout 60 --bucket-mib 4 --cudnn-cache "$CACHE" --metrics "$m" "$@"
}
losses() { python3 -c 'import json,sys; print(" ".join("%.6f" % json.loads(l)["loss"] for l in open(sys.argv[1]) if "loss" in json.loads(l)))' "$1"; }
ONE=()
# within2 A B [differ]: each step's loss within 2%; with differ, the two must not be identical.
within2() {
  python3 - "$@" <<'EOF'
import sys
a = [float(v) for v in sys.argv[1].split()]; b = [float(v) for v in sys.argv[2].split()]
close = len(a) == len(b) and len(a) > 0 and all(abs(x - y) <= 0.02 * max(abs(x), 1e-6) for x, y in zip(a, b))
differ = len(sys.argv) < 4 or a != b
print("device: losses %s vs %s: %s%s" % (a, b, "each within 2%" if close else "NOT within 2%",
      "" if len(sys.argv) < 4 else (", differ" if a != b else ", IDENTICAL")))
sys.exit(0 if close and differ else 1)
EOF
}

phase_multi_rank() {
  local a b g lo hi n=2
  if [ "$RANKS" -gt 1 ]; then
    n=$RANKS
    [ "${#TRAIN_LAUNCH[@]}" -gt 0 ] || { ranks_launch "$RANKS"; TRAIN_LAUNCH=("${LAUNCH_K[@]}"); TRAIN_NCCL="$RANKS GPUs (untried: nccl did not pass or run)"; }
  elif [ "${#TRAIN_LAUNCH[@]}" = 0 ]; then
    # Neither pair phase passed (or ran): try the machine's NCCL, as nccl-hostid would.
    hostid_launch; TRAIN_LAUNCH=("${HOSTID_LAUNCH[@]}"); TRAIN_NCCL="machine's NCCL, NCCL_HOSTID per rank (untried)"
  fi
  echo "device: $n ranks through $TRAIN_NCCL"
  mr_sizes "$n"
  # 1 rank x MR_TOTAL against n ranks x MR_PER: the same images each step (the synthetic set is
  # MR_TOTAL images, split between the ranks).
  local per=$MR_PER common=(--deterministic --synthetic-size "$MR_TOTAL" --lr 0.1)
  if train ONE fp32 single 6 "$W/mr-one.jsonl" "${common[@]}" --batch "$MR_TOTAL" >"$W/mr-one.log" 2>&1 &&
     train TRAIN_LAUNCH fp32 nccl 6 "$W/mr-plain.jsonl" "${common[@]}" --batch "$per" --check-every 1 --verbose >"$W/mr-plain.log" 2>&1 &&
     train TRAIN_LAUNCH fp32 nccl 6 "$W/mr-graph.jsonl" "${common[@]}" --batch "$per" --check-every 1 --verbose --cuda-graphs >"$W/mr-graph.log" 2>&1; then
    a=$(losses "$W/mr-one.jsonl") b=$(losses "$W/mr-plain.jsonl") g=$(losses "$W/mr-graph.jsonl")
    if within2 "$a" "$b"; then ok "$n ranks x $per through NCCL train like 1 rank x $MR_TOTAL (losses within 2%)"
    else bad "$n-rank losses ($b) not within 2% of one rank at the whole batch ($a)"; fi
    if [ "$b" = "$g" ]; then ok "$n ranks replayed as a CUDA graph repeat the plain losses bit for bit"
    else bad "$n-rank CUDA-graph losses ($g) differ from plain ($b)"; fi
    if [ "$(cat "$W/mr-plain.log" "$W/mr-graph.log" | grep -c 'bit-identical across')" -ge 12 ] &&
       ! grep -q 'not bit-identical' "$W/mr-plain.log" "$W/mr-graph.log"; then
      ok "the ranks' weights are bit-identical at every step (plain and CUDA graph)"
    else bad "the ranks' weights are not shown bit-identical at every step (mr-*.log)"; fi
  else
    bad "multi-rank training runs failed"; tail -6 "$W"/mr-*.log
  fi
  # --allreduce-lowp with two ranks: the reduced fp16 copies must be what SGD reads.
  if train TRAIN_LAUNCH fp16 nccl 6 "$W/lowp-off.jsonl" "${common[@]}" --batch "$per" >"$W/lowp-off.log" 2>&1 &&
     train TRAIN_LAUNCH fp16 nccl 6 "$W/lowp-on.jsonl" "${common[@]}" --batch "$per" --allreduce-lowp >"$W/lowp-on.log" 2>&1; then
    lo=$(losses "$W/lowp-off.jsonl") hi=$(losses "$W/lowp-on.jsonl")
    if within2 "$lo" "$hi" differ; then ok "fp16 --allreduce-lowp on $n ranks: losses differ from the fp32-reduced run, each within 2%"
    else bad "fp16 --allreduce-lowp on $n ranks ($hi) against fp32-reduced ($lo): identical means the reduced copy was not read, far off a wrong sum"; fi
  else bad "--allreduce-lowp runs failed"; tail -6 "$W"/lowp-*.log; fi
}

falls() { # run-name precision steps [extra]
  local run=$1 p=$2 n=$3; shift 3
  local m=$W/train-$run.jsonl L
  if train ONE "$p" nccl "$n" "$m" "$@" >"$W/train-$run.log" 2>&1; then
    read -r -a L <<<"$(losses "$m")"
    if python3 -c "import sys; a,b=float(sys.argv[1]),float(sys.argv[2]); sys.exit(0 if b < 0.7*a else 1)" "${L[0]}" "${L[-1]}"; then
      ok "ResNet-50 $run $n steps on one batch: loss ${L[0]} -> ${L[-1]} $(grep -o 'loss-scale [^ ]* skipped [0-9]*' "$W/train-$run.log" | tail -1)"
    else bad "ResNet-50 $run: loss did not fall (${L[*]})"; fi
  else
    bad "ResNet-50 $run training run failed:"; tail -5 "$W/train-$run.log"
  fi
}
phase_train() {
  local a b g
  if train ONE fp32 single 6 "$W/id-single.jsonl" --deterministic >"$W/id-single.log" 2>&1 &&
     train ONE fp32 nccl 6 "$W/id-nccl.jsonl" --deterministic >"$W/id-nccl.log" 2>&1 &&
     train ONE fp32 nccl 6 "$W/id-graph.jsonl" --deterministic --cuda-graphs >"$W/id-graph.log" 2>&1; then
    a=$(losses "$W/id-single.jsonl") b=$(losses "$W/id-nccl.jsonl") g=$(losses "$W/id-graph.jsonl")
    if [ "$a" = "$b" ]; then ok "fp32 with NCCL buckets repeats the single-rank losses exactly ($a)"
    else bad "fp32 NCCL-bucket losses ($b) differ from single-rank ($a)"; fi
    if [ "$a" = "$g" ]; then ok "fp32 replayed as a CUDA graph repeats them too"
    else bad "fp32 CUDA-graph losses ($g) differ from plain ($a)"; fi
  else
    bad "identity runs failed"; tail -4 "$W"/id-*.log
  fi
  falls fp16-graphs fp16 12 --cuda-graphs
  falls bf16 bf16 12
  # --fuse-bn on (the convolution + batch-norm chain) against the plain fp16 path: the first 4 steps
  # of the fp16-graphs run above, from the same start; losses within 2% and not identical
  # (identical: the chain never ran).
  if [ -s "$W/train-fp16-graphs.jsonl" ] &&
     train ONE fp16 nccl 4 "$W/fuse-on.jsonl" --cuda-graphs --fuse-bn on >"$W/fuse-on.log" 2>&1; then
    grep -m2 -e 'convolution + batch-norm chain' -e 'no fused convolution' "$W/fuse-on.log" | sed 's/^/device: /'
    a=$(losses "$W/train-fp16-graphs.jsonl" | cut -d' ' -f1-4) b=$(losses "$W/fuse-on.jsonl")
    if within2 "$a" "$b" differ; then ok "fp16 --fuse-bn on trains like the plain fp16 path (4 steps, CUDA graph; losses within 2%)"
    else bad "fp16 --fuse-bn on losses ($b) against the plain path's ($a)"; fi
  else
    bad "fp16 --fuse-bn on training run failed (or the fp16-graphs run it compares with)"; tail -5 "$W/fuse-on.log" 2>/dev/null
  fi
}

# torch_peer KIND PREC BATCH VARIANT: one PyTorch peer row (tests/device/torch_bench.py --peer KIND;
# strong checks itself against eager first) as JSON on stdout, or null when it failed or no time was left.
torch_peer() {
  local left out PY=${DLT_TORCH_PYTHON:-python3} args=(--peer "$1" --precision "$2" --batch "$3" --warmup 30 --iters 60)
  [ "$4" = feed ] && args+=(--feed)
  [ "$1" = strong ] && args+=(--self-check)
  left=$((PHASE_END - SECONDS - KILL_AFTER))
  if [ "$left" -lt 15 ]; then echo "device: bench $2:$3${4:+:$4} PyTorch $1 not started: ${left} s left" >&2; echo null; return; fi
  out=$(timeout -k "$KILL_AFTER" "$left" "$PY" tests/device/torch_bench.py "${args[@]}" 2>>"$W/bench.err" | tail -1)
  case $out in '{'*'"images_per_s"'*) echo "$out" ;; *) [ -n "$out" ] && echo "$out" >>"$W/bench.err"; echo null ;; esac
}

phase_bench() {
  local configs prec batch variant extra ours peer strong left verdict t0 launch
  # Most important first: the fp16 row is the verdict; the rest while time is left.
  # fp16:256:data: fed from the photos phase's JPEGs (--feed --data), right after the fp16 row
  # (its cuDNN choices cached); against that row: the goal is within 5%.
  # fp16:256:profile: where the fp16 step's time goes, class by class (dltrain bench --profile).
  # fp32:256: strict fp32 (no TF32), the denominator of the fp16 speed-up.
  # fp16:256:nowgrad: --wgrad-fp32 off (the fp16 filter gradient and its cast) against the fp16 row's
  # auto (the fp32 gradient from cuDNN's graph API where it timed faster): that choice's gain.
  # Each plain and feed row has two PyTorch peers (tests/device/torch_bench.py): eager AMP, and the
  # strongest (fused SGD, static loss scale, the whole step one CUDA graph; --self-check first).
  # fp16:256:fused: --fuse-bn on (the convolution + batch-norm chain) against the fp16 row, right after
  # it (cuDNN's choices cached): issue #42's goal, 8,000 images/s on an H200 (7,200 on an H100).
  configs="fp16:256 fp16:256:fused fp16:256:data bf16:256 fp16:256:profile fp16:256:graphs fp32:256 tf32:256 fp16:256:feed fp16:256:nowgrad"
  : >"$W/bench.jsonl"
  for cfg in $configs; do
    IFS=: read -r prec batch variant <<<"$cfg"
    left=$((PHASE_END - SECONDS - KILL_AFTER))
    if [ "$left" -lt 15 ]; then
      cut=$((cut + 1)); echo "device: bench $cfg not started: ${left} s left (counted as cut)"; continue
    fi
    extra=()
    case $variant in graphs) extra=(--cuda-graphs) ;; nopad) extra=(--stem-pad off) ;; nowgrad) extra=(--wgrad-fp32 off) ;; fused) extra=(--fuse-bn on) ;; feed) extra=(--feed) ;; profile) extra=(--profile) ;;
      data) if [ -z "$PHOTOS_DIR" ]; then echo "device: bench $cfg not run: no photos (the photos phase did not pass)"; continue; fi
            extra=(--feed --data "$PHOTOS_DIR" --workers 15) ;;
    esac
    t0=$(date +%s.%N)
    ours=$(timeout -k "$KILL_AFTER" "$left" "$DLT" bench --backend cuda --precision "$prec" --arch resnet50 --batch "$batch" \
           --warmup 30 --iters 60 --json --cudnn-cache "$CACHE" "${extra[@]}" 2>>"$W/bench.err" | tail -1)
    case $ours in '{'*'"images_per_s"'*) ;; *) ours=null ;; esac
    [ "$variant" = profile ] && [ "$ours" != null ] && python3 -c 'import json, sys
p = json.loads(sys.argv[1])["profile"]
print("device: where the fp16 step goes (%d steps, %.2f ms each, CUDA events):" % (p["steps"], p["step_ms"]))
for k, v in sorted(p["classes"].items(), key=lambda kv: -kv[1]["ms"]):
    print("device:   %-16s %8.3f ms %6.1f%% %8s calls" % (k, v["ms"], 100 * v["share"], v.get("calls", "-")))' "$ours" | tee "$W/bench-profile.txt"
    launch=$(python3 -c 'import sys, time; print("%.1f" % (time.time() - float(sys.argv[1])))' "$t0")
    peer=null strong=null
    if [ -z "$variant" ] || [ "$variant" = feed ]; then
      peer=$(torch_peer eager "$prec" "$batch" "$variant")
      strong=$(torch_peer strong "$prec" "$batch" "$variant")
    fi
    echo "{\"precision\":\"$prec\",\"batch\":$batch,\"variant\":\"${variant:-plain}\",\"launch_s\":$launch,\"ours\":${ours:-null},\"pytorch\":${peer:-null},\"pytorch_strong\":${strong:-null}}" >>"$W/bench.jsonl"
  done
  python3 tests/device/bench_table.py table "$W/bench.jsonl" | tee "$W/bench-table.txt"
  # The planning's own words on the filter gradients (--wgrad-fp32 auto), per precision run.
  grep -m3 -e 'filter gradients:' -e 'no fp32 filter gradient' "$W/bench.err" | sed 's/^/device: bench: /'
  grep -m2 -e 'convolution + batch-norm chain' -e 'no fused convolution' "$W/bench.err" | sed 's/^/device: bench: /'
  if [ ! -s "$W/bench.jsonl" ] || grep -q '"ours":null' "$W/bench.jsonl"; then bad "some dltrain benchmarks failed or none ran"; tail -5 "$W/bench.err"; fi
  if grep -q 'the strong step does not train like the eager one' "$W/bench.err"; then
    bad "bench: the strongest PyTorch peer failed its --self-check (its figures are left out)"; grep -m2 'strong step' "$W/bench.err"
  fi
  # The verdicts (tests/device/bench_table.py): fp16 against PyTorch eager (PASS at DLT_BENCH_MIN_RATIO,
  # 1.0); fp16 and bf16 against the strongest PyTorch (PASS at DLT_BENCH_STRONG_MIN_RATIO, 1.0; issue
  # #42's goal, 1.2, said met or not); fp16 fed from JPEGs against generated images (within 5%).
  while IFS= read -r verdict; do
    case $verdict in
      PASS*) ok "bench: ${verdict#PASS }" ;;
      "NOT MEASURED"*) not_tested "bench: ${verdict#NOT MEASURED }" ;;
      *) bad "bench: ${verdict#FAIL }" ;;
    esac
  done < <(python3 tests/device/bench_table.py verdicts "$W/bench.jsonl" "${DLT_BENCH_MIN_RATIO:-1.0}" "${DLT_BENCH_STRONG_MIN_RATIO:-1.0}")
}

# ------------------------------------------------------------------ fed from real JPEGs
# photos: an ImageNet-sized set made here from the two photographs carried in the pack
# (tests/bench/make_photos.py: 3,000 JPEGs, DLT_PHOTOS, of 500x375 or 375x500 at quality 90 in
# 1,000 class folders, one process per core), then the training input path alone on it at 15 and 7 workers
# (dltrain bench --input-only: read, decode, crop, flip into the batch ring); the bench phase's
# second row trains fp16 fed from it (--feed --data) against its first, on generated images.
PHOTOS_DIR=
phase_photos() {
  local py=${DLT_TORCH_PYTHON:-python3} w row
  if [ ! -f "${DLT_PACK:-/nonexistent}/photos/china.jpg" ] || [ ! -f "$DLT_PACK/photos/flower.jpg" ]; then
    not_tested "photos: no photographs carried (tests/device/pack.sh takes scikit-learn's sample images where it finds them)"; return
  fi
  "$py" -c 'import PIL' 2>/dev/null || { not_tested "photos: no Pillow in $py (DLT_TORCH_PYTHON)"; return; }
  if tm "$py" tests/bench/make_photos.py "$W/photos" "${DLT_PHOTOS:-3000}" --classes 1000 --jobs "$(nproc)" \
       --photos "$DLT_PACK/photos/china.jpg,$DLT_PACK/photos/flower.jpg" >"$W/photos.log" 2>&1; then
    PHOTOS_DIR=$W/photos
    ok "photos: $(tail -1 "$W/photos.log"), $(du -sm "$PHOTOS_DIR" | cut -f1) MB (ILSVRC's sizes: 500x375 or 375x500, quality 90)"
  else bad "photos: make_photos.py failed"; tail -5 "$W/photos.log"; return; fi
  for w in 15 7; do
    row=$(tm "$DLT" bench --input-only --data "$PHOTOS_DIR" --workers "$w" --batch 256 --image-size 224 --precision fp16 \
          --warmup 2 --iters 8 --json 2>>"$W/photos.log" | tail -1)
    echo "$row" >>"$W/input-rows.jsonl"
    if row=$(python3 -c 'import json, sys
d = json.loads(sys.argv[1])
print("%.0f images/s (%.0f per worker), feeds %s GPU(s) at %s images/s each" % (d["images_per_s"], d["per_worker"],
      "%.2f" % d["gpus_fed"] if d.get("gpus_fed") else "?", d.get("per_gpu") or "?"))' "$row" 2>/dev/null); then
      ok "photos: the training input path, $w workers: $row"
    else bad "photos: dltrain bench --input-only --workers $w failed"; tail -3 "$W/photos.log"; fi
  done
}

# ------------------------------------------------------------------ the one-node Slurm
# tests/device/slurm_node.sh runs the Slurm of the pack (DLT_SLURM_PACK, unpacked by go.sh): its
# state, configuration and logs in /tmp/dlt-slurm-node, copied into the results at the teardown.
SLURM_NODE=tests/device/slurm_node.sh SLURM_STATE=/tmp/dlt-slurm-node SRUN=() SL1=() SLURM_CONF_FILE=
slurm_ready() {
  [ "$SLURM_UP" = 1 ] && [ "${STATUS[slurm-up]:-}" = ok ] && return 0
  not_tested "$1: no one-node Slurm (slurm-up did not pass)"; return 1
}
phase_slurm_up() {
  local node
  if [ -z "${DLT_SLURM_PACK:-}" ] || [ ! -x "$DLT_SLURM_PACK/libexec/slurmd" ]; then
    not_tested "slurm-up: no Slurm carried (tests/device/pack.sh packs this machine's Slurm 22.05 when its packages are installed)"; return
  fi
  [ "$(id -u)" = 0 ] || { not_tested "slurm-up: not root (slurmd starts the tasks as their users)"; return; }
  SLURM_UP=1
  # The daemons must not hold this run's output open (fds 3 and 4 keep the caller's): whoever
  # reads it would wait for them, past the end of the run.
  if tm env DLT_SLURM_NODE_DIR="$SLURM_STATE" bash "$SLURM_NODE" up "$DLT_SLURM_PACK" </dev/null >"$W/slurm-up.log" 2>&1 3>&- 4>&-; then
    SLURM_CONF_FILE=$(env DLT_SLURM_NODE_DIR="$SLURM_STATE" bash "$SLURM_NODE" env "$DLT_SLURM_PACK" | sed -n 's/^export SLURM_CONF=\([^ ]*\).*/\1/p')
    # The tasks' PMIx (the pack's libpmix, the same release) loads the server's components.
    SRUN=(env SLURM_CONF="$SLURM_CONF_FILE" PMIX_MCA_mca_base_component_path="$DLT_SLURM_PACK/pmix2/lib/pmix" "$DLT_SLURM_PACK/bin/srun")
    SL1=("${SRUN[@]}" -n1 --gpus=1 --mpi=pmix --dl-train)
    node=$(env SLURM_CONF="$SLURM_CONF_FILE" "$DLT_SLURM_PACK/bin/sinfo" -h -N -o '%N %t %G CPUs=%c' 2>&1 | tr '\n' ' ')
    if [[ $node == *" idle gpu:"* ]]; then ok "slurm-up: a one-node Slurm from the pack ($(head -1 "$DLT_SLURM_PACK/VERSIONS")): $node"
    else bad "slurm-up: the node has no GPU gres ($node): no /dev/nvidia0 character device here?"; fi
  else
    bad "slurm-up: the one-node Slurm did not start"; tail -15 "$W/slurm-up.log"
    for f in "$SLURM_STATE"/log/*.log; do [ -f "$f" ] && { echo "--- $f"; tail -8 "$f"; }; done
  fi
}
# The teardown, bounded (slurm_node.sh down: scancel, TERM, KILL, every process of the pack checked
# gone); the daemons' logs and the configuration go into the results.
slurm_stop() {
  local out rc
  SLURM_UP=0
  out=$(DLT_SLURM_NODE_DIR=$SLURM_STATE timeout -k 2 10 bash "$SLURM_NODE" down "$DLT_SLURM_PACK" 2>&1); rc=$?
  [ "$rc" = 0 ] || out+=$'\n'"device: slurm-down: down ended with $rc; KILL to every process of the pack"$'\n'$(DLT_SLURM_NODE_DIR=$SLURM_STATE timeout 3 bash "$SLURM_NODE" kill "$DLT_SLURM_PACK" 2>&1)
  echo "$out"
  mkdir -p "$W/slurm-logs"; cp -r "$SLURM_STATE/log/." "$SLURM_STATE/etc/." "$W/slurm-logs/" 2>/dev/null
  if [ "$rc" = 0 ]; then ok "slurm-down: $(tail -1 <<<"$out")"
  else bad "slurm-down: the one-node Slurm did not stop cleanly (exit $rc)"; fi
}
phase_slurm_down() {
  if [ "$SLURM_UP" = 1 ]; then slurm_stop; else echo "device: slurm-down: no Slurm was started"; PHASE_STATUS=-; fi
}

# The plugin's view of the task's GPU against the machine's own words, one check per line: OK or
# FAIL, a tab, what each side says.
slurm_env_compare() {
  python3 - "$@" <<'EOF'
import os, re, sys
env_log, task_log, smi_q, smi_topo = [open(f, errors="replace").read() if os.path.exists(f) else "" for f in sys.argv[1:5]]
topo_root = sys.argv[5]


def bus(b):
    m = re.match(r"^(?:([0-9a-fA-F]+):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$", (b or "").strip())
    return "%04x:%s:%s.%s" % (int(m.group(1) or "0", 16), m.group(2).lower(), m.group(3).lower(), m.group(4)) if m else None


def cpus(text):
    if text is None or not re.match(r"^[0-9][0-9,-]*$", text.strip()):
        return None
    out = set()
    for part in text.strip().split(","):
        a, _, b = part.partition("-")
        out.update(range(int(a), int(b or a) + 1))
    return out


def cpu_text(s):
    if s is None:
        return None
    runs = []
    for c in sorted(s):
        if runs and c == runs[-1][1] + 1:
            runs[-1][1] = c
        else:
            runs.append([c, c])
    return ",".join("%d" % a if a == b else "%d-%d" % (a, b) for a, b in runs) or "(none)"


def numa(v):
    v = (v or "").strip()
    return "none" if v in ("-1", "N/A") else (v if re.match(r"^\d+$", v) else None)


def sysfs(b, name):
    try:
        return open("/sys/bus/pci/devices/%s/%s" % (b, name)).read().strip()
    except (OSError, TypeError):
        return None


def check(what, sides, refs):
    """OK when the plugin's side (the first) and every side read agree, and at least one of the
    machine's own (the last refs) was read."""
    known = {v for _, v in sides if v is not None}
    agree = sides[0][1] is not None and len(known) == 1 and any(v is not None for _, v in sides[-refs:])
    said = "; ".join("%s: %s" % (n, v if v is not None else "(not read)") for n, v in sides)
    print("%s\t%s: %s" % ("OK" if agree else "FAIL", what, said))


# The plugin: its line for task 0 and its topology report (verbose); the task's own environment.
m = re.search(r"dltrain: node \S+ task 0: GPU (\S+) \((\S+)\) cpus (\S+)", env_log)
p_bus, p_cpus = (bus(m.group(2)), m.group(3)) if m else (None, None)
p_idx = next((g for g, b in re.findall(r"^dltrain: GPU(\d+) = (\S+) ", env_log, re.M) if bus(b) == p_bus), None)
row = re.search(r"^dltrain: GPU%s +([^=].*)$" % p_idx, env_log, re.M) if p_idx is not None else None
p_near, p_numa = (row.group(1).split()[-2], row.group(1).split()[-1]) if row else (None, None)
task = re.search(r"^task (.*)$", task_log, re.M)
t_env = dict(re.findall(r"(\w+)=(\S*)", task.group(1))) if task else {}
t_allowed = re.search(r"Cpus_allowed_list:\s*(\S+)", task_log)
d = re.search(r"DLT_GPU_PCI (\S+) is device (\d+) \((\S+)\): the same GPU", env_log)
cols = next((f for f in (l.split() for l in env_log.splitlines())
             if len(f) >= 8 and f[0] == "0" and not f[1].isdigit() and f[2].isdigit()), None)
# The machine: nvidia-smi -q (the GPU of minor 0 is /dev/nvidia0, gres.conf's first), its topo -m, sysfs.
q_gpus = []
for sec in re.split(r"^(?=GPU [0-9A-Fa-f]+:)", smi_q, flags=re.M):
    mb = re.search(r"^\s+Bus Id\s+:\s+(\S+)", sec, re.M)
    mm = re.search(r"^\s+Minor Number\s+:\s+(\d+)", sec, re.M)
    if mb:
        q_gpus.append((bus(mb.group(1)), mm.group(1) if mm else None))
q_bus = next((b for b, mi in q_gpus if mi == "0"), None)
q_idx = next((i for i, (b, _) in enumerate(q_gpus) if b == p_bus), None)
t_near = t_numa = None
lines = smi_topo.splitlines()
head = next((l for l in lines if "CPU Affinity" in l), None)
r = next((l for l in lines if q_idx is not None and l.split("\t")[0].strip() == "GPU%d" % q_idx), None)
if head is not None and r is not None:
    hc, rc = [c.strip() for c in head.split("\t")], [c.strip() for c in r.split("\t")]
    if "CPU Affinity" in hc and hc.index("CPU Affinity") < len(rc):
        t_near = rc[hc.index("CPU Affinity")]
    if "NUMA Affinity" in hc and hc.index("NUMA Affinity") < len(rc):
        t_numa = rc[hc.index("NUMA Affinity")]
vendor = sysfs(p_bus, "vendor")
allowed = os.sched_getaffinity(0)
near = cpus(sysfs(p_bus, "local_cpulist"))
want = None if near is None else (near & allowed or allowed)

check("the task's GPU, PCI bus id", [
    ("plugin (task 0)", p_bus), ("DLT_GPU_PCI in the task", bus(t_env.get("DLT_GPU_PCI"))),
    ("dltrain env, CUDA device %s" % (d.group(2) if d else "?"), bus(d.group(3)) if d else None),
    ("nvidia-smi -q, minor 0 (/dev/nvidia0)", q_bus),
    ("sysfs", p_bus if vendor == "0x10de" else (None if vendor is None else "vendor " + vendor))], 2)
check("its NUMA node", [("plugin", numa(p_numa)), ("nvidia-smi topo -m", numa(t_numa)),
                        ("sysfs numa_node", numa(sysfs(p_bus, "numa_node")))], 2)
check("the CPUs near it", [("plugin", cpu_text(cpus(p_near))), ("nvidia-smi topo -m", cpu_text(cpus(t_near))),
                           ("sysfs local_cpulist", cpu_text(near))], 2)
check("the CPUs task 0 is bound to", [
    ("plugin", cpu_text(cpus(p_cpus))), ("DLT_CPUS", cpu_text(cpus(t_env.get("DLT_CPUS")))),
    ("the task's Cpus_allowed_list", cpu_text(cpus(t_allowed.group(1))) if t_allowed else None),
    ("dltrain env", cpu_text(cpus(cols[6])) if cols else None),
    ("sysfs local_cpulist within the CPUs allowed here", cpu_text(want))], 1)
topo = t_env.get("NCCL_TOPO_FILE", "")
nbytes = int((re.search(r"^topo-file-bytes (\d+)", task_log, re.M) or [None, "0"])[1])
named = p_bus is not None and ('busid="%s"' % p_bus) in task_log
inside = topo.startswith(topo_root + "/")
print("%s\tNCCL_TOPO_FILE %s: %d bytes, readable in the task, %s the GPU's bus id, %s the plugin's topo_dir (%s/...)" % (
    "OK" if nbytes > 0 and named and inside else "FAIL", topo or "(unset)", nbytes, "names" if named else "does NOT name",
    "inside" if inside else "NOT inside", topo_root))
ns = re.search(r"namespace (\S+), host communicator (\S+)", env_log)
print("%s\tdltrain env: %s" % ("OK" if ns and ns.group(1).startswith("slurm.pmix.") else "FAIL",
      "a PMIx client of slurmstepd, namespace %s, host communicator %s" % ns.groups() if ns else "no PMIx namespace said"))
EOF
}
phase_slurm_env() {
  local rc verdict line
  slurm_ready slurm-env || return
  tm "${SRUN[@]}" -n1 --gpus=1 --mpi=pmix --dl-train=verbose "$DLT" env >"$W/slurm-env.log" 2>&1; rc=$?
  [ "$rc" = 0 ] || { bad "slurm-env: dltrain env under srun --dl-train exited $rc"; tail -8 "$W/slurm-env.log"; }
  # The task's environment and its topology file (removed at the end of the step), read in the step.
  tm "${SL1[@]}" bash -c 'echo "task CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-} DLT_GPU_PCI=${DLT_GPU_PCI:-} DLT_CPUS=${DLT_CPUS:-} NCCL_TOPO_FILE=${NCCL_TOPO_FILE:-}"
    grep Cpus_allowed_list /proc/self/status
    if [ -r "${NCCL_TOPO_FILE:-/nonexistent}" ]; then echo "topo-file-bytes $(wc -c <"$NCCL_TOPO_FILE")"; cat "$NCCL_TOPO_FILE"; fi' \
    >"$W/slurm-env-task.log" 2>&1 || { bad "slurm-env: the step showing the task's environment failed"; tail -5 "$W/slurm-env-task.log"; }
  tm nvidia-smi -q >"$W/nvidia-smi-q.txt" 2>&1
  tm nvidia-smi topo -m >"$W/nvidia-smi-topo.txt" 2>&1
  while IFS=$'\t' read -r verdict line; do
    if [ "$verdict" = OK ]; then ok "slurm-env: $line"; else bad "slurm-env: $line"; fi
  done < <(slurm_env_compare "$W/slurm-env.log" "$W/slurm-env-task.log" "$W/nvidia-smi-q.txt" "$W/nvidia-smi-topo.txt" "$SLURM_STATE/run")
  # The plugin's topology file read by a real NCCL: one rank of nccl_check in the step with the
  # file (NCCL_TOPO_DUMP_FILE: the merged result) and without it (NCCL's own detection); NCCL
  # must take the file without a warning, and the dumps must agree with what the file claims
  # (tests/device/topo_compare.py prints each side of each difference).
  tm "${SL1[@]}" bash -c 'cp "$NCCL_TOPO_FILE" "$0/topo-ours.xml" || exit 1
    NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH NCCL_TOPO_DUMP_FILE="$0/topo-merged.xml" "$1" >"$0/nccl-topo-merged.log" 2>&1 || exit 2
    env -u NCCL_TOPO_FILE NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH NCCL_TOPO_DUMP_FILE="$0/topo-own.xml" "$1" >"$0/nccl-topo-own.log" 2>&1 || exit 3' \
    "$W" "$NCCLCHK" >"$W/slurm-env-nccl.log" 2>&1; rc=$?
  if [ "$rc" != 0 ]; then
    bad "slurm-env: nccl_check with and without the plugin's NCCL_TOPO_FILE (step exit $rc: 1 no file, 2 with it, 3 without)"
    tail -5 "$W/slurm-env-nccl.log"; grep -h "NCCL WARN" "$W"/nccl-topo-*.log 2>/dev/null | head -5
  elif grep -q "NCCL WARN" "$W/nccl-topo-merged.log"; then
    bad "slurm-env: NCCL warned reading the plugin's topology file"; grep "NCCL WARN" "$W/nccl-topo-merged.log" | head -5
  else
    ok "slurm-env: NCCL $(grep -o 'NCCL version [0-9.]*' "$W/nccl-topo-merged.log" | head -1 | cut -d' ' -f3) took the plugin's topology file without a warning"
    if tm python3 tests/device/topo_compare.py "$W/topo-ours.xml" "$W/topo-own.xml" "$W/topo-merged.xml" >"$W/topo-compare.txt" 2>&1; then
      ok "slurm-env: the file agrees with NCCL's own detection and NCCL filled the rest alike ($(tail -1 "$W/topo-compare.txt"))"
    else bad "slurm-env: the file and NCCL's dumps differ"; grep -v "note:" "$W/topo-compare.txt" | head -12; fi
  fi
}
SLN=()
phase_slurm_train() {
  local L
  slurm_ready slurm-train || return
  # One task per GPU: 1 on the one-GPU machine, N with --ranks N.
  SLN=("${SRUN[@]}" -n "$RANKS" --gpus="$RANKS" --mpi=pmix --dl-train)
  if train SLN fp16 nccl 12 "$W/slurm-train.jsonl" --verbose --synthetic-size $((64 * RANKS)) >"$W/slurm-train.log" 2>&1; then
    read -r -a L <<<"$(losses "$W/slurm-train.jsonl")"
    if python3 -c "import sys; a,b=float(sys.argv[1]),float(sys.argv[2]); sys.exit(0 if b < 0.7*a else 1)" "${L[0]}" "${L[-1]}" &&
       grep -q 'gradient reduction: .* over nccl' "$W/slurm-train.log"; then
      ok "slurm-train: srun -n $RANKS --gpus=$RANKS --dl-train dltrain train fp16, $(grep -o 'gradient reduction: .*' "$W/slurm-train.log" | head -1) bootstrapped through Slurm's PMIx: loss ${L[0]} -> ${L[-1]} in 12 steps"
    else bad "slurm-train: the loss did not fall, or the gradients did not go through NCCL (${L[*]}; slurm-train.log)"; fi
  else bad "slurm-train: the run under srun --dl-train failed"; tail -8 "$W/slurm-train.log"; fi
}
phase_slurm_two() {
  local out rc a b L2
  slurm_ready slurm-two || return
  # Fewer GPUs than tasks: what the plugin binds, and dltrain's refusal of a shared GPU.
  out=$(tm env -u NCCL_MULTI_RANK_GPU_ENABLE "${SRUN[@]}" -n2 --gpus=1 --mpi=pmix --dl-train=verbose "$DLT" env 2>&1); rc=$?
  echo "$out" >"$W/slurm-two-env.log"
  a=$(grep -o 'task 0: GPU [^ ]* ([^)]*)' <<<"$out" | head -1) b=$(grep -o 'task 1: GPU [^ ]* ([^)]*)' <<<"$out" | head -1)
  if [ "$rc" != 0 ] && [ -n "$a" ] && [ "${a#task 0: }" = "${b#task 1: }" ] && grep -q 'would both train on GPU' <<<"$out"; then
    ok "slurm-two: 2 tasks, 1 GPU: the plugin binds both to it (${a#task 0: }: local rank modulo the step's GPUs); dltrain env refuses: $(grep -o 'ranks 0 and 1 .* would both train on GPU [^:]*' <<<"$out" | head -1)"
  else bad "slurm-two: 2 tasks on 1 GPU under --dl-train (exit $rc): expected both bound to the one GPU and dltrain env refusing"; tail -8 <<<"$out"; fi
  if [ "${CARRIED_NCCL:-0}" -lt 23000 ]; then
    not_tested "slurm-two: two ranks training on the one GPU need NCCL >= 2.30 (none carried)"; return
  fi
  L2=(env NCCL_MULTI_RANK_GPU_ENABLE=1 NCCL_MAX_CTAS=2 LD_LIBRARY_PATH="$DLT_NCCL230:$LD_LIBRARY_PATH" "${SRUN[@]}" -n2 --gpus=1 --mpi=pmix --dl-train)
  if train L2 fp16 nccl 8 "$W/slurm-two.jsonl" --synthetic-size 128 --check-every 1 --verbose >"$W/slurm-two.log" 2>&1; then
    if grep -q 'ranks share a GPU, as NCCL_MULTI_RANK_GPU_ENABLE=1 asks' "$W/slurm-two.log" &&
       [ "$(grep -c 'bit-identical across' "$W/slurm-two.log")" -ge 8 ] && ! grep -q 'not bit-identical' "$W/slurm-two.log"; then
      ok "slurm-two: 2 ranks on the one GPU train through NCCL $(ver_text "$CARRIED_NCCL") (NCCL_MULTI_RANK_GPU_ENABLE=1), weights bit-identical at every step; losses $(losses "$W/slurm-two.jsonl")"
    else bad "slurm-two: the 2-rank run did not show the shared GPU allowed and the weights bit-identical at every step (slurm-two.log)"; fi
  else bad "slurm-two: 2 ranks on the one GPU failed"; tail -8 "$W/slurm-two.log"; fi
}
phase_slurm_ddp() {
  local out rc PY=${DLT_TORCH_PYTHON:-python3}
  slurm_ready slurm-ddp || return
  "$PY" -c 'import torch.distributed' 2>/dev/null || { not_tested "slurm-ddp: no Python with torch ($PY)"; return; }
  # PyTorch's own NCCL (2.28 in its wheels): each rank a host of its own, as in nccl-hostid.
  out=$(tm env NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 NCCL_MAX_CTAS=2 "${SRUN[@]}" -n2 --gpus=1 --mpi=pmix --dl-train bash -c \
        'NCCL_HOSTID=dlt-rank-$SLURM_PROCID exec "$@"' ddp "$PY" tests/torch/ddp_contract.py --backend nccl 2>&1); rc=$?
  echo "$out" >"$W/slurm-ddp.log"
  if [ "$rc" = 0 ] && python3 - "$out" <<'EOF'
import re, sys
rows = [dict(re.findall(r"(\w+)=(\S+)", l)) for l in sys.argv[1].splitlines() if l.startswith("ddp ")]
good = (len(rows) == 2 and sorted(r["rank"] for r in rows) == ["0", "1"] and all(r["rank"] == r["procid"] for r in rows)
        and all(r.get("sum") == "1" and r.get("backend") == "nccl" and r.get("device", "").startswith("cuda") for r in rows)
        and all(r.get("gpu") in ("-", r.get("dlt_gpu")) for r in rows)
        and len({r["weights"] for r in rows}) == 1 and len({r["master"] for r in rows}) == 1)
print("device: DDP ranks %s, weights %s, master %s, GPUs %s (DLT_GPU_PCI %s)" % ([r.get("rank") for r in rows],
      sorted({r.get("weights") for r in rows}), sorted({r.get("master") for r in rows}), sorted({r.get("gpu") for r in rows}),
      sorted({r.get("dlt_gpu") for r in rows})))
sys.exit(0 if good else 1)
EOF
  then ok "slurm-ddp: PyTorch DDP, backend nccl on the GPU, 2 ranks from --dl-train's env:// contract alone: one weight checksum, the all-reduce sum right"
  else bad "slurm-ddp: PyTorch DDP under srun --dl-train (exit $rc)"; grep -v '^ddp ' <<<"$out" | tail -8; fi
}

run_phase unpack phase_unpack
if [ "${STATUS[unpack]:-}" != ok ]; then cut=$((cut + ${#PHASES[@]} - 1)); finish; fi
run_phase topology phase_topology
run_phase ops phase_ops
run_phase fusion phase_fusion
run_phase nccl phase_nccl
run_phase nccl-hostid phase_nccl_hostid
run_phase nccl-samehost phase_nccl_samehost
run_phase multi-rank phase_multi_rank
run_phase scaling phase_scaling
run_phase kill-rank phase_kill_rank
run_phase train phase_train
run_phase slurm-up phase_slurm_up
run_phase slurm-env phase_slurm_env
run_phase slurm-train phase_slurm_train
run_phase slurm-two phase_slurm_two
run_phase slurm-ddp phase_slurm_ddp
run_phase slurm-down phase_slurm_down
run_phase photos phase_photos
run_phase bench phase_bench
finish
