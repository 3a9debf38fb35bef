#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The torch.distributed contract from the plugin, with real PyTorch: a DDP program that only calls
# init_process_group("gloo") (env://) runs under srun --dl-train=gpus=none on two nodes, every rank
# given RANK/WORLD_SIZE/LOCAL_RANK/LOCAL_WORLD_SIZE/GROUP_RANK as Slurm places it and one
# MASTER_ADDR:MASTER_PORT (Slurm's reserved step port here: MpiParams=ports in the test cluster);
# the same program without --dl-train fails for want of RANK (what the contract fixes); the derived
# port (--resv-ports=0) works too; a user's own MASTER_PORT is used as given; two steps of one
# allocation on the same nodes at the same time both finish, with reserved and with derived ports;
# dltrain train on the CPU backend runs under gpus=none; the PyTorch job template runs through
# sbatch with no CPU count given (each task gets the node's CPUs / its tasks there), and so does a
# job script with a bare `#SBATCH --dl-train`; a step without GPUs and without gpus=none is still
# refused; doc/pytorch.md's torchrun recipe (one task per node, two workers each, gpus=step,bind=none)
# trains, every worker on the task's whole CPU set, where the default binding would put both workers
# on the first GPU's NUMA node. Needs DLT_TORCH_PYTHON with torch (contrib/install-torch.sh).
. "$(dirname "$0")/lib.sh"
PY=${DLT_TORCH_PYTHON:-/opt/torchvenv/bin/python}
"$PY" -c 'import torch.distributed' 2>/dev/null || skip_all "no Python with torch (set DLT_TORCH_PYTHON; contrib/install-torch.sh)"
cluster_up 2 12
tap_plan 12
SCRIPT=$DLT_SRCDIR/tests/torch/ddp_contract.py
DLTRAIN=$DLT_BUILDDIR/trainer/dltrain
export GLOO_SOCKET_IFNAME=lo # every "node" is this machine; the plugin leaves gloo's interface to the user
rm -rf "$WORK" && mkdir -p "$WORK"

