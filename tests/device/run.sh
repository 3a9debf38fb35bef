#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/device/run.sh: everything that needs a GPU, as one script for a lent GPU machine, inside a
# global deadline (default 400 s, DLT_DEVICE_DEADLINE; doc/gpu.md "The budget" says why 400):
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
#                 bit for bit; the loss falls in fp16 (CUDA graph) and bf16
#   bench         dltrain bench vs torchvision ResNet-50 in PyTorch eager (channels_last, AMP), same
#                 GPU and batch, as a ratio; the fp16 row is the verdict (PASS at >= DLT_BENCH_MIN_RATIO,
#                 default 1.0); further rows while time is left
# Every dltrain launch shares one cuDNN algorithm cache (--cudnn-cache): each shape is searched once
# per run of this script, not once per launch.
# Options: --dry-run (the phases, their caps and the deadline; runs nothing), --only P1,P2 (only those
# phases, with NCCL_DEBUG=INFO and cuDNN's error log on: the rerun of what failed or was cut),
# --ranks N (a machine with N GPUs: the two-rank phases run N ranks, one per GPU, through
# $DLT_LAUNCH, default "srun -n N --mpi=pmix").
# Results: $OUT (default /tmp/dlt-device) receives three files, the log, the table and one archive
# of everything else (the device tool returns at most 8 files); the work happens in a private folder.
# Without a GPU it says so and exits 0 (skipped). Exit: 0 all passed, 1 a failure, 2 something cut.
set -uo pipefail
cd "$(dirname "$0")/../.."
DRY=0 RANKS=1 ONLY=
while [ $# -gt 0 ]; do
  case $1 in
    --dry-run) DRY=1 ;;
    --ranks) RANKS=${2:?--ranks N}; shift ;;
    --only) ONLY=,${2:?--only PHASE[,PHASE...]},; shift ;;
    *) echo "usage: tests/device/run.sh [--dry-run] [--only PHASE[,PHASE...]] [--ranks N]" >&2; exit 2 ;;
  esac
  shift
