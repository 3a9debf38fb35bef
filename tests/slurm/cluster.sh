#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# cluster.sh up|down|status|env|install-plugin PATH
# A real Slurm cluster on this one machine for dltrain's tests: a private munged, slurmctld and
# 1-128 slurmd on loopback addresses (127.0.0.x, slurmd -N), private config/spool/log/state dirs,
# fake GPU gres (or the machine's own GPUs), and the dltrain plugin in its plugstack.conf. Needs
# root (slurmd runs jobs as their users). `down` stops only the daemons `up` started, by the pids
# it recorded. The daemons and commands are the first on PATH (tests/device/slurm_node.sh puts a
# carried Slurm there).
#
# Environment:
#   DLT_CLUSTER_DIR    state directory (default /tmp/dltrain-cluster-$UID)
#   DLT_CLUSTER_NODES  number of slurmd, 1..128 (default 2); above 4, the large-cluster settings
#                      below (timeouts for a loaded 2-core host, the nodes' ports moved up)
#   DLT_CLUSTER_GPUS   fake (default): 4 stand-in GPUs per node, served by the stand-in NVML below;
#                      N (0..8): the machine's own /dev/nvidia0..N-1 (character devices) with its
#                      NVML and sysfs, one node only when N > 0; 0: no GPU gres at all
#   DLT_CLUSTER_PLUGIN_DIR  Slurm's plugins (PluginDir), when not where Slurm was built to look
#   DLT_CLUSTER_STEPD  slurmstepd for slurmd -d, when not where slurmd was built to look
#   DLT_CLUSTER_PORT   first TCP port (default 17800). Every port the cluster listens on that Slurm
#                      lets one choose is in PORT..PORT+99 (up to 4 nodes) or PORT..PORT+399:
#                      slurmctld PORT, slurmd's default PORT+10, reserved step ports PORT+50..89;
#                      node i PORT+i (up to 4 nodes) or PORT+100+i (5..128 nodes, with srun's own
#                      ports in PORT+300..399). PMIx's servers and MPI take ephemeral ports.
#   DLT_CLUSTER_CPUS   CPUs each node claims (default 4)
#   DLT_PLUGIN         spank_dltrain.so to load (default: the build tree's, then LIBDIR/slurm)
#   DLT_PLUGIN_ARGS    site arguments for plugstack.conf (default: topo_dir=DIR/run/%n/dltrain, and,
#                      with fake GPUs, the fake NVML + fixture node below)
#   DLT_CLUSTER_TOPO   fixture topology every node pretends to have with fake GPUs (default lab2,
#                      see tests/fixtures/mktopo.py); served by the stand-in NVML built in tests/fake_nvml
#   DLT_CLUSTER_CRED_EXPIRE  AuthInfo cred_expire, seconds (default: Slurm's 120): also how long a
#                      requeued job is held before it may start again (slurm.conf(5))
set -euo pipefail

DIR=${DLT_CLUSTER_DIR:-/tmp/dltrain-cluster-$(id -u)}
NODES=${DLT_CLUSTER_NODES:-2}
PORT=${DLT_CLUSTER_PORT:-17800}
CPUS=${DLT_CLUSTER_CPUS:-4}
CRED_EXPIRE=${DLT_CLUSTER_CRED_EXPIRE:-}
GPUS=${DLT_CLUSTER_GPUS:-fake}
PLUGIN_DIR=${DLT_CLUSTER_PLUGIN_DIR:-}
STEPD=${DLT_CLUSTER_STEPD:-}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CONF=$DIR/etc/slurm.conf
export SLURM_CONF=$CONF
export PATH=$PATH:/usr/sbin:/sbin

die() { echo "cluster.sh: $*" >&2; exit 1; }
log() { echo "cluster.sh: $*" >&2; }

[[ $NODES =~ ^[1-9][0-9]*$ ]] && ((NODES <= 128)) || die "DLT_CLUSTER_NODES=$NODES: must be 1..128"
LARGE=0
((NODES > 4)) && LARGE=1
[[ $GPUS == fake || $GPUS =~ ^[0-8]$ ]] || die "DLT_CLUSTER_GPUS=$GPUS: fake, or the number of this machine's GPUs to use (0..8)"
# Every node of this cluster is this machine: two nodes would both hand out its one GPU.
[[ $GPUS == fake || $GPUS == 0 || $NODES == 1 ]] || die "DLT_CLUSTER_GPUS=$GPUS: the machine's own GPUs need DLT_CLUSTER_NODES=1 (it is $NODES)"
[[ $PORT =~ ^[0-9]+$ ]] && ((PORT > 1024 && PORT < 65000 - 400 * LARGE)) || die "DLT_CLUSTER_PORT=$PORT: must be 1025..$((64999 - 400 * LARGE))"
[[ -z $CRED_EXPIRE || ($CRED_EXPIRE =~ ^[0-9]+$ && CRED_EXPIRE -ge 10) ]] || die "DLT_CLUSTER_CRED_EXPIRE=$CRED_EXPIRE: seconds, at least 10"

