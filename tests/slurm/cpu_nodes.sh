#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# CPU nodes: a step without GPUs on a node without any (no NVML, or NVML counting none) runs as
# gpus=none without being told, verbose saying why and binding each task to a NUMA node's CPUs
# (checked against the kernel's affinity and the fixture's NUMA nodes); an explicit gpus=task there
# is refused naming why; a GPU node still refuses a step without GPUs; the site's cpu_partitions=
# makes gpus=none the default in the partitions it names.
. "$(dirname "$0")/lib.sh"
cluster_up 2 24
tap_plan 8
DIR=$DLT_CLUSTER_DIR
CONF=$DIR/etc/plugstack.conf
cd /tmp
GPU_LINE=$(cat "$CONF")
# The plugstack line with its arguments changed: "key=value" replaces or adds that argument.
plugstack() {
  local line=$GPU_LINE kv
  for kv in "$@"; do
    if [[ $line == *" ${kv%%=*}="* ]]; then line=$(sed "s|\( ${kv%%=*}=\)[^ ]*|\1${kv#*=}|" <<<"$line"); else line+=" $kv"; fi
  done
  echo "$line" > "$CONF"
}
# Each task: its node, local id, DLT_OPTS, DLT_CPUS, the kernel's affinity, NCCL_TOPO_FILE.
REPORT='echo "$SLURMD_NODENAME $SLURM_LOCALID opts=$DLT_OPTS dlt_cpus=$DLT_CPUS kernel=$(sed -n "s/^Cpus_allowed_list:\s*//p" /proc/self/status) topo=${NCCL_TOPO_FILE:-unset}"'
# The fixture's NUMA nodes, the independent reference for the CPU binding: local id i of 2 on NUMA node i.
numa0=$(cat "$DIR/fixture/sys/devices/system/node/node0/cpulist")
numa1=$(cat "$DIR/fixture/sys/devices/system/node/node1/cpulist")
numa_ok() { # $1: the step's sorted report lines for 2 nodes x 2 tasks
  local n l
  for n in n1 n2; do
    for l in 0 1; do
      local want=$numa0; ((l == 1)) && want=$numa1
      grep -q "^$n $l opts=bind=closest,gpus=none,[^ ]* dlt_cpus=$want kernel=$want topo=unset$" <<<"$1" || return 1
    done
  done
}

# 1. No NVML at all (a CPU node without the NVIDIA driver).
plugstack nvml_lib="$DIR/lib/no-such-libnvidia-ml.so.1"
out=$(timeout 60 srun -N2 --ntasks-per-node=2 --dl-train=verbose bash -c "$REPORT" 2>&1); rc=$?
if ((rc == 0)) && numa_ok "$(sort <<<"$out")" && [[ $(grep -c "dltrain: node n[12]: no GPU on this node: gpus=none (no NVML" <<<"$out") == 2 &&
  $(grep -c "(NUMA-local)" <<<"$out") == 4 && $out != *GPU-local* ]]; then
  ok "no NVML, no gpus= key: runs as gpus=none, verbose says why, each task on its NUMA node's CPUs (kernel affinity)"
else not_ok "no NVML, no gpus= key (rc=$rc)"; echo "$out" | diag; fi

# 2. NVML present but counting no GPU (the nogpu fixture served by the stand-in NVML).
cp "$DIR/fixture/nvml.txt" "$WORK/nvml.lab2"
: > "$DIR/fixture/nvml.txt"
plugstack
out=$(timeout 60 srun -N2 --ntasks-per-node=2 --dl-train=verbose bash -c "$REPORT" 2>&1); rc=$?
if ((rc == 0)) && numa_ok "$(sort <<<"$out")" && [[ $(grep -c "no GPU on this node: gpus=none (NVML counts 0 GPUs" <<<"$out") == 2 ]]; then
  ok "NVML counting 0 GPUs, no gpus= key: runs as gpus=none, verbose says why"
else not_ok "NVML with 0 GPUs (rc=$rc)"; echo "$out" | diag; fi

# 3. An explicit gpus=task on that node: refused by srun without GPUs, by the node with them.
out=$(timeout 60 srun -N1 -n1 --dl-train=gpus=task true 2>&1); rc=$?
if ((rc != 0)) && [[ $out == *"--dl-train=gpus=task needs GPUs but this step requests none"* && $out == *"leave gpus= out"* ]]; then
  ok "explicit gpus=task, no GPUs requested: refused in srun, naming the fix"
