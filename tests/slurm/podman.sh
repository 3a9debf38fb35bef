#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# podman as the task's command (the pattern pyxis replaces): `srun --dl-train podman run ...` on
# 2 nodes x 2 tasks, with runc, an image imported here from a skeleton root (no registry) and its
# own storage under the test's folder. Run where podman is installed (it is not in the project's
# dependencies: its install takes minutes); skipped, saying so, elsewhere. podman passes only the
# variables named with --env: the flags below are the ones doc/site-install.md gives. Checked: the
# rank contract inside; without the bind of topo_dir, dltrain env fails naming the file and the
# podman -v to add; with it, dltrain env passes and dltrain train runs 2 steps.
. "$(dirname "$0")/lib.sh"
command -v podman >/dev/null || skip_all "podman not installed (optional: apt-get install podman; the README's suite runs Charliecloud instead)"
command -v runc >/dev/null || skip_all "runc not installed (contrib/install-deps.sh installs it)"
cluster_up 2 35
TOPO=/run/dltrain-test-$DLT_CLUSTER_PORT
PM_ROOT=$WORK/podman
# the test's own image storage, emptied by podman itself (it may hold mounts), then removed
trap 'cluster_down; rm -rf "$TOPO"; podman --root "$PM_ROOT/storage" --runroot "$PM_ROOT/run" rmi -a -f >/dev/null 2>&1; rm -rf "$PM_ROOT"' EXIT
tap_plan 4
DIR=$DLT_CLUSTER_DIR
DLTRAIN=$DLT_BUILDDIR/trainer/dltrain
cd /tmp || exit 1
rm -rf "$TOPO" && mkdir -m 0755 "$TOPO" || { echo "Bail out! cannot make $TOPO"; exit 1; }
sed -i "s|topo_dir=[^ ]*|topo_dir=$TOPO/%n|" "$DIR/etc/plugstack.conf"

# The image: a skeleton root (the host's /usr bound at run time), imported into storage of the
# test's own. The limits are set below the hard limits of this machine's tasks (podman's defaults
# are above them, and runc cannot raise them).
SKEL=$WORK/skel
rm -rf "$SKEL" "$PM_ROOT" && mkdir -p "$SKEL"/{usr,etc,dev,proc,sys,tmp,root,run} "$PM_ROOT" || exit 1
for l in bin sbin lib lib64; do ln -s "usr/$l" "$SKEL/$l"; done
cp -a /etc/alternatives "$SKEL/etc/" 2>/dev/null
PODMAN=(podman --root "$PM_ROOT/storage" --runroot "$PM_ROOT/run" --cgroup-manager=cgroupfs --runtime=runc)
tar -C "$SKEL" -cf - . | timeout 120 "${PODMAN[@]}" import - localhost/dlt-skel >/dev/null 2>"$WORK/import.err" ||
  { echo "Bail out! podman import failed: $(tail -2 "$WORK/import.err")"; exit 1; }
RUN=("${PODMAN[@]}" run --rm --network=host --ipc=host --ulimit nofile=1024:1024 --ulimit nproc=4096:4096
  -v /usr:/usr:ro -v "$DLT_BUILDDIR:$DLT_BUILDDIR:ro"
  --env 'SLURM_*' --env 'PMIX_*' --env 'OMPI_*' --env 'NCCL_*' --env 'DLT_*' --env RANK --env LOCAL_RANK
  --env WORLD_SIZE --env LOCAL_WORLD_SIZE --env GROUP_RANK --env CUDA_VISIBLE_DEVICES --env MASTER_ADDR
  --env MASTER_PORT --env OMP_NUM_THREADS)
