#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# spank_dltrain on a real two-node cluster whose nodes are the lab2 fixture (4 GPUs, 2 HCAs, two
# NUMA nodes of one CPU each): what tasks see and what the kernel applied, the NCCL topology file's
# life, user settings winning, refusals in srun, hostile input, and nodes left idle.
. "$(dirname "$0")/lib.sh"
cluster_up 2 3
tap_plan 27
DIR=$DLT_CLUSTER_DIR
TOPO_DIR=$DIR/run/n1/dltrain
DLTRAIN=$DLT_BUILDDIR/trainer/dltrain
cd /tmp
# What each task reports: node, local rank, its GPU list, kernel affinity, DLT_* and NCCL_*.
REPORT='echo "$SLURMD_NODENAME $SLURM_LOCALID vis=$CUDA_VISIBLE_DEVICES cpus=$(sed -n "s/^Cpus_allowed_list:\s*//p" /proc/self/status) gpu=${DLT_LOCAL_GPU:-} pci=${DLT_GPU_PCI:-} nic=${DLT_NIC:-} hca=${NCCL_IB_HCA:-} if=${NCCL_SOCKET_IFNAME:-} topo=${NCCL_TOPO_FILE:-}"'

out=$(timeout 60 srun --quiet -N2 --ntasks-per-node=4 --gpus-per-node=4 --dl-train bash -c "$REPORT" 2>&1 | sort)
exp_n1=$'n1 0 vis=0 cpus=0 gpu=0 pci=0000:04:00.0 nic=mlx5_0 hca= if=\nn1 1 vis=1 cpus=0 gpu=1 pci=0000:05:00.0 nic=mlx5_0 hca= if=\nn1 2 vis=3 cpus=1 gpu=3 pci=0000:85:00.0 nic=mlx5_1 hca= if=\nn1 3 vis=2 cpus=1 gpu=2 pci=0000:84:00.0 nic=mlx5_1 hca= if='
got_n1=$(grep '^n1' <<<"$out" | sed 's/ topo=.*//')
if [[ $got_n1 == "$exp_n1" ]]; then ok "4 tasks/node: one GPU each, kernel affinity = the GPU's NUMA CPUs, nearest HCA as DLT_NIC, no per-task NCCL_IB_HCA or NCCL_SOCKET_IFNAME"; else not_ok "binding per task"; { echo "expected:"; echo "$exp_n1"; echo "got:"; echo "$out"; } | diag; fi
if [[ $(grep '^n2' <<<"$out" | sed 's/^n2/n1/; s/ topo=.*//') == "$exp_n1" ]]; then ok "the second node binds the same way"; else not_ok "node 2 binding"; echo "$out" | diag; fi
topo=$(grep -o 'topo=[^ ]*' <<<"$out" | sort -u)
if [[ $(wc -l <<<"$topo") -eq 2 && $topo == *"$DIR/run/n1/dltrain/"*"/nccl_topo.xml"* && $topo == *"$DIR/run/n2/dltrain/"*"/nccl_topo.xml"* ]]; then ok "NCCL_TOPO_FILE: one step-private file per node under topo_dir (%n expanded)"; else not_ok "NCCL_TOPO_FILE"; echo "$topo" | diag; fi
left=$(find "$DIR"/run/n*/dltrain -mindepth 1 2>/dev/null | wc -l)
if ((left == 0)); then ok "step directories removed at step end"; else not_ok "step dir cleanup ($left left)"; find "$TOPO_DIR" | diag; fi

out=$(timeout 60 srun --quiet -N1 -n1 --gpus-per-node=2 --dl-train bash -c 'python3 -c "import sys,xml.etree.ElementTree as E; r=E.parse(sys.argv[1]).getroot(); print(r.tag, len(r.findall(\".//gpu\")), len(r.findall(\".//net\")))" "$NCCL_TOPO_FILE"; stat -c "%U %a" "$(dirname "$NCCL_TOPO_FILE")" "$NCCL_TOPO_FILE"' 2>&1)
if [[ $out == $'system 4 3\nroot 750\nroot 640' ]]; then ok "the topology file parses as XML (4 GPUs, 3 NICs); dir 0750, file 0640, root's"; else not_ok "topology file content"; echo "$out" | diag; fi