else not_ok "explicit gpus=task without GPUs (rc=$rc)"; echo "$out" | diag; fi
out=$(timeout 60 srun -w n1 -N1 -n1 --gpus-per-node=1 --dl-train=gpus=task bash -c 'echo RAN' 2>&1); rc=$?
if ((rc != 0)) && [[ $out == *"node n1: --dl-train=gpus=task asks for GPUs but this node has none (NVML counts 0)"* && $out != *RAN* ]]; then
  ok "explicit gpus=task on a node whose NVML counts no GPU: refused, naming the node and why"
else not_ok "explicit gpus=task on a GPU-less node (rc=$rc)"; echo "$out" | diag; fi
cp "$WORK/nvml.lab2" "$DIR/fixture/nvml.txt"

# 4. A GPU node (lab2: 4 GPUs) and a step without GPUs: still refused, before the program runs.
out=$(timeout 60 srun -w n1 -N1 -n1 --dl-train bash -c 'echo RAN' 2>&1); rc=$?
if ((rc != 0)) && [[ $out == *"node n1: --dl-train needs GPUs but this step requests none and this node has 4 GPU(s)"* &&
  $out == *"--dl-train=gpus=none"* && $out != *RAN* ]]; then
  ok "a GPU node and a step without GPUs: refused as before, naming the node's GPUs and gpus=none"
else not_ok "GPU node, step without GPUs (rc=$rc)"; echo "$out" | diag; fi

# 5. cpu_partitions=: gpus=none is the default in the partitions named, only there.
scontrol create PartitionName=cpuq Nodes=n1,n2 State=UP MaxTime=INFINITE OverSubscribe=YES >/dev/null 2>&1
plugstack cpu_partitions=bigmem,cpuq
out=$(timeout 60 srun -p cpuq -N2 --ntasks-per-node=2 --dl-train=verbose bash -c "$REPORT" 2>&1); rc=$?
if ((rc == 0)) && numa_ok "$(sort <<<"$out")" && [[ $(grep -c "partition cpuq is one of the site's cpu_partitions: gpus=none" <<<"$out") == 2 ]]; then
  ok "cpu_partitions=bigmem,cpuq: a step in cpuq on GPU nodes runs as gpus=none, verbose says why"
else not_ok "cpu_partitions default (rc=$rc)"; echo "$out" | diag; fi
out=$(timeout 60 srun -p debug -w n1 -N1 -n1 --dl-train bash -c 'echo RAN' 2>&1); rc=$?
out2=$(timeout 60 srun -p cpuq -w n1 -N1 -n1 --gpus-per-node=1 --dl-train=gpus=task,verbose bash -c "$REPORT" 2>&1); rc2=$?
if ((rc != 0 && rc2 == 0)) && [[ $out == *"requests none and this node has 4 GPU(s)"* && $out2 == *"opts=bind=closest,gpus=task,"* && $out2 == *"topo=$DIR/run/n1/dltrain/"* ]]; then
  ok "cpu_partitions: a partition not named still refuses; an explicit gpus=task in cpuq keeps its GPU"
else not_ok "cpu_partitions scope (rc=$rc rc2=$rc2)"; { echo "$out"; echo "$out2"; } | diag; fi
# A bad list: the site line is refused as a whole; --dl-train steps fail naming the file, the line
# and the check to run; steps without --dl-train run untouched.
plugstack "cpu_partitions=cpu,,x"
out=$(timeout 60 srun -N1 -n1 --dl-train=gpus=none true 2>&1); rc=$?
out2=$(timeout 60 srun -N1 -n1 bash -c 'echo RAN' 2>&1); rc2=$?
if ((rc != 0 && rc2 == 0)) && [[ $out == *"plugstack.conf:1, which loads spank_dltrain.so, is refused: plugstack.conf cpu_partitions='cpu,,x' invalid"* &&
  $out == *"dltrain-topo --check-plugstack"* && $out2 == RAN ]]; then
  ok "cpu_partitions=cpu,,x: the site line is refused; a --dl-train step fails naming file, line and the check, other steps run"
else not_ok "bad cpu_partitions (rc=$rc)"; echo "$out" | diag; fi
exit 0
