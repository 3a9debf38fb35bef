#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# A real container runtime: Charliecloud's ch-run (Debian's charliecloud-runtime: unprivileged,
# no daemon) as the task's command, `srun --dl-train ch-run [-b ...] IMAGE -- CMD`, on 2 nodes x 2
# tasks. The image is made here, without a registry: a skeleton root (merged /usr, its own /etc
# and /run) into which the host's /usr and the build tree are bound. Checked: the rank contract
# reaches the task inside unchanged; the host's topo_dir (under /run) is not there, and dltrain env
# fails naming each node's file and the ch-run bind to add; with that bind dltrain env passes and a
# dltrain train step runs inside over the host communicator.
. "$(dirname "$0")/lib.sh"
command -v ch-run >/dev/null || skip_all "ch-run not installed (contrib/install-deps.sh installs charliecloud-runtime)"
export USER=${USER:-$(id -un)}
ch-checkns >/dev/null 2>&1 || skip_all "ch-checkns: this kernel does not give Charliecloud the namespaces it needs"
cluster_up 2 33
TOPO=/run/dltrain-test-$DLT_CLUSTER_PORT
trap 'cluster_down; rm -rf "$TOPO"' EXIT
tap_plan 5
DIR=$DLT_CLUSTER_DIR
CONF=$DIR/etc/plugstack.conf
DLTRAIN=$DLT_BUILDDIR/trainer/dltrain
cd /tmp || exit 1
rm -rf "$TOPO" && mkdir -m 0755 "$TOPO" || { echo "Bail out! cannot make $TOPO"; exit 1; }
sed -i "s|topo_dir=[^ ]*|topo_dir=$TOPO/%n|" "$CONF"

# The image: what a small Debian image has at its top, with /usr (and so /bin, /lib) from the host.
# ch-run binds only onto folders that exist in the image: the build tree's and the topology folders.
IMG=$WORK/img
rm -rf "$IMG" && mkdir -p "$IMG"/{usr,etc,dev,proc,sys,tmp,home,root,run,mnt,var/tmp} || exit 1
for l in bin sbin lib lib64; do ln -s "usr/$l" "$IMG/$l"; done
touch "$IMG"/etc/{passwd,group,hosts,resolv.conf}
cp -a /etc/alternatives "$IMG/etc/" 2>/dev/null
cp /etc/ld.so.cache "$IMG/etc/" 2>/dev/null
mkdir -p "$IMG$DLT_BUILDDIR" "$IMG$DLT_SRCDIR" "$IMG$TOPO/n1" "$IMG$TOPO/n2"
BINDS=(-b /usr:/usr -b "$DLT_BUILDDIR:$DLT_BUILDDIR")
[[ $DLT_SRCDIR != "$DLT_BUILDDIR" ]] && BINDS+=(-b "$DLT_SRCDIR:$DLT_SRCDIR")
CH=(ch-run "${BINDS[@]}")
SRUN=(srun --quiet -N2 --ntasks-per-node=2 --gpus-per-node=2 --mpi=pmix --dl-train)
CONTRACT='echo "$SLURM_PROCID $RANK $LOCAL_RANK $WORLD_SIZE $CUDA_VISIBLE_DEVICES $NCCL_TOPO_FILE $MASTER_ADDR:$MASTER_PORT"'

# 1. The contract inside the container is the one the host gives the same step's tasks.
host=$(timeout 90 "${SRUN[@]}" bash -c "$CONTRACT" 2>&1 | sort); rc1=$?
inside=$(timeout 90 "${SRUN[@]}" "${CH[@]}" "$IMG" -- /bin/sh -c "$CONTRACT; test -e \"\$NCCL_TOPO_FILE\" && echo FILE_SEEN || echo FILE_GONE" 2>&1)
rc=$?
strip() { sed -E 's|/[0-9]+\.0/nccl_topo.xml| STEP/nccl_topo.xml|; s|:[0-9]+$|:PORT|'; }
if ((rc == 0 && rc1 == 0)) && [[ $(grep -c . <<<"$host") == 4 && $(grep -c '^FILE_GONE$' <<<"$inside") == 4 &&
  "$(grep -v FILE_ <<<"$inside" | strip | sort)" == "$(strip <<<"$host")" && $host == *"$TOPO/n2/"* ]]; then
  ok "ch-run as the task's command: SLURM_PROCID, RANK, LOCAL_RANK, WORLD_SIZE, CUDA_VISIBLE_DEVICES, NCCL_TOPO_FILE and MASTER_ADDR reach the 4 tasks inside as on the host; the host's topo_dir is not in the image"
