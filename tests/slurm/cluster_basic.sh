#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# srun runs with --quiet everywhere: its informational lines ("job N queued and waiting for
# resources" while the previous job is being cleaned up) would mix into the compared output.
# The local cluster itself: two slurmd answer, srun -N2 -n4 places tasks as Slurm says, the
# plugin's option is offered, a bad --dl-train value is refused before anything runs.
. "$(dirname "$0")/lib.sh"
cluster_up 2 1
tap_plan 8

check "two nodes idle" bash -c '[[ $(sinfo -h -N -o "%N %t" | sort | tr "\n" " ") == "n1 idle n2 idle " ]]'

out=$(timeout 60 srun --quiet -N2 -n4 --ntasks-per-node=2 bash -c 'echo "$SLURM_PROCID $SLURM_NODEID $SLURMD_NODENAME $SLURM_LOCALID"' 2>&1 | sort -n)
expect=$'0 0 n1 0\n1 0 n1 1\n2 1 n2 0\n3 1 n2 1'
if [[ $out == "$expect" ]]; then ok "srun -N2 -n4: SLURM_PROCID/NODEID/LOCALID as tasks see them"; else not_ok "srun -N2 -n4 placement"; echo "$out" | diag; fi

out=$(timeout 60 srun --quiet -N2 -n4 --gpus-per-node=2 bash -c 'echo "$CUDA_VISIBLE_DEVICES"' 2>&1 | sort -u)
if [[ $out == "0,1" ]]; then ok "fake GPU gres: --gpus-per-node=2 gives CUDA_VISIBLE_DEVICES=0,1"; else not_ok "fake GPU gres"; echo "$out" | diag; fi

check "srun --help lists --dl-train" bash -c 'srun --help 2>&1 | grep -q -- "--dl-train"'

out=$(timeout 60 srun --quiet -N1 -n1 --dl-train=bind=numa bash -c 'echo RAN' 2>&1); rc=$?
if ((rc != 0)) && [[ $out != *RAN* && $out == *"bind=numa"* && $out == *"closest|none"* ]]; then
  ok "bad --dl-train value refused in srun, naming the token and valid values"
else not_ok "bad --dl-train value refused (rc=$rc)"; echo "$out" | diag; fi

out=$(timeout 60 srun --quiet -N2 -n2 --gpus-per-node=1 --dl-train=verbose bash -c 'echo "$DLT_OPTS $DLT_LOCAL_RANK"' 2>&1 | sort -u)
if [[ $out == *"bind=closest,gpus=task,nccl=auto,nic=auto,verbose 0"* ]]; then ok "--dl-train reaches the tasks (DLT_OPTS)"; else not_ok "--dl-train reaches tasks"; echo "$out" | diag; fi

out=$(timeout 60 srun --quiet -N2 -n2 bash -c 'echo "${DLT_OPTS:-unset}"' 2>&1 | sort -u)
if [[ $out == "unset" ]]; then ok "without --dl-train the plugin sets nothing"; else not_ok "plugin inert without option"; echo "$out" | diag; fi

sleep 1
check "nodes idle after the steps (nothing drained)" bash -c '[[ $(sinfo -h -N -o "%t" | sort -u) == idle ]]'
exit 0