done
OUT=${OUT:-/tmp/dlt-device}
DEADLINE=${DLT_DEVICE_DEADLINE:-400}
KILL_AFTER=5
# Phases in order of importance: name, the seconds it needs at least to be worth starting, its cap.
# The caps add up to the 400 s deadline (doc/gpu.md "The budget").
PHASES=(
  "unpack 5 15" "ops 20 45" "nccl-hostid 20 30" "nccl-samehost 20 40" "multi-rank 30 80"
  "train 25 60" "bench 40 130"
)
for p in "${PHASES[@]}"; do read -r n _ _ <<<"$p"; ALL="${ALL:-} $n"; done
if [ -n "$ONLY" ]; then
  for n in ${ONLY//,/ }; do [[ " $ALL " == *" $n "* ]] || { echo "run.sh: --only: no phase '$n' (phases:$ALL)" >&2; exit 2; }; done
fi
wanted() { [ -z "$ONLY" ] || [ "$1" = unpack ] || [[ $ONLY == *",$1,"* ]]; }

echo "device: deadline ${DEADLINE} s for all phases; ranks ${RANKS}${ONLY:+; only${ONLY//,/ }}"
if [ "$DRY" = 1 ]; then
  for p in "${PHASES[@]}"; do
    read -r n lo hi <<<"$p"
    wanted "$n" && echo "device: phase $n (starts with >= ${lo} s left, at most ${hi} s)"
  done
  if [ "$RANKS" -gt 1 ]; then echo "device: two-rank phases: $RANKS ranks, one per GPU, through ${DLT_LAUNCH:-srun -n $RANKS --mpi=pmix}"
  else echo "device: two-rank phases: two NCCL ranks on one GPU (tests/device/two_ranks.sh): nccl-hostid with the machine's NCCL (NCCL_HOSTID per rank, socket transport), nccl-samehost with NCCL >= 2.30 (NCCL_MULTI_RANK_GPU_ENABLE=1); without NCCL >= 2.30: nccl-samehost NOT TESTED, counted as cut"; fi
  echo "device: every command ends at its phase's cap: timeout -k ${KILL_AFTER} (TERM, then KILL); leftover ranks are killed within 2 s"
  # The budget (doc/gpu.md "The budget"): one lease of GPU-machine time holds this call and a rerun.
  LEASE=900 STARTUP=90 UNPACK=15 RETURN=20 MIN_START=240
  first=$((STARTUP + UNPACK + DEADLINE + RETURN)) rest=$((LEASE - STARTUP - UNPACK - DEADLINE - RETURN))
  rerun=$((rest - STARTUP - UNPACK - RETURN))
  caps=0; for p in "${PHASES[@]}"; do read -r n _ hi <<<"$p"; wanted "$n" && caps=$((caps + hi)); done
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
  wanted "$name" || return 0
  for p in "${PHASES[@]}"; do read -r n l h <<<"$p"; [ "$n" = "$name" ] && lo=$l hi=$h; done
  if [ "$(left)" -lt "$lo" ]; then
    STATUS[$name]="cut: deadline"; cut=$((cut + 1)); echo "device: $name not started: $(left) s left"; return
  fi
  echo "device: --- $name (cap $(cap "$hi") s)"
  t0=$SECONDS
  PHASE_END=$((SECONDS + $(cap "$hi")))
  PHASE_TIMED_OUT=0 PHASE_CUT=0
  "$fn"
  reap "$name" || bad "processes of phase $name survive KILL"
  ELAPSED[$name]=$((SECONDS - t0))
  if [ "$failed" -gt "$f0" ]; then STATUS[$name]=FAIL
  elif [ "$PHASE_CUT" = 1 ]; then STATUS[$name]=cut
  else STATUS[$name]=ok; fi
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
    PROGS_RE="^$DLT_PACK/bin/"
  elif { [ -x configure ] || ./autogen.sh >/dev/null; } &&
       { [ -f Makefile ] || ./configure --enable-werror >"$W/configure.log" 2>&1; } &&
       tm make -j"$(nproc)" >"$W/make.log" 2>&1 &&
       tm make -j"$(nproc)" tests/device/nccl_check tests/device/cuda_ops_check >>"$W/make.log" 2>&1; then
    DLT=$PWD/trainer/dltrain OPS=$PWD/tests/device/cuda_ops_check NCCLCHK=$PWD/tests/device/nccl_check
    PROGS_RE="^($DLT|$OPS|$NCCLCHK)( |$)"
  else
    bad "build (see configure.log, make.log in the results; without the packages of contrib/install-deps.sh run tests/device/pack.sh beforehand and carry .devpack)"
    tail -20 "$W/make.log" 2>/dev/null || tail -20 "$W/configure.log"; return
  fi
  local missing; missing=$(ldd "$DLT" "$OPS" "$NCCLCHK" | grep "not found" | sort -u)
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
    ok "nccl_check on 2 ranks ($name): $(grep -o 'NCCL [0-9][0-9.]*' "$W/nccl-$name.log" | head -1), exact sums in float/double/half across the bucket boundaries; $(grep -o 'algbw.*' "$W/nccl-$name.log" | head -1); transport: $(grep -oE 'via (NET/[A-Za-z]+|P2P/[A-Za-z]+|SHM[A-Za-z/]*)' "$W/nccl-$name.log" | sort -u | tr '\n' ' ')"
    return 0
  fi
  bad "nccl_check on 2 ranks ($name)"; grep -v "NCCL INFO" "$W/nccl-$name.log" | tail -8; grep "NCCL WARN" "$W/nccl-$name.log" | head -5
  return 1
}
shm_room() {
  local kib; kib=$(df -Pk /dev/shm 2>/dev/null | awk 'NR == 2 {print $4}')
  echo "device: /dev/shm: ${kib:-?} KiB free (two socket-transport ranks map 2 x 32.6 MiB there)"
  [ -z "$kib" ] || [ "$kib" -ge 131072 ] || echo "device: warning: /dev/shm has under 128 MiB free: NCCL may fail 'failed to extend /dev/shm/nccl-...'"
}
phase_nccl_hostid() {
  if [ "$RANKS" -gt 1 ]; then read -r -a TRAIN_LAUNCH <<<"${DLT_LAUNCH:-srun -n $RANKS --mpi=pmix}"; TRAIN_NCCL="$RANKS GPUs"
    nccl_pair "$RANKS-gpus" "${TRAIN_LAUNCH[@]}"; return; fi
  hostid_launch
  shm_room
  echo "device: NCCL $(ver_text "$MACHINE_NCCL") (the machine's), NCCL_HOSTID per rank"
  nccl_pair hostid "${HOSTID_LAUNCH[@]}" && [ -z "$TRAIN_NCCL" ] && TRAIN_LAUNCH=("${HOSTID_LAUNCH[@]}") && TRAIN_NCCL="machine's NCCL, NCCL_HOSTID per rank"
}
phase_nccl_samehost() {
  [ "$RANKS" -gt 1 ] && { echo "device: nccl-samehost: covered by nccl-hostid's $RANKS GPUs"; return; }
  if [ "${CARRIED_NCCL:-0}" -lt 23000 ]; then
    not_tested "nccl-samehost: no NCCL >= 2.30 carried (two ranks of one host on one GPU need it; tests/device/pack.sh packs 2.30.7)"; return
  fi
  samehost_launch
  echo "device: NCCL $(ver_text "$CARRIED_NCCL") (carried), one host, NCCL_MULTI_RANK_GPU_ENABLE=1"
  nccl_pair samehost "${SAMEHOST_LAUNCH[@]}" && TRAIN_LAUNCH=("${SAMEHOST_LAUNCH[@]}") && TRAIN_NCCL="NCCL $(ver_text "$CARRIED_NCCL"), one host"
  # The all-reduce sweep as users see it, from dltrain check, on the same pair.
  if [ "${#TRAIN_LAUNCH[@]}" -gt 0 ] &&
     tm "${TRAIN_LAUNCH[@]}" "$DLT" check --backend cuda --gemm-size 1024 --max-bytes 64M --no-isolate --min-fraction 0 --json >"$W/check-2.log" 2>&1 &&
     bus=$(sed -n 's/^\(\[rank 0\] \)\{0,1\}\({"verdict".*\)/\2/p' "$W/check-2.log" | python3 -c 'import json,sys; d=json.loads(sys.stdin.readline()); assert d["ranks"] == 2 and all(p["wrong"] == 0 for p in d["allreduce"]); print(d["allreduce"][-1]["busbw_gbs"])'); then
    ok "dltrain check on 2 ranks: all-reduce sums exact, busbw ${bus} GB/s at 64 MiB"
  else bad "dltrain check on 2 ranks"; tail -5 "$W/check-2.log"; fi
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
  local a b g lo hi
  if [ "${#TRAIN_LAUNCH[@]}" = 0 ]; then
    # Neither pair phase passed (or ran): try the machine's NCCL, as nccl-hostid would.
    hostid_launch; TRAIN_LAUNCH=("${HOSTID_LAUNCH[@]}"); TRAIN_NCCL="machine's NCCL, NCCL_HOSTID per rank (untried)"
  fi
  echo "device: two ranks through $TRAIN_NCCL"
  local per=64 common=(--deterministic --synthetic-size 128 --lr 0.1)
  if train ONE fp32 single 6 "$W/mr-one.jsonl" "${common[@]}" --batch 128 >"$W/mr-one.log" 2>&1 &&
     train TRAIN_LAUNCH fp32 nccl 6 "$W/mr-plain.jsonl" "${common[@]}" --batch "$per" --check-every 1 --verbose >"$W/mr-plain.log" 2>&1 &&
     train TRAIN_LAUNCH fp32 nccl 6 "$W/mr-graph.jsonl" "${common[@]}" --batch "$per" --check-every 1 --verbose --cuda-graphs >"$W/mr-graph.log" 2>&1; then
    a=$(losses "$W/mr-one.jsonl") b=$(losses "$W/mr-plain.jsonl") g=$(losses "$W/mr-graph.jsonl")
    if within2 "$a" "$b"; then ok "2 ranks x 64 through NCCL train like 1 rank x 128 (losses within 2%)"
    else bad "2-rank losses ($b) not within 2% of one rank at the doubled batch ($a)"; fi
    if [ "$b" = "$g" ]; then ok "2 ranks replayed as a CUDA graph repeat the plain losses bit for bit"
    else bad "2-rank CUDA-graph losses ($g) differ from plain ($b)"; fi
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
    if within2 "$lo" "$hi" differ; then ok "fp16 --allreduce-lowp on 2 ranks: losses differ from the fp32-reduced run, each within 2%"
    else bad "fp16 --allreduce-lowp on 2 ranks ($hi) against fp32-reduced ($lo): identical means the reduced copy was not read, far off a wrong sum"; fi
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
}