else not_ok "the contract inside ch-run (rc=$rc, host rc=$rc1)"; { echo "host:"; echo "$host"; echo "inside:"; echo "$inside"; } | diag; fi

# 2. Without the bind, dltrain env fails naming each node's file and the ch-run bind.
out=$(timeout 120 "${SRUN[@]}" "${CH[@]}" "$IMG" -- "$DLTRAIN" env 2>&1); rc=$?
if ((rc != 0)) && [[ $out == *"rank 0 (host n1): NCCL_TOPO_FILE=$TOPO/n1/"*"/nccl_topo.xml cannot be read here (No such file or directory)"* &&
  $out == *"rank 2 (host n2): NCCL_TOPO_FILE=$TOPO/n2/"* && $out == *"Charliecloud ch-run -b $TOPO/n1 "* &&
  $out == *"4 rank(s) cannot read their NCCL_TOPO_FILE"* ]]; then
  ok "ch-run without the bind of topo_dir: dltrain env fails, naming each node's file and 'ch-run -b $TOPO/nN'"
else not_ok "ch-run without the bind (rc=$rc)"; echo "$out" | grep -v mca_base | tail -15 | diag; fi

# 3. With the bind the message names (the node's topo_dir folder), dltrain env passes inside.
BOUND='exec ch-run -b "$(dirname "$(dirname "$NCCL_TOPO_FILE")")" "$@"'
out=$(timeout 120 "${SRUN[@]}" bash -c "$BOUND" - "${BINDS[@]}" "$IMG" -- "$DLTRAIN" env 2>&1); rc=$?
if ((rc == 0)) && [[ $out == *"4 rank(s) on 2 node(s)"* && $out == *"all-reduce check passed"* && $out != *"cannot be read here"* ]]; then
  ok "ch-run -b TOPO_DIR/nN: the file is read inside, dltrain env passes (4 ranks, 2 nodes, all-reduce checked)"
else not_ok "ch-run with the bind (rc=$rc)"; echo "$out" | grep -v mca_base | tail -15 | diag; fi

# 4. A training run inside: 2 steps of ResNet-18 on 4 ranks, the host communicator across the nodes.
out=$(timeout 300 "${SRUN[@]}" bash -c "$BOUND" - "${BINDS[@]}" "$IMG" -- "$DLTRAIN" train --synthetic --arch resnet18 \
  --image-size 64 --batch 4 --classes 10 --steps 2 --log-every 1 2>&1); rc=$?
if ((rc == 0)) && [[ $out == *"on 4 rank(s), batch 4 x 4 = 16"* && $out == *"step 2/2 loss"* && $out == *"done: 2 steps"* ]]; then
  ok "dltrain train inside ch-run on 2 nodes x 2 tasks: 2 steps of the global batch 16"
else not_ok "dltrain train inside ch-run (rc=$rc)"; echo "$out" | grep -v mca_base | tail -15 | diag; fi

# 5. Inside, the bound step folder is as the host has it: root's, 0750 (the job's group only).
out=$(timeout 60 srun --quiet -N1 -n1 --gpus-per-node=1 --dl-train bash -c "$BOUND" - "${BINDS[@]}" "$IMG" -- /bin/sh -c \
  'stat -c "%a %u" "$(dirname "$NCCL_TOPO_FILE")"; stat -c "%a %u" "$NCCL_TOPO_FILE"' 2>&1); rc=$?
if ((rc == 0)) && [[ $out == $'750 0\n640 0' ]]; then
  ok "inside ch-run the bound step folder and its file are root's, 0750 and 0640, as on the host"
else not_ok "modes inside ch-run (rc=$rc)"; echo "$out" | diag; fi
exit 0
