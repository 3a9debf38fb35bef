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
# sbatch, and so does a job script with a bare `#SBATCH --dl-train`; a step without GPUs and without
# gpus=none is still refused. Needs DLT_TORCH_PYTHON with torch (contrib/install-torch.sh).
. "$(dirname "$0")/lib.sh"
PY=${DLT_TORCH_PYTHON:-/opt/torchvenv/bin/python}
"$PY" -c 'import torch.distributed' 2>/dev/null || skip_all "no Python with torch (set DLT_TORCH_PYTHON; contrib/install-torch.sh)"
cluster_up 2 12
tap_plan 10
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
job=$(cd "$WORK" && PATH=$DLT_BUILDDIR/trainer:$PATH PYTHON=$PY SCRIPT=$SCRIPT timeout 30 sbatch --parsable -N2 \
  --ntasks-per-node=2 --gpus-per-node=2 --cpus-per-task=1 --output="$WORK/ddp.out" \
  "$DLT_SRCDIR/contrib/sbatch/pytorch-ddp.sbatch" 2>&1)
for _ in $(seq 180); do squeue -h -j "$job" 2>/dev/null | grep -q . || break; sleep 1; done
out=$(cat "$WORK/ddp.out" 2>/dev/null)
if why=$(ddp_ok "$out" 4) && [[ $out == *"the contract agrees with PMIx's ranks"* ]]; then
  ok "contrib/sbatch/pytorch-ddp.sbatch through sbatch (2 nodes x 2 GPUs): dltrain env's contract check, then DDP: $why"
else not_ok "pytorch-ddp.sbatch (job $job)"; echo "$out" | tail -20 | diag; fi

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

out=$(timeout 60 srun --quiet -N1 --mpi=pmix --dl-train true 2>&1); rc=$?
if ((rc != 0)) && [[ $out == *"needs GPUs"* && $out == *"--dl-train=gpus=none"* ]]; then
  ok "a step without GPUs is still refused by plain --dl-train, naming gpus=none"
else not_ok "GPU-less step without gpus=none (rc=$rc)"; echo "$out" | diag; fi
exit 0
