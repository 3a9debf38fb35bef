#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# spank_dltrain across steps on a real two-node cluster: a derived MASTER_PORT already held by
# another program on rank 0's node is said before the program starts.
. "$(dirname "$0")/lib.sh"
cluster_up 2 23
tap_plan 1
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

exit 0
