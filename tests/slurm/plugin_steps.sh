#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# spank_dltrain across steps on a real two-node cluster: a derived MASTER_PORT already held by
# another program on rank 0's node is said before the program starts; an inner srun started by a
# --dl-train task does not inherit the outer step's contract (cleared, saying which, unless the user
# changed a value); the user's values, however long, win and reach the terminal only escaped.
. "$(dirname "$0")/lib.sh"
cluster_up 2 23
tap_plan 6
cd /tmp

# The derived port of a job's next step is the one after its current step's (rank_env.h): hold it
# with a listener, then start that step.
LISTEN='import socket,sys,time
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("", int(sys.argv[1]))); s.listen(1)
open(sys.argv[2], "w").close(); time.sleep(60)'
out=$(timeout 120 salloc --quiet -N1 bash -c '
  p=$(srun --quiet -N1 -n1 --resv-ports=0 --dl-train=gpus=none bash -c "echo \$MASTER_PORT")
  n=$((p + 1)); ((n == 30000)) && n=20000
  rm -f '"$WORK"'/ready
  python3 -c '"'$LISTEN'"' $n '"$WORK"'/ready & l=$!
  for i in $(seq 50); do [[ -e '"$WORK"'/ready ]] && break; sleep 0.1; done
  srun --quiet -N1 -n1 --resv-ports=0 --dl-train=gpus=none bash -c "echo port=\$MASTER_PORT from=\$DLT_MASTER_PORT_FROM" 2>&1
  kill $l; echo "held=$n"' 2>&1)
held=$(grep -o 'held=[0-9]*' <<<"$out" | cut -d= -f2)
if [[ -n $held && $out == *"port=$held from=derived"* && $out == *"dltrain: warning: MASTER_PORT=$held (derived from the job and step ids) is already in use on rank 0's node"*"srun --resv-ports"*"MpiParams=ports="* ]]; then
  ok "a derived MASTER_PORT ($held) held by another program on rank 0's node: rank 0 warns, naming --resv-ports and MpiParams=ports="
else not_ok "taken derived port not reported"; echo "$out" | diag; fi

# Nested steps: the outer task (one GPU, --dl-train) starts inner steps of its allocation (--overlap:
# the outer step holds the node's CPUs).
SHOW='echo "inner rank=${RANK:-unset} world=${WORLD_SIZE:-unset} port=${MASTER_PORT:-unset} topo=${NCCL_TOPO_FILE:-unset} opts=${DLT_OPTS:-unset} local=${DLT_LOCAL_RANK:-unset}"'
nested() {
  timeout 120 salloc --quiet -N1 -n2 --gpus-per-node=1 bash -c '
    srun --quiet -N1 -n1 --gpus-per-node=1 --resv-ports=0 --dl-train bash -c '"'"'
      echo "outer rank=$RANK world=$WORLD_SIZE port=$MASTER_PORT topo=$NCCL_TOPO_FILE"
      '"$1"'
      timeout 60 srun --overlap --quiet -N1 '"$2"' bash -c '"'"'"'"'"'"'"'"''"$SHOW"''"'"'"'"'"'"'"'"' 2>&1
    '"'"'' 2>&1
}
out=$(nested : "-n1 --resv-ports=0")
if [[ $out == *"outer rank=0 world=1 port=2"*"topo=/"* && $out == *"inner rank=unset world=unset port=unset topo=unset opts=unset local=unset"* &&
  $out == *"dltrain: cleared "*"RANK"*"MASTER_PORT"*"NCCL_TOPO_FILE"*"set for the outer step"* ]]; then
  ok "an inner srun without --dl-train: the outer step's RANK, WORLD_SIZE, MASTER_PORT, NCCL_TOPO_FILE, DLT_* cleared, and said"
else not_ok "inner step without --dl-train inherits the outer contract"; echo "$out" | diag; fi

out=$(nested : "-n2 --resv-ports=0 --dl-train=gpus=none")
outer_port=$(grep -o -m1 'outer rank=0 world=1 port=[0-9]*' <<<"$out" | grep -o '[0-9]*$')
if [[ -n $outer_port && $out == *"inner rank=0 world=2 port="*"topo=unset opts=bind=closest,gpus=none"* &&
  $out == *"inner rank=1 world=2 port="* && $out != *"inner rank=0 world=2 port=$outer_port "* ]]; then
  ok "an inner --dl-train step of other sizes gets its own RANK, WORLD_SIZE, MASTER_PORT, no outer NCCL_TOPO_FILE"
else not_ok "inner --dl-train step of other sizes"; echo "$out" | diag; fi

out=$(nested "export MASTER_PORT=18999" "-n1 --resv-ports=0")
if [[ $out == *"inner rank=unset world=unset port=18999 topo=unset"* && $out == *"kept MASTER_PORT"* ]]; then
  ok "a value the user changed in the outer task (MASTER_PORT=18999) is kept in the inner step, and said"
else not_ok "user's own value in a nested step"; echo "$out" | diag; fi

# A user's value longer than the plugin's buffer (spank_getenv: ESPANK_NOSPACE) is still the user's.
long=$(printf '1%.0s' $(seq 300))
out=$(MASTER_PORT=$long NCCL_IB_HCA=$long timeout 60 srun --quiet -N1 -n1 --gpus-per-node=1 --dl-train bash -c 'echo "port=${#MASTER_PORT} hca=${#NCCL_IB_HCA}"' 2>&1)
if [[ $out == "port=300 hca=300" ]]; then ok "300-byte MASTER_PORT and NCCL_IB_HCA of the user's are kept, not overwritten"
else not_ok "long user values overwritten"; echo "$out" | diag; fi

# The outer step's name in DLT_STEP is the user's environment: shown escaped.
out=$(DLT_STEP=$'1.0\ndltrain: forged' DLT_SET=DLT_TEST_VAR:0000000000000000 DLT_TEST_VAR=x timeout 60 srun --quiet -N1 -n1 bash -c 'echo "var=$DLT_TEST_VAR"' 2>&1)
if [[ $out == *'set for the outer step 1.0\x0adltrain: forged, this is step'*'kept DLT_TEST_VAR'* && $out == *var=x* ]] && ! grep -q '^dltrain: forged' <<<"$out"; then
  ok "a newline in DLT_STEP reaches the task's stderr escaped"
else not_ok "DLT_STEP shown raw"; echo "$out" | diag; fi

exit 0