if id nobody >/dev/null 2>&1; then
  out=$(timeout 60 runuser -u nobody -- srun --quiet -N1 -n1 --gpus-per-node=1 --dl-train bash -c 'd=$(dirname "$NCCL_TOPO_FILE"); stat -c "%U %G %a" "$d" "$NCCL_TOPO_FILE"; head -c 7 "$NCCL_TOPO_FILE"; echo; touch "$d/mine" 2>/dev/null && echo wrote || echo "cannot write"; id -un' 2>&1)
  if [[ $out == $'root '"$(id -gn nobody)"$' 750\nroot '"$(id -gn nobody)"$' 640\n<system\ncannot write\nnobody' ]]; then ok "a user's step reads its topology file (group: the job's) and cannot write in root's step directory"; else not_ok "step directory ownership for the job user"; echo "$out" | diag; fi
else ok "# SKIP no 'nobody' user"; fi

out=$(timeout 60 srun --quiet -N1 -n2 --gpus-per-node=4 --dl-train=gpus=step bash -c "$REPORT" 2>&1 | sort)
# -N1 takes whichever node is idle (n2 while n1 still ends the step before): the order is the point.
if grep -q -E '^n[12] 0 vis=0,1,3,2 ' <<<"$out" && grep -q -E '^n[12] 1 vis=1,0,3,2 ' <<<"$out"; then ok "gpus=step: every step GPU visible, own first, then NVLink order"; else not_ok "gpus=step"; echo "$out" | diag; fi

out=$(timeout 60 srun --quiet -N1 -n2 --gpus-per-node=2 --dl-train=bind=none bash -c "$REPORT" 2>&1 | sort)
if [[ $(grep -c 'cpus=0-1 ' <<<"$out") -eq 2 ]]; then ok "bind=none leaves Slurm's CPU set"; else not_ok "bind=none"; echo "$out" | diag; fi

plain=$(timeout 60 srun --quiet -N1 -n2 --gpus-per-task=1 bash -c 'echo "$SLURM_LOCALID $CUDA_VISIBLE_DEVICES"' 2>&1 | sort)
out=$(timeout 60 srun --quiet -N1 -n2 --gpus-per-task=1 --dl-train bash -c 'echo "$SLURM_LOCALID $CUDA_VISIBLE_DEVICES"' 2>&1 | sort)
if [[ -n $plain && $out == "$plain" ]]; then ok "--gpus-per-task=1: each task keeps the GPU Slurm gave it ($(tr '\n' ';' <<<"$out"))"; else not_ok "--gpus-per-task"; { echo "plain: $plain"; echo "dl-train: $out"; } | diag; fi

out=$(timeout 60 srun --quiet -N1 -n1 --gpus-per-node=1 --dl-train=verbose,nic=mlx5_0 --export=ALL,NCCL_SOCKET_IFNAME=eth7 bash -c 'echo "if=$NCCL_SOCKET_IFNAME hca=$NCCL_IB_HCA"' 2>&1)
if [[ $out == *"if=eth7 hca==mlx5_0:1"* && $out == *"keeping your NCCL_SOCKET_IFNAME=eth7"* ]]; then ok "nic=mlx5_0 exports its HCA; the user's NCCL_SOCKET_IFNAME wins, and verbose says so"; else not_ok "user setting wins"; echo "$out" | diag; fi

out=$(timeout 60 srun --quiet -N1 -n1 --gpus-per-node=1 --dl-train=nic=eth0 bash -c 'echo "if=$NCCL_SOCKET_IFNAME hca=${NCCL_IB_HCA:-none} nic=$DLT_NIC"' 2>&1)
if [[ $out == "if==eth0 hca=none nic=eth0" ]]; then ok "nic=eth0: NCCL told to use that interface, no HCA"; else not_ok "nic=eth0"; echo "$out" | diag; fi