phase_bench() {
  local configs prec batch variant extra ours peer PY=${DLT_TORCH_PYTHON:-python3} left verdict t0 launch
  # Most important first: the fp16 row is the verdict; the rest while time is left.
  configs="fp16:256 bf16:256 fp16:256:graphs tf32:256 fp16:256:feed"
  : >"$W/bench.jsonl"
  for cfg in $configs; do
    IFS=: read -r prec batch variant <<<"$cfg"
    left=$((PHASE_END - SECONDS - KILL_AFTER))
    if [ "$left" -lt 15 ]; then
      cut=$((cut + 1)); echo "device: bench $cfg not started: ${left} s left (counted as cut)"; continue
    fi
    extra=()
    case $variant in graphs) extra=(--cuda-graphs) ;; nopad) extra=(--stem-pad off) ;; feed) extra=(--feed) ;; esac
    t0=$(date +%s.%N)
    ours=$(timeout -k "$KILL_AFTER" "$left" "$DLT" bench --backend cuda --precision "$prec" --arch resnet50 --batch "$batch" \
           --warmup 30 --iters 60 --json --cudnn-cache "$CACHE" "${extra[@]}" 2>>"$W/bench.err" | tail -1)
    case $ours in '{'*'"images_per_s"'*) ;; *) ours=null ;; esac
    launch=$(python3 -c 'import sys, time; print("%.1f" % (time.time() - float(sys.argv[1])))' "$t0")
    peer=null
    left=$((PHASE_END - SECONDS - KILL_AFTER))
    if { [ -z "$variant" ] || [ "$variant" = feed ]; } && [ "$left" -ge 15 ]; then
      peer=$(timeout -k "$KILL_AFTER" "$left" "$PY" tests/device/torch_bench.py --precision "$prec" --batch "$batch" --warmup 30 \
             --iters 60 ${variant:+--feed} 2>>"$W/bench.err" | tail -1)
      case $peer in '{'*'"images_per_s"'*) ;; *) peer=null ;; esac
    fi
    echo "{\"precision\":\"$prec\",\"batch\":$batch,\"variant\":\"${variant:-plain}\",\"launch_s\":$launch,\"ours\":${ours:-null},\"pytorch\":${peer:-null}}" >>"$W/bench.jsonl"
  done
  python3 - "$W/bench.jsonl" <<'EOF' | tee "$W/bench-table.txt"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