# ddp_ok OUTPUT N: N ranks each printed once, ranks 0..N-1 matching SLURM_PROCID, the sum over the
# ranks, one weight checksum and one master address everywhere.
ddp_ok() {
  python3 - "$1" "$2" <<'PYEOF'
import re, sys
out, n = sys.argv[1], int(sys.argv[2])
rows = [dict(re.findall(r"(\w+)=(\S+)", l)) for l in out.splitlines() if l.startswith("ddp ")]
ok = (len(rows) == n and sorted(int(r["rank"]) for r in rows) == list(range(n)) and all(r["rank"] == r["procid"] for r in rows)
      and all(int(r["world"]) == n and int(r["sum"]) == n * (n - 1) // 2 for r in rows)
      and len({r["weights"] for r in rows}) == 1 and len({r["master"] for r in rows}) == 1)
print("ranks %d, weights %s, master %s" % (len(rows), sorted({r.get("weights") for r in rows}), sorted({r.get("master") for r in rows})))
sys.exit(0 if ok else 1)
PYEOF
}

out=$(timeout 120 srun --quiet -N2 --ntasks-per-node=2 --mpi=pmix --dl-train=gpus=none "$PY" "$SCRIPT" 2>&1); rc=$?
if ((rc == 0)) && why=$(ddp_ok "$out" 4) && [[ $(grep -c "local=[01]/2 group=[01]" <<<"$out") == 4 ]]; then
  ok "PyTorch DDP (gloo, env://) on 2 nodes x 2 tasks under --dl-train=gpus=none: $why"
else not_ok "PyTorch DDP under --dl-train (rc=$rc)"; echo "$out" | diag; fi

out=$(timeout 120 srun --quiet -N2 --ntasks-per-node=1 --mpi=pmix "$PY" "$SCRIPT" 2>&1); rc=$?
if ((rc != 0)) && [[ $out == *"RANK expected, but not set"* ]]; then
  ok "the same program without --dl-train fails for want of RANK (what the contract fixes)"
else not_ok "without --dl-train (rc=$rc)"; echo "$out" | tail -5 | diag; fi

out=$(timeout 120 srun --quiet -N2 --ntasks-per-node=1 --mpi=pmix --resv-ports=0 --dl-train=gpus=none bash -c \
  'echo "from=$DLT_MASTER_PORT_FROM port=$MASTER_PORT"; exec '"$PY $SCRIPT" 2>&1); rc=$?
port=$(grep -o -m1 'port=[0-9]*' <<<"$out" | cut -d= -f2)
if ((rc == 0 && port >= 20000 && port < 30000)) && why=$(ddp_ok "$out" 2) && [[ $(grep -c "from=derived" <<<"$out") == 2 ]]; then
  ok "no reserved ports: the derived port $port (job, step) serves DDP: $why"
else not_ok "derived port (rc=$rc)"; echo "$out" | diag; fi

out=$(MASTER_PORT=18977 timeout 120 srun --quiet -N2 --ntasks-per-node=1 --mpi=pmix --dl-train=gpus=none "$PY" "$SCRIPT" 2>&1); rc=$?
if ((rc == 0)) && why=$(ddp_ok "$out" 2) && [[ $why == *":18977"* ]]; then ok "the user's own MASTER_PORT=18977 is used as given: $why"
else not_ok "user MASTER_PORT (rc=$rc)"; echo "$out" | diag; fi

# Two steps of one allocation on the same two nodes at once, reserved ports then derived ones.
for mode in reserved derived; do
  extra=; [[ $mode == derived ]] && extra=--resv-ports=0
  out=$(timeout 180 salloc --quiet -N2 bash -c "
    srun --quiet --exact -N2 -n2 -c1 --mpi=pmix $extra --dl-train=gpus=none $PY $SCRIPT >$WORK/a.$mode 2>&1 & a=\$!
    srun --quiet --exact -N2 -n2 -c1 --mpi=pmix $extra --dl-train=gpus=none $PY $SCRIPT >$WORK/b.$mode 2>&1 & b=\$!
    wait \$a; ra=\$?; wait \$b; rb=\$?; echo \"rc \$ra \$rb\"" 2>&1)
  a=$(cat "$WORK/a.$mode"); b=$(cat "$WORK/b.$mode")
  pa=$(grep -o -m1 'master=[^ ]*' <<<"$a"); pb=$(grep -o -m1 'master=[^ ]*' <<<"$b")
  if [[ $out == *"rc 0 0"* && -n $pa && $pa != "$pb" ]] && ddp_ok "$a" 2 >/dev/null && ddp_ok "$b" 2 >/dev/null; then
    ok "two concurrent DDP steps of one allocation on the same nodes ($mode ports): both finish, $pa and $pb"
  else not_ok "two concurrent steps, $mode ports ($out)"; { echo "$a"; echo "$b"; } | diag; fi
done

out=$(timeout 180 srun --quiet -N2 --ntasks-per-node=1 --mpi=pmix --dl-train=gpus=none "$DLTRAIN" train --backend cpu \
  --arch resnet18 --image 32 --classes 10 --batch 4 --synthetic-size 32 --steps 2 --log-every 1 2>&1); rc=$?
if ((rc == 0)) && [[ $out == *"step 2"* ]]; then ok "dltrain train on the CPU backend runs under --dl-train=gpus=none (2 ranks)"
else not_ok "dltrain train under gpus=none (rc=$rc)"; echo "$out" | tail -8 | diag; fi

# The job template, as a user submits it (its sizes scaled to this cluster), with this program.
rm -f "$WORK/ddp.out"
# No CPU count on the command line: the template's own request must fit these small nodes, and
# each task gets the node's CPUs (as slurm.conf gives them) over its 2 tasks.
node_cpus=$(scontrol show node n1 | grep -o 'CPUTot=[0-9]*' | cut -d= -f2)
job=$(cd "$WORK" && PATH=$DLT_BUILDDIR/trainer:$PATH PYTHON=$PY SCRIPT=$SCRIPT timeout 30 sbatch --parsable -N2 \
  --ntasks-per-node=2 --gpus-per-node=2 --output="$WORK/ddp.out" \
  "$DLT_SRCDIR/contrib/sbatch/pytorch-ddp.sbatch" 2>&1)
for _ in $(seq 180); do squeue -h -j "$job" 2>/dev/null | grep -q . || break; sleep 1; done
out=$(cat "$WORK/ddp.out" 2>/dev/null)
cpt=$((${node_cpus:-0} / 2))
if ((cpt >= 1)) && why=$(ddp_ok "$out" 4) && [[ $out == *"the contract agrees with PMIx's ranks"* ]] &&
   [[ $out == *"pytorch-ddp.sbatch: 2 task(s) per node, $cpt CPU(s) each (the job holds $node_cpus on n1)"* ]] &&
   [[ $(grep -c "^ddp .* cpt=$cpt\$" <<<"$out") == 4 ]]; then
  ok "contrib/sbatch/pytorch-ddp.sbatch through sbatch (2 nodes x 2 GPUs, no --cpus-per-task given): $cpt of the node's $node_cpus CPUs per task, dltrain env's contract check, then DDP: $why"
else not_ok "pytorch-ddp.sbatch (job $job, nodes of ${node_cpus:-?} CPUs)"; echo "$out" | tail -20 | diag; fi

# `#SBATCH --dl-train` with no value: Slurm hands it to srun as "(null)", which must mean "no options".
cat >"$WORK/bare.sbatch" <<'SH'
#!/bin/bash
#SBATCH --dl-train
srun --mpi=pmix bash -c 'echo "opts=$DLT_OPTS rank=$RANK"'
SH
rm -f "$WORK/bare.out"
job=$(cd "$WORK" && timeout 30 sbatch --parsable -N2 --ntasks-per-node=1 --gpus-per-node=1 --output="$WORK/bare.out" \
  "$WORK/bare.sbatch" 2>&1)
for _ in $(seq 120); do squeue -h -j "$job" 2>/dev/null | grep -q . || break; sleep 1; done
out=$(cat "$WORK/bare.out" 2>/dev/null)
if [[ $(grep -c "opts=bind=closest,gpus=task,nccl=auto,nic=auto rank=[01]" <<<"$out") == 2 && $out != *"(null)"* ]]; then
  ok "#SBATCH --dl-train with no value: the job's steps get the site defaults and the contract"
else not_ok "#SBATCH --dl-train with no value (job $job)"; echo "$out" | diag; fi

# doc/pytorch.md's torchrun recipe, scaled to 2 GPUs and 2 workers per node. Reference: the CPUs a
# task of the same shape gets from Slurm without --dl-train.
cpus_of='import os; print(",".join(str(c) for c in sorted(os.sched_getaffinity(0))))'
slurm_set=$(timeout 60 srun --quiet -N2 --ntasks-per-node=1 -c "${node_cpus:-1}" "$PY" -c "$cpus_of" 2>&1 | sort -u)
TORCHRUN='exec '"$(dirname "$PY")"'/torchrun --nnodes=$SLURM_NNODES --nproc-per-node=2 --rdzv-backend=c10d --rdzv-endpoint=$MASTER_ADDR:$MASTER_PORT '"$SCRIPT"
# torchrun_ok OUTPUT: 4 workers (2 per node) with ranks 0..3, one weight checksum, the sum over 4.
torchrun_ok() {
  python3 - "$1" <<'PYEOF'
import re, sys
rows = [dict(re.findall(r"(\w+)=(\S+)", l)) for l in sys.argv[1].splitlines() if l.startswith("ddp ")]
ok = (len(rows) == 4 and sorted(int(r["rank"]) for r in rows) == [0, 1, 2, 3] and all(int(r["world"]) == 4 and int(r["sum"]) == 6 for r in rows)
      and sorted(r["local"] for r in rows) == ["0/2", "0/2", "1/2", "1/2"] and len({r["weights"] for r in rows}) == 1)
print("workers %d, CPUs %s" % (len(rows), sorted({r.get("cpus") for r in rows})))
sys.exit(0 if ok else 1)
PYEOF
}
for bind in none closest; do
  opts=gpus=step; [[ $bind == none ]] && opts=gpus=step,bind=none
  out=$(timeout 240 srun --quiet -N2 --ntasks-per-node=1 -c "${node_cpus:-1}" --gpus-per-node=2 --mpi=pmix \
    --dl-train=$opts bash -c "$TORCHRUN" 2>&1); rc=$?
  why=$(torchrun_ok "$out"); tr_rc=$?
  worker_sets=$(grep '^ddp ' <<<"$out" | grep -o 'cpus=[^ ]*' | cut -d= -f2 | sort -u)
  if [[ $bind == none ]]; then
    if ((rc == 0 && tr_rc == 0)) && [[ -n $slurm_set && $(wc -l <<<"$slurm_set") == 1 && $worker_sets == "$slurm_set" ]]; then
      ok "torchrun recipe (--dl-train=gpus=step,bind=none, 2 nodes x 1 task x 2 workers): DDP trains, every worker on the task's whole CPU set ($slurm_set, as Slurm gives it): $why"
    else not_ok "torchrun recipe with bind=none (rc=$rc, workers on '${worker_sets//$'\n'/ }', Slurm's set '${slurm_set//$'\n'/ }')"; echo "$out" | tail -20 | diag; fi
  else
    # What the recipe's bind=none is for: the default binding pins the one task, and with it both
    # of its workers, to the first GPU's NUMA node (CPU 0 of the lab2 fixture).
    if ((rc == 0 && tr_rc == 0)) && [[ $worker_sets == 0 && $slurm_set != 0 ]]; then
      ok "the same recipe without bind=none: both workers of each node share the first GPU's NUMA CPUs ($worker_sets of $slurm_set), what the recipe's bind=none avoids"
    else not_ok "torchrun with the default binding (rc=$rc, workers on '${worker_sets//$'\n'/ }')"; echo "$out" | tail -20 | diag; fi
  fi
done

out=$(timeout 60 srun --quiet -N1 --mpi=pmix --dl-train true 2>&1); rc=$?
if ((rc != 0)) && [[ $out == *"needs GPUs"* && $out == *"--dl-train=gpus=none"* ]]; then
  ok "a step without GPUs is still refused by plain --dl-train, naming gpus=none"
else not_ok "GPU-less step without gpus=none (rc=$rc)"; echo "$out" | diag; fi
exit 0