out=$(timeout 60 srun --quiet -N1 -n1 --gpus-per-node=1 --dl-train=nic=ib9 bash -c 'echo RAN' 2>&1); rc=$?
if ((rc != 0)) && [[ $out != *RAN* && $out == *"nic=ib9: no such HCA or interface on this node (found: mlx5_0, mlx5_1, eth0)"* ]]; then ok "nic=ib9: the task is refused, naming what the node has"; else not_ok "absent nic (rc=$rc)"; echo "$out" | diag; fi

out=$(timeout 60 srun --quiet -N1 -n1 --dl-train bash -c 'echo RAN' 2>&1); rc=$?
if ((rc != 0)) && [[ $out != *RAN* && $out == *"needs GPUs"*"--gpus-per-node=N"* ]]; then ok "no GPUs requested: srun refuses, saying how to ask for them"; else not_ok "no-GPU refusal (rc=$rc)"; echo "$out" | diag; fi

out=$(timeout 60 srun --quiet -N1 -n1 --gpus-per-node=1 --mpi=none --dl-train bash -c 'echo RAN' 2>&1); rc=$?
if ((rc != 0)) && [[ $out != *RAN* && $out == *"--mpi=none: add --mpi=pmix"* ]]; then ok "--mpi=none: srun refuses, naming --mpi=pmix / MpiDefault=pmix"; else not_ok "mpi refusal (rc=$rc)"; echo "$out" | diag; fi

big=$(printf 'a%.0s' $(seq 5000))
out=$(timeout 60 srun --quiet -N1 -n1 --gpus-per-node=1 "--dl-train=$big" bash -c 'echo RAN' 2>&1); rc=$?
if ((rc != 0)) && [[ $out != *RAN* && $out == *"longer than the 1023 allowed"* ]]; then ok "a 5000-byte --dl-train value is refused, not truncated"; else not_ok "oversized option (rc=$rc)"; echo "$out" | tail -3 | diag; fi

# A link planted where the next step's directory goes must be removed, never followed.
next=$(scontrol show config | sed -n 's/^NEXT_JOB_ID *= *//p')
victim=$WORK/victim; rm -rf "$victim"; mkdir -p "$victim"
ln -sfn "$victim" "$TOPO_DIR/$next.0"
out=$(timeout 60 srun --quiet -w n1 -N1 -n1 --gpus-per-node=1 --dl-train bash -c 'echo "topo=$NCCL_TOPO_FILE"; test -f "$NCCL_TOPO_FILE" && echo FILE' 2>&1)
if [[ -z $(ls -A "$victim") && $out == *"topo=$TOPO_DIR/$next.0/nccl_topo.xml"* && $out == *FILE* && ! -L $TOPO_DIR/$next.0 ]]; then
  ok "a symlink at the step directory's path is replaced, its target untouched"
else not_ok "symlink at step dir"; { echo "$out"; ls -la "$victim" "$TOPO_DIR"; } | diag; fi

chmod 777 "$TOPO_DIR"  # n1's: the step must land there (another test's job may hold n1 a moment)
out=$(timeout 60 srun --quiet -w n1 -N1 -n1 --gpus-per-node=1 --dl-train bash -c 'echo RAN' 2>&1); rc=$?
chmod 755 "$TOPO_DIR"
if ((rc != 0)) && [[ $out != *RAN* && $out == *"must be owned by root and not writable by group or others"* ]]; then ok "a world-writable topo_dir is refused"; else not_ok "writable topo_dir (rc=$rc)"; echo "$out" | diag; fi

out=$(timeout 60 srun --quiet -N2 --ntasks-per-node=2 --gpus-per-node=2 --dl-train=verbose "$DLTRAIN" env 2>&1)
if [[ $out == *"topology of n1: 4 GPU(s), 3 NIC(s), 2 NUMA node(s)"* && $out == *"GPU0     X      NV2    NV1    SYS    PIX      SYS      PHB      0              0"* && $out == *"node n2 task 1: GPU 1 (0000:05:00.0) cpus 0 (NUMA-local) nic mlx5_0 (PIX)"* ]]; then
  ok "verbose: a topology matrix per node and each task's binding"