peer = {(r["precision"], r["variant"] == "feed"): (r.get("pytorch") or {}).get("images_per_s")
        for r in rows if r["variant"] in ("plain", "feed")}
print("%-6s %6s %-7s %12s %16s %8s %10s %9s" % ("prec", "batch", "variant", "dltrain/s", "pytorch/s", "ratio", "ours TF/s", "launch s"))
for r in rows:
    o = (r.get("ours") or {}).get("images_per_s"); p = peer.get((r["precision"], r["variant"] == "feed"))
    print("%-6s %6d %-7s %12s %16s %8s %10s %9s" % (r["precision"], r["batch"], r["variant"], "%.1f" % o if o else "FAILED",
          "%.1f" % p if p else "peer not measured", "%.2fx" % (o / p) if o and p else "-", "%.1f" % (o * 0.0245) if o else "-",
          r.get("launch_s", "-")))
print("TFLOP/s at 24.5 GFLOP per training image; MLPerf v4.0 H200 ResNet-50: ~7950 images/s per GPU")
print("launch s: the whole dltrain bench process (CUDA start, cuDNN algorithms from --cudnn-cache or searched, 25 steps);")
print("fp16 graphs reuses the fp16 row's cached choices")
EOF
  if [ ! -s "$W/bench.jsonl" ] || grep -q '"ours":null' "$W/bench.jsonl"; then bad "some dltrain benchmarks failed or none ran"; tail -5 "$W/bench.err"; fi
  verdict=$(python3 - "$W/bench.jsonl" "${DLT_BENCH_MIN_RATIO:-1.0}" <<'EOF'
import json, sys
need = float(sys.argv[2])
rows = [json.loads(l) for l in open(sys.argv[1])]
r = next((r for r in rows if r["precision"] == "fp16" and r["variant"] == "plain"), None)
o = ((r or {}).get("ours") or {}).get("images_per_s"); p = ((r or {}).get("pytorch") or {}).get("images_per_s")
if not o:
    print("FAIL dltrain fp16 batch 256 did not run")
elif not p:
    print("NOT MEASURED dltrain fp16 %.1f images/s; PyTorch eager AMP not measured" % o)
else:
    print("%s dltrain fp16 %.1f images/s vs PyTorch eager AMP channels_last %.1f images/s, same GPU and batch 256: "
          "ratio %.2f (pass at >= %.2f)" % ("PASS" if o / p >= need else "FAIL", o, p, o / p, need))
EOF
)
  case $verdict in
    PASS*) ok "bench: $verdict" ;;
    "NOT MEASURED"*) not_tested "bench: $verdict" ;;
    *) bad "bench: ${verdict:-no verdict}" ;;
  esac
}

run_phase unpack phase_unpack
if [ "${STATUS[unpack]:-}" != ok ]; then cut=$((cut + ${#PHASES[@]} - 1)); finish; fi
run_phase ops phase_ops
run_phase nccl-hostid phase_nccl_hostid
run_phase nccl-samehost phase_nccl_samehost
run_phase multi-rank phase_multi_rank
run_phase train phase_train
run_phase bench phase_bench
finish