find_fake_nvml() {
  local c
  for c in "${DLT_BUILDDIR:-}/tests/fake_nvml/.libs/libfakenvml.so" "$HERE/../fake_nvml/.libs/libfakenvml.so" \
           "$PWD/tests/fake_nvml/.libs/libfakenvml.so"; do
    [[ -f $c ]] && { readlink -f "$c"; return 0; }
  done
  return 1
}

find_plugin() {
  local c
  for c in "${DLT_PLUGIN:-}" "${DLT_BUILDDIR:-}/plugin/.libs/spank_dltrain.so" \
           "$HERE/../../plugin/.libs/spank_dltrain.so" "$PWD/plugin/.libs/spank_dltrain.so"; do
    [[ -n $c && -f $c ]] && { readlink -f "$c"; return 0; }
  done
  c=$(ls /usr/local/lib/slurm/spank_dltrain.so /usr/lib/*/slurm/spank_dltrain.so 2>/dev/null | head -1 || true)
  [[ -n $c ]] && { echo "$c"; return 0; }
  return 1
}

# Copies the plugin under a temporary name and renames it into place: a running step may have
# the old file mapped, and overwriting it in place would crash that step.
install_plugin() {
  local src=$1
  [[ -f $src ]] || die "plugin $src not found (build first: make)"
  cp "$src" "$DIR/lib/.spank_dltrain.so.tmp.$$"
  mv -f "$DIR/lib/.spank_dltrain.so.tmp.$$" "$DIR/lib/spank_dltrain.so"
}

is_up() { [[ -f $DIR/pids ]]; }

write_config() {
  local host i nodes_line=""
  host=$(hostname -s)
  mkdir -p "$DIR"/{etc,lib,log,run,state,spool,tmp,dev,munge}
  # 0755: the socket must be reachable by the unprivileged users some tests run srun as.
  chmod 755 "$DIR/munge"
  for i in $(seq 1 "$NODES"); do mkdir -p "$DIR/tmp/n$i" "$DIR/spool/n$i" "$DIR/run/n$i"; done
  # Fake GPUs: as many as the fixture node has (4 for lab2, 8 for dgx1).
  local nfake=4
  if [[ $GPUS == fake && -z ${DLT_PLUGIN_ARGS:-} ]]; then
    python3 "$HERE/../fixtures/mktopo.py" "${DLT_CLUSTER_TOPO:-lab2}" "$DIR/fixture" >/dev/null || die "mktopo.py ${DLT_CLUSTER_TOPO:-lab2} failed"
    nfake=$(grep -c '^gpu ' "$DIR/fixture/nvml.txt") || true
    ((nfake >= 1 && nfake <= 16)) || nfake=4
  fi
  if [[ $GPUS == fake ]]; then
    # Fake GPUs: character devices when we may create them, plain files otherwise.
    for ((i = 0; i < nfake; i++)); do
      [[ -e $DIR/dev/nvidia$i ]] || mknod "$DIR/dev/nvidia$i" c 195 "$i" 2>/dev/null || : > "$DIR/dev/nvidia$i"
    done
  else
    for ((i = 0; i < GPUS; i++)); do
      [[ -c /dev/nvidia$i ]] || die "DLT_CLUSTER_GPUS=$GPUS: /dev/nvidia$i is not a character device here"
    done
  fi
  cat > "$CONF" <<CONF
# Generated by tests/slurm/cluster.sh: a private test cluster; do not edit.
ClusterName=dlttest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 10))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$DIR/munge/munge.socket${CRED_EXPIRE:+,cred_expire=$CRED_EXPIRE}
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd-%n.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
TmpFS=$DIR/tmp/%n
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=pmix
# Reserved step ports (srun --resv-ports, SLURM_STEP_RESV_PORTS): inside this cluster's block of 100.
MpiParams=ports=$((PORT + 50))-$((PORT + 89))
GresTypes=gpu
ReturnToService=2
SlurmdParameters=config_overrides
PlugStackConfig=$DIR/etc/plugstack.conf
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/builtin
# A requeued job becomes eligible when its hold (cred_expire) ends, which is no scheduling event:
# it waits for the main loop's periodic pass, every 60 s by default (up to a minute of idle suite).
SchedulerParameters=sched_interval=1
InactiveLimit=0
KillWait=5
MinJobAge=2
MessageTimeout=$((LARGE ? 60 : 20))
SlurmdTimeout=$((LARGE ? 600 : 60))
CONF
  # Many slurmd on a 2-core host answer slowly: a larger fan-out and srun's ports kept in the block.
  ((LARGE)) && printf '%s\n' "TreeWidth=50" "SrunPortRange=$((PORT + 300))-$((PORT + 399))" >> "$CONF"
  [[ -z $PLUGIN_DIR ]] || echo "PluginDir=$PLUGIN_DIR" >> "$CONF"
  local gres="Gres=gpu:$nfake " files="$DIR/dev/nvidia[0-$((nfake - 1))]"
  if [[ $GPUS == 0 ]]; then gres="" files=""
  elif [[ $GPUS != fake ]]; then
    gres="Gres=gpu:$GPUS " files=/dev/nvidia0
    ((GPUS == 1)) || files="/dev/nvidia[0-$((GPUS - 1))]"
  fi
  for i in $(seq 1 "$NODES"); do
    echo "NodeName=n$i NodeAddr=127.0.0.$((10 + i)) NodeHostname=n$i Port=$((PORT + 100 * LARGE + i)) CPUs=$CPUS RealMemory=4000 ${gres}State=UNKNOWN" >> "$CONF"
    nodes_line+="${nodes_line:+,}n$i"
  done
  echo "PartitionName=debug Nodes=$nodes_line Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES" >> "$CONF"
  echo "AutoDetect=off" > "$DIR/etc/gres.conf"
  # No plugin here uses cgroups (proctrack/linuxproc, task/none, jobacct_gather/none), but slurmd
  # 22.05 loads a cgroup plugin at start and fails without one; autodetection would pick cgroup/v2
  # on a cgroup2 host, whose start wants a delegated, writable cgroup tree (and systemd's D-Bus).
  # cgroup/v1 starts touching nothing.
  echo "CgroupPlugin=cgroup/v1" > "$DIR/etc/cgroup.conf"
  local names="n[1-$NODES]"
  ((NODES > 1)) || names=n1
  [[ -z $files ]] || echo "NodeName=$names Name=gpu File=$files" >> "$DIR/etc/gres.conf"
  local args=${DLT_PLUGIN_ARGS:-}
  if [[ -z $args ]]; then
    args="topo_dir=$DIR/run/%n/dltrain"
    # No GPU driver here: every node is the fixture node, served by the stand-in NVML. With the
    # machine's own GPUs (or none) the plugin reads the driver's NVML and the real sysfs.
    if [[ $GPUS != fake ]]; then :
    elif fake=$(find_fake_nvml); then
      cp "$fake" "$DIR/lib/libfakenvml.so"
      args+=" nvml_lib=$DIR/lib/libfakenvml.so sysfs_root=$DIR/fixture"
    else
      log "tests/fake_nvml not built (make check builds it): the plugin will see no GPU driver"
    fi
  fi
  echo "required $DIR/lib/spank_dltrain.so $args" > "$DIR/etc/plugstack.conf"
}

start_munge() {
  [[ -f $DIR/munge/munge.key ]] || { dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none; chmod 600 "$DIR/munge/munge.key"; }
  munged --force --socket="$DIR/munge/munge.socket" --key-file="$DIR/munge/munge.key" \
    --pid-file="$DIR/munge/munged.pid" --log-file="$DIR/log/munged.log" --seed-file="$DIR/munge/seed" \
    || die "munged failed to start; see $DIR/log/munged.log"
  echo "munged $(cat "$DIR/munge/munged.pid")" >> "$DIR/pids"
}

wait_idle() {
  local deadline=$((SECONDS + ${1:-30})) states
  while ((SECONDS < deadline)); do
    states=$(sinfo -h -N -o '%t' 2>/dev/null | sort -u | tr '\n' ' ')
    [[ $states == "idle " ]] && [[ $(sinfo -h -N -o '%N' | wc -l) -eq $NODES ]] && return 0
    sleep 0.1
  done
  log "nodes not idle after ${1:-30}s: $(sinfo -N 2>&1 | tr '\n' ';')"
  return 1
}

# Every "node" here is the same host: OpenMPI's shared-memory transport would map the same
# segment names from two nodes and crash, so MPI traffic goes over TCP on loopback only. And every
# node's ranks share the host's few CPUs (lab2 binds both GPUs of a NUMA node to one CPU, so a 2 x 2
# step runs 4 ranks on CPU 0): a rank that busy-polls in MPI_Allreduce takes the CPU from the rank it
# waits for. mpirun turns yielding on itself when it sees a node oversubscribed; srun does not, so it
# is set here (48 steps of train_multinode.sh's run: 6.1 s polling, 1.3 s yielding).
ompi_env() {
  echo "export OMPI_MCA_btl=self,tcp OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo OMPI_MCA_mpi_yield_when_idle=1"
}

up() {
  local plugin i
  if is_up; then log "already up in $DIR"; return 0; fi
  [[ $(id -u) -eq 0 ]] || die "must run as root (slurmd starts jobs as their users); in CI it does"
  command -v slurmctld >/dev/null || die "slurmctld not found: install slurmctld slurmd slurm-client munge (contrib/install-deps.sh)"
  plugin=$(find_plugin) || die "spank_dltrain.so not found: build it (make) or set DLT_PLUGIN"
  rm -rf "$DIR"
  mkdir -p "$DIR"
  chmod 755 "$DIR"
  : > "$DIR/pids"
  write_config
  install_plugin "$plugin"
  start_munge
  # The stand-in NVML reads its fixture from the environment slurmstepd inherits from slurmd.
  [[ $GPUS != fake ]] || export DLT_FAKE_NVML=${DLT_FAKE_NVML:-$DIR/fixture/nvml.txt}
  slurmctld -c -f "$CONF" || { down; die "slurmctld failed; see $DIR/log/slurmctld.log"; }
  for _ in $(seq 50); do [[ -s $DIR/run/slurmctld.pid ]] && break; sleep 0.1; done
  echo "slurmctld $(cat "$DIR/run/slurmctld.pid")" >> "$DIR/pids"
  for i in $(seq 1 "$NODES"); do
    slurmd -f "$CONF" -N "n$i" ${STEPD:+-d "$STEPD"} || { down; die "slurmd n$i failed; see $DIR/log/slurmd-n$i.log"; }
  done
  for i in $(seq 1 "$NODES"); do
    for _ in $(seq 50); do [[ -s $DIR/run/slurmd-n$i.pid ]] && break; sleep 0.1; done
    echo "slurmd-n$i $(cat "$DIR/run/slurmd-n$i.pid")" >> "$DIR/pids"
  done
  if ! wait_idle $((60 + NODES)); then down; die "cluster did not come up; logs in $DIR/log"; fi
  cat > "$DIR/env" <<ENV
export SLURM_CONF=$CONF
$(ompi_env)
ENV
  log "up: $NODES nodes idle, SLURM_CONF=$CONF (source $DIR/env)"
}

down() {
  local name pid t
  [[ -f $DIR/pids ]] || { log "not up ($DIR/pids absent)"; return 0; }
  scancel --quiet --full --signal=KILL --user="$(id -un)" 2>/dev/null || true
  for t in $(seq 50); do [[ -z $(squeue -h 2>/dev/null) ]] && break; sleep 0.2; done
  # Daemons in reverse start order: slurmd first, so they can still talk to slurmctld.
  tac "$DIR/pids" | while read -r name pid; do
    [[ $pid =~ ^[0-9]+$ ]] || continue
    kill -TERM "$pid" 2>/dev/null || true
  done
  for t in $(seq 100); do
    local alive=0
    while read -r name pid; do kill -0 "$pid" 2>/dev/null && alive=1; done < "$DIR/pids"
    ((alive)) || break
    sleep 0.1
  done
  while read -r name pid; do
    if kill -0 "$pid" 2>/dev/null; then log "$name ($pid) ignored SIGTERM; killing"; kill -KILL "$pid" 2>/dev/null || true; fi
  done < "$DIR/pids"
  # A slurmstepd left over from this cluster inherited SLURM_CONF from our slurmd: match on that,
  # never on a name, so another Slurm on the machine is not touched.
  for pid in $(pgrep -x slurmstepd 2>/dev/null || true); do
    if tr '\0' '\n' < "/proc/$pid/environ" 2>/dev/null | grep -qxF "SLURM_CONF=$CONF"; then
      log "killing leftover slurmstepd $pid"; kill -KILL "$pid" 2>/dev/null || true
    fi
  done
  rm -f "$DIR/pids"
  log "down"
}

status() {
  if ! is_up; then echo "down"; return 3; fi
  local name pid bad=0
  while read -r name pid; do
    if kill -0 "$pid" 2>/dev/null; then echo "$name $pid running"; else echo "$name $pid DEAD"; bad=1; fi
  done < "$DIR/pids"
  sinfo -N 2>&1 || bad=1
  return $bad
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  status) status ;;
  env) echo "export SLURM_CONF=$CONF"; ompi_env ;;
  install-plugin) install_plugin "${2:?usage: cluster.sh install-plugin PATH}" ;;
  *) echo "usage: $0 up|down|status|env|install-plugin PATH" >&2; exit 2 ;;
esac