else not_ok "verbose report"; echo "$out" | diag; fi
if [[ $out == *"all-reduce check passed (mpi, sum of ranks 6)"* ]] && grep -q '^3 .*n2 .* 1 .*1 .*1 .*0 .*nccl_topo.xml' <<<"$out"; then ok "dltrain env under --dl-train: ranks see GPU, CPUs and topology file"; else not_ok "dltrain env under --dl-train"; echo "$out" | diag; fi

# A task cannot write in its step directory (root's); a user's tree left in a step directory of the
# same job.step id (an earlier version of the plugin handed the directory to the user, or a
# slurmstepd died) is removed before the step, at any depth (70 levels of long names: far beyond
# PATH_MAX), as root and without following a link out of it, and never blocks the step.
if id nobody >/dev/null 2>&1; then
  victim=$WORK/victim2; rm -rf "$victim"; mkdir -p "$victim"; echo keep > "$victim/keep.txt"
  next=$(scontrol show config | sed -n 's/^NEXT_JOB_ID *= *//p')
  old=$TOPO_DIR/$next.0
  mkdir -p "$old/sub/deeper" && head -c 10M /dev/zero > "$old/sub/deeper/big" && ln -s "$victim" "$old/sub/out" &&
    ln -s "$victim/keep.txt" "$old/outfile" && mkfifo "$old/fifo" && mkdir "$old/forged"$'\n'"dltrain: line" &&
    (cd "$old" && for i in $(seq 70); do mkdir "$(printf 'l%.0s' $(seq 100))" && cd l* || exit 1; done) &&
    chown -R nobody "$old" && chmod 000 "$old/sub/deeper"
  out=$(timeout 60 runuser -u nobody -- srun --quiet -w n1 -N1 -n1 --gpus-per-node=1 --dl-train bash -c '
    d=$(dirname "$NCCL_TOPO_FILE"); mkdir "$d/sub" 2>/dev/null && echo WROTE; LC_ALL=C ls -A "$d"' 2>&1); rc=$?
  # slurmstepd removes the step's folder after srun has returned: wait for it (bounded, 20 s; a
  # loaded machine once saw it still there at the first look)
  for _ in $(seq 200); do [[ -e $old || -n $(ls -A "$TOPO_DIR") ]] || break; sleep 0.1; done
  # the folder holds the topology file and slurmstepd's lock (root's, 0600), nothing the task made
  if ((rc == 0)) && [[ $out == $'.stepd.lock\nnccl_topo.xml' && ! -e $old && $(cat "$victim/keep.txt") == keep && $(ls -A "$victim") == keep.txt &&
    -z $(ls -A "$TOPO_DIR") ]]; then
    ok "a stale user's tree of the step's id (70 levels, 10 MB, links out, FIFO, mode 000, a newline name) is removed first, link targets untouched; the task cannot write there"
  else not_ok "user's tree in a stale step directory (rc=$rc)"; { echo "$out"; ls -la "$TOPO_DIR" "$victim"; } 2>&1 | head -30 | diag; fi
else ok "# SKIP no 'nobody' user"; fi
next=$(scontrol show config | sed -n 's/^NEXT_JOB_ID *= *//p')
mkdir -p "$TOPO_DIR/$next.0/old/nested"; echo old > "$TOPO_DIR/$next.0/old/nested/file"
out=$(timeout 60 srun --quiet -w n1 -N1 -n1 --gpus-per-node=1 --dl-train bash -c 'LC_ALL=C ls -A "$(dirname "$NCCL_TOPO_FILE")"' 2>&1); rc=$?
if ((rc == 0)) && [[ $out == $'.stepd.lock\nnccl_topo.xml' && ! -e $TOPO_DIR/$next.0 ]] && grep -q "removed a stale $TOPO_DIR/$next.0 left by an earlier step of the same id" "$DIR/log/slurmd-n1.log"; then
  ok "a stale step directory of the same id (nested) is replaced, and slurmd's log says so"
else not_ok "stale step directory (rc=$rc)"; { echo "$out"; ls -laR "$TOPO_DIR"; grep dltrain "$DIR/log/slurmd-n1.log" | tail -3; } 2>&1 | head -30 | diag; fi

# --dl-train through the environment variable Slurm uses to carry it: srun names a bad value; so
# does every task when srun never checked it (an srun whose plugstack lacks the plugin).
out=$(_SLURM_SPANK_OPTION_dltrain_dl_train=bind=numa timeout 60 srun --quiet -N1 -n1 --gpus-per-node=1 bash -c 'echo RAN' 2>&1); rc=$?
if ((rc != 0)) && [[ $out != *RAN* && $out == *"bad value 'bind=numa' (valid: bind=closest|none) (given in the environment as _SLURM_SPANK_OPTION_dltrain_dl_train)"* ]]; then
  ok "a bad --dl-train value in the environment: srun names it before the step starts"
else not_ok "environment --dl-train in srun (rc=$rc)"; echo "$out" | diag; fi
mkdir -p "$WORK/noplug"; : > "$WORK/noplug/plugstack.conf"
sed "s#^PlugStackConfig=.*#PlugStackConfig=$WORK/noplug/plugstack.conf#" "$SLURM_CONF" > "$WORK/noplug/slurm.conf"
cp "$(dirname "$SLURM_CONF")/gres.conf" "$WORK/noplug/" 2>/dev/null || true
out=$(SLURM_CONF=$WORK/noplug/slurm.conf _SLURM_SPANK_OPTION_dltrain_dl_train=bind=numa timeout 60 srun --quiet -N2 -n2 --gpus-per-node=1 bash -c 'echo RAN' 2>&1); rc=$?
if ((rc != 0)) && [[ $out != *RAN* && $(grep -c "dltrain: --dl-train: bad value 'bind=numa' (valid: bind=closest|none)" <<<"$out") -eq 2 && $out != *"Plugin initialization failed"* ]]; then
  ok "the same value never checked by srun: each task names it (not 'Plugin initialization failed'), exit $rc"
else not_ok "environment --dl-train in slurmstepd (rc=$rc)"; echo "$out" | diag; fi
# The batch step gets the value too; failing it would drain the node ("batch job complete failure").
out=$(_SLURM_SPANK_OPTION_dltrain_dl_train=bind=numa timeout 60 sbatch --quiet --wait -w n1 -N1 -o /dev/null --wrap true 2>&1); rc=$?
if ((rc == 0)) && [[ $(sinfo -h -n n1 -o %t) == idle ]]; then ok "a batch job given a bad value in the environment leaves its node idle"
else not_ok "batch step with a bad environment value (rc=$rc, n1 $(sinfo -h -n n1 -o %t))"; { echo "$out"; sinfo -R; } | diag; fi

# A site without a GPU driver: steps without GPUs are fine even with enable=always; steps with
# GPUs fail with a message about NVML. plugstack.conf is re-read by every new step.
cp "$DIR/etc/plugstack.conf" "$WORK/plugstack.saved"
sed -i 's|nvml_lib=[^ ]*|nvml_lib=/nonexistent/libnvidia-ml.so.1|; s|$| enable=always|' "$DIR/etc/plugstack.conf"
out=$(timeout 60 srun --quiet -N2 -n2 bash -c 'echo "ok ${DLT_OPTS:-unset}"' 2>&1); rc=$?
if ((rc == 0)) && [[ $(grep -c '^ok bind=closest' <<<"$out") -eq 2 ]]; then ok "enable=always, no GPU driver, no GPUs: the step runs"; else not_ok "enable=always without GPUs (rc=$rc)"; echo "$out" | diag; fi
out=$(timeout 60 srun --quiet -N1 -n1 --gpus-per-node=1 --dl-train bash -c 'echo RAN' 2>&1); rc=$?
cp "$WORK/plugstack.saved" "$DIR/etc/plugstack.conf"
if ((rc != 0)) && [[ $out != *RAN* && $out == *"this step has GPUs but the GPU driver's NVML cannot be used"* ]]; then ok "GPUs requested but no NVML: a clear error"; else not_ok "GPUs without NVML (rc=$rc)"; echo "$out" | diag; fi

sleep 1
check "every node idle after the failed steps (a plugin error fails the job, not the node)" bash -c '[[ $(sinfo -h -N -o "%t" | sort -u) == idle ]]'
exit 0
