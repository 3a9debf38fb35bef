#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A plugstack line whose site arguments the plugin refuses (default_bind=numa, a typo), in the
# Debian layout (plugstack.conf includes plugstack.conf.d/*.conf) on a two-node cluster: steps
# without --dl-train run as before; srun and sbatch --dl-train are refused naming the file and line
# and `dltrain-topo --check-plugstack`; a node whose line is bad fails a --dl-train step that srun
# (reading a good file) let through, saying the same in the task's stderr; slurmd's log says the
# line's enable=always is not applied; dltrain-topo --check-plugstack exits 1 naming the line (0
# and OK once it is fixed), and --dl-train works again with the fixed line.
. "$(dirname "$0")/lib.sh"
cluster_up 2 31
tap_plan 9
cd /tmp || exit 1
DIR=$DLT_CLUSTER_DIR
TOPO=$DLT_BUILDDIR/dltrain-topo
GOOD_LINE=$(cat "$DIR/etc/plugstack.conf")

# New steps read plugstack.conf (and its includes) without a slurmd restart.
mkdir -p "$DIR/etc/plugstack.conf.d"
printf '# site plugins\ninclude plugstack.conf.d/*.conf\n' > "$DIR/etc/plugstack.conf"
printf '# dltrain\n\nrequired %s/lib/spank_dltrain.so default_bind=numa enable=always  # typo\n' "$DIR" \
  > "$DIR/etc/plugstack.conf.d/dltrain.conf"
WHERE="$DIR/etc/plugstack.conf.d/dltrain.conf:3"
REFUSAL="plugstack.conf default_bind='numa' invalid (closest|none)"

out=$(timeout 60 srun --quiet -N2 -n2 bash -c 'echo "ran on $SLURMD_NODENAME opts=${DLT_OPTS:-unset}"' 2>&1); rc=$?
if ((rc == 0)) && [[ $(grep -c '^ran on n[12] opts=unset$' <<<"$out") -eq 2 && $out != *dltrain* ]]; then
  ok "srun without --dl-train runs on both nodes, untouched (no DLT_OPTS, enable=always not applied) and silent"
else not_ok "plain srun broken by the bad line (rc=$rc)"; echo "$out" | diag; fi

out=$(timeout 60 srun --quiet -N1 --gpus-per-node=1 --dl-train bash -c 'echo task ran' 2>&1); rc=$?
if ((rc != 0)) && [[ $out == *"--dl-train is unavailable on this cluster: $WHERE, which loads spank_dltrain.so, is refused: $REFUSAL"* &&
  $out == *'dltrain-topo --check-plugstack'* && $out != *"task ran"* ]]; then
  ok "srun --dl-train is refused naming $WHERE, the refusal and dltrain-topo --check-plugstack"
else not_ok "srun --dl-train with a bad site line (rc=$rc)"; fi
echo "$out" | diag

out=$(timeout 60 sbatch --dl-train -N1 --gpus-per-node=1 -o /dev/null --wrap true 2>&1); rc=$?
if ((rc != 0)) && [[ $out == *"$WHERE"*"$REFUSAL"*'dltrain-topo --check-plugstack'* && $out != *"Submitted batch job"* ]]; then
  ok "sbatch --dl-train is refused at submission with the same words"
else not_ok "sbatch --dl-train with a bad site line (rc=$rc)"; echo "$out" | diag; fi

# srun reads a copy of slurm.conf whose plugstack line is good; the nodes keep the bad one.
sed "s|^PlugStackConfig=.*|PlugStackConfig=$WORK/good-plugstack.conf|" "$DIR/etc/slurm.conf" > "$WORK/slurm-good.conf"
echo "$GOOD_LINE" > "$WORK/good-plugstack.conf"
out=$(SLURM_CONF=$WORK/slurm-good.conf timeout 60 srun --quiet -N1 --gpus-per-node=1 --dl-train bash -c 'echo task ran' 2>&1); rc=$?
if ((rc != 0)) && [[ $out == *"dltrain: --dl-train is unavailable on this cluster: $WHERE"*"$REFUSAL"* && $out != *"task ran"* ]]; then
  ok "a node with the bad line fails a --dl-train step that srun let through, naming the node's $WHERE"
else not_ok "node-side refusal (rc=$rc)"; fi
echo "$out" | diag

if grep -q "dltrain: --dl-train is unavailable on this cluster: $WHERE.*the line's enable=always is not applied: steps without --dl-train run without dltrain's setup" "$DIR/log/slurmd-n1.log"; then
  ok "slurmd's log names the line and says enable=always is not applied"
else not_ok "slurmd's log"; grep dltrain "$DIR/log/slurmd-n1.log" | tail -5 | diag; fi

out=$("$TOPO" --check-plugstack "$DIR/etc/plugstack.conf" 2>&1); rc=$?
if ((rc == 1)) && grep -qxF "$WHERE: $REFUSAL" <<<"$out"; then
  ok "dltrain-topo --check-plugstack FILE exits 1 with '$WHERE: $REFUSAL'"
else not_ok "check of the bad line (rc=$rc)"; echo "$out" | diag; fi

# No FILE: PlugStackConfig from $SLURM_CONF, as Slurm finds it.
out=$("$TOPO" --check-plugstack 2>&1); rc=$?
if ((rc == 1)) && [[ $out == *"checking $DIR/etc/plugstack.conf (PlugStackConfig in $SLURM_CONF)"* ]] &&
  grep -qxF "$WHERE: $REFUSAL" <<<"$out"; then
  ok "dltrain-topo --check-plugstack without FILE reads PlugStackConfig from \$SLURM_CONF"
else not_ok "check without FILE (rc=$rc)"; echo "$out" | diag; fi

# Fixed: the cluster's own line (its fake GPU driver and fixture node) in the snippet.
printf '# dltrain\n\n%s\n' "$GOOD_LINE" > "$DIR/etc/plugstack.conf.d/dltrain.conf"
out=$("$TOPO" --check-plugstack "$DIR/etc/plugstack.conf" 2>&1); rc=$?
if ((rc == 0)) && grep -q "^$WHERE: OK: required $DIR/lib/spank_dltrain.so: default_bind=closest .*topo_dir=$DIR/run/%n/dltrain" <<<"$out"; then
  ok "the fixed line: exit 0, '$WHERE: OK' with the effective settings"
else not_ok "check of the fixed line (rc=$rc)"; echo "$out" | diag; fi

out=$(timeout 60 srun --quiet -N1 --dl-train=gpus=none bash -c 'echo "opts=$DLT_OPTS"' 2>&1); rc=$?
if ((rc == 0)) && [[ $out == *"opts=bind=closest,gpus=none,nccl=auto,nic=auto"* ]]; then
  ok "with the fixed line --dl-train steps run again"
else not_ok "--dl-train after the fix (rc=$rc)"; echo "$out" | diag; fi
exit 0