[[ $DLT_SRCDIR != "$DLT_BUILDDIR" ]] && RUN+=(-v "$DLT_SRCDIR:$DLT_SRCDIR:ro")
# The task: podman with PMIx's folder bound (its server's socket and shared memory), and with
# TOPO=1 the node's topo_dir bound read-only at the same path.
TASK='a=(); [[ -n ${PMIX_SERVER_TMPDIR:-} ]] && a+=(-v "$PMIX_SERVER_TMPDIR:$PMIX_SERVER_TMPDIR")
d=$(dirname "$(dirname "$NCCL_TOPO_FILE")"); [[ $TOPO_BIND == 1 ]] && a+=(-v "$d:$d:ro")
exec "$@" "${a[@]}" localhost/dlt-skel "${CMD[@]}"'
SRUN=(srun --quiet -N2 --ntasks-per-node=2 --gpus-per-node=2 --mpi=pmix --dl-train)
in_podman() { # TOPO_BIND CMD...
  local bind=$1; shift
  TOPO_BIND=$bind timeout 300 "${SRUN[@]}" bash -c "CMD=(\"\${@:$((${#RUN[@]} + 1))}\"); set -- \"\${@:1:${#RUN[@]}}\"; $TASK" - "${RUN[@]}" "$@"
}
CONTRACT='echo "$SLURM_PROCID $RANK $LOCAL_RANK $WORLD_SIZE $CUDA_VISIBLE_DEVICES $NCCL_TOPO_FILE $MASTER_ADDR:$MASTER_PORT"'

# 1. The contract inside, as the host gives it to the same step's tasks.
host=$(timeout 90 "${SRUN[@]}" bash -c "$CONTRACT" 2>&1 | sort); rc1=$?
inside=$(in_podman 0 /bin/sh -c "$CONTRACT; test -e \"\$NCCL_TOPO_FILE\" && echo FILE_SEEN || echo FILE_GONE" 2>&1); rc=$?
strip() { sed -E 's|/[0-9]+\.0/nccl_topo.xml| STEP/nccl_topo.xml|; s|:[0-9]+$|:PORT|'; }
if ((rc == 0 && rc1 == 0)) && [[ $(grep -c '^FILE_GONE$' <<<"$inside") == 4 && $host == *"$TOPO/n2/"* &&
  "$(grep -v FILE_ <<<"$inside" | strip | sort)" == "$(strip <<<"$host")" ]]; then
  ok "podman run --env ...: the rank contract reaches the 4 tasks inside as on the host; the host's topo_dir is not there"
else not_ok "the contract inside podman (rc=$rc, host rc=$rc1)"; { echo "host:"; echo "$host"; echo "inside:"; echo "$inside"; } | diag; fi

# 2. Without the bind: dltrain env fails naming each node's file and the podman -v to add.
out=$(in_podman 0 "$DLTRAIN" env 2>&1); rc=$?
if ((rc != 0)) && [[ $out == *"rank 0 (host n1): NCCL_TOPO_FILE=$TOPO/n1/"*"cannot be read here (No such file or directory)"* &&
  $out == *"podman run -v $TOPO/n1:$TOPO/n1:ro"* && $out == *"4 rank(s) cannot read their NCCL_TOPO_FILE"* ]]; then
  ok "podman without the bind of topo_dir: dltrain env fails, naming each node's file and 'podman run -v $TOPO/nN:$TOPO/nN:ro'"
else not_ok "podman without the bind (rc=$rc)"; echo "$out" | grep -v mca_base | tail -15 | diag; fi

# 3. With it: dltrain env passes.
out=$(in_podman 1 "$DLTRAIN" env 2>&1); rc=$?
if ((rc == 0)) && [[ $out == *"4 rank(s) on 2 node(s)"* && $out == *"all-reduce check passed"* && $out != *"cannot be read here"* ]]; then
  ok "podman -v TOPO_DIR/nN:TOPO_DIR/nN:ro: dltrain env passes inside (4 ranks, 2 nodes)"
else not_ok "podman with the bind (rc=$rc)"; echo "$out" | grep -v mca_base | tail -15 | diag; fi

# 4. A training run inside: 2 steps on 4 ranks.
out=$(in_podman 1 "$DLTRAIN" train --synthetic --arch resnet18 --image-size 64 --batch 4 --classes 10 --steps 2 --log-every 1 2>&1); rc=$?
if ((rc == 0)) && [[ $out == *"on 4 rank(s), batch 4 x 4 = 16"* && $out == *"done: 2 steps"* ]]; then
  ok "dltrain train inside podman on 2 nodes x 2 tasks: 2 steps of the global batch 16"
else not_ok "dltrain train inside podman (rc=$rc)"; echo "$out" | grep -v mca_base | tail -15 | diag; fi
exit 0
