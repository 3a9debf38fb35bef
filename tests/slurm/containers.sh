#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Containers: the task runs in another mount namespace whose /run is not the host's (a tmpfs over
# it, as in a container image). Without the documented bind (topo_dir read-only at the same path)
# the task cannot read its NCCL_TOPO_FILE and is told so, naming the file and the bind: by dltrain
# when the namespace is entered by the task's command (unshare -m, as Apptainer does), and by the
# plugin's task_init when a plugin listed before it entered the namespace (pyxis does, in its
# task_init; tests/fake_container stands in for it). With the bind the task reads a valid file.
. "$(dirname "$0")/lib.sh"
FAKE=$DLT_BUILDDIR/tests/fake_container/.libs/fake_container.so
[[ -f $FAKE ]] || skip_all "tests/fake_container not built (make check builds it)"
command -v unshare >/dev/null && command -v python3 >/dev/null || skip_all "unshare or python3 missing"
cluster_up 2 25
# topo_dir under the host's /run, as the default (/run/dltrain) is: the test's own folder there.
TOPO=/run/dltrain-test-$DLT_CLUSTER_PORT
trap 'cluster_down; rm -rf "$TOPO"' EXIT
tap_plan 7
DIR=$DLT_CLUSTER_DIR
CONF=$DIR/etc/plugstack.conf
DLTRAIN=$DLT_BUILDDIR/trainer/dltrain
cd /tmp
rm -rf "$TOPO" && mkdir -m 0755 "$TOPO" || { echo "Bail out! cannot make $TOPO"; exit 1; }
DLT_LINE=$(sed "s|topo_dir=[^ ]*|topo_dir=$TOPO/%n|" "$CONF")
echo "$DLT_LINE" > "$CONF"
cp "$FAKE" "$DIR/lib/fake_container.so"
# The task's view of its NCCL_TOPO_FILE: "system GPUS NETS" when it parses as NCCL's XML, else why not.
PARSE='python3 -c "import sys,xml.etree.ElementTree as E; r=E.parse(sys.argv[1]).getroot(); print(r.tag, len(r.findall(\".//gpu\")), len(r.findall(\".//net\")))" "$NCCL_TOPO_FILE" 2>&1 | tail -1'
# What a container does to the task's mount namespace: the host's /run hidden; with "bind", topo_dir
# bound back read-only at the same path (mount -o bind,ro), as the documented binds do.
HIDE='mount -t tmpfs tmpfs /run'
BIND="mkdir -p $WORK/stash.\$SLURMD_NODENAME && mount --bind $TOPO $WORK/stash.\$SLURMD_NODENAME && $HIDE && mkdir -p $TOPO && mount -o bind,ro $WORK/stash.\$SLURMD_NODENAME $TOPO"

# 1. The host's namespace: the reference (the file is there and valid for this step).
out=$(timeout 60 srun --quiet -w n1 -N1 -n1 --gpus-per-node=2 --dl-train bash -c "echo \$NCCL_TOPO_FILE; $PARSE" 2>&1); rc=$?
if ((rc == 0)) && [[ $out == "$TOPO/n1/"*"/nccl_topo.xml"$'\nsystem 4 3' ]]; then ok "host namespace: NCCL_TOPO_FILE under topo_dir=$TOPO/%n parses (4 GPUs, 3 NICs)"
else not_ok "host namespace reference (rc=$rc)"; echo "$out" | diag; fi

# 2. unshare -m, /run hidden, no bind: the file is gone, and dltrain env says so, naming the bind.
out=$(timeout 90 srun --quiet -N2 --ntasks-per-node=1 --gpus-per-node=1 --dl-train unshare -m bash -c \
  "$HIDE && { test -e \"\$NCCL_TOPO_FILE\" && echo FILE_SEEN || echo FILE_GONE; } && exec $DLTRAIN env" 2>&1); rc=$?
if ((rc != 0)) && [[ $(grep -c '^FILE_GONE$' <<<"$out") == 2 && $out != *FILE_SEEN* &&
  $out == *"rank 0 (host n1): NCCL_TOPO_FILE=$TOPO/n1/"*"/nccl_topo.xml cannot be read here (No such file or directory)"* &&
  $out == *"rank 1 (host n2): NCCL_TOPO_FILE=$TOPO/n2/"* && $out == *"2 rank(s) cannot read their NCCL_TOPO_FILE"* &&
  $out == *"pyxis --container-mounts=$TOPO/n1:$TOPO/n1:ro"* && $out == *"Apptainer --bind $TOPO/n1:$TOPO/n1:ro"* ]]; then
  ok "unshare -m, /run hidden, no bind: dltrain env fails naming each node's file and the bind to add"
else not_ok "hidden /run without the bind (rc=$rc)"; echo "$out" | diag; fi

# 3. unshare -m, /run hidden, the documented bind: the file parses, cannot be written, dltrain env passes.
out=$(timeout 90 srun --quiet -N2 --ntasks-per-node=1 --gpus-per-node=1 --dl-train unshare -m bash -c \
  "$BIND && $PARSE && { touch \"\$(dirname \"\$NCCL_TOPO_FILE\")/x\" 2>/dev/null && echo WROTE || echo READONLY; } && exec $DLTRAIN env" 2>&1); rc=$?
if ((rc == 0)) && [[ $(grep -c '^system 4 3$' <<<"$out") == 2 && $(grep -c '^READONLY$' <<<"$out") == 2 &&
  $out != *"cannot be read here"* && $out == *"all-reduce check passed"* ]]; then
  ok "unshare -m, /run hidden, topo_dir bound read-only at the same path: the task reads a valid file, dltrain env passes"
else not_ok "hidden /run with the bind (rc=$rc)"; echo "$out" | diag; fi

# 4. dltrain's GPU startup says it once per node (train --backend cuda on a GPU-less machine stops
# later, at the CUDA check; the line comes first).
out=$(timeout 90 srun --quiet -w n1 -N1 -n1 --gpus-per-node=1 --dl-train unshare -m bash -c \
  "$HIDE && exec $DLTRAIN train --synthetic --steps 1 --backend cuda" 2>&1)
if [[ $(grep -c "warning: NCCL_TOPO_FILE=$TOPO/n1/.*cannot be read here" <<<"$out") == 1 ]]; then
  ok "dltrain train (GPU run): one warning naming the unreadable NCCL_TOPO_FILE and the bind"
else not_ok "dltrain train warning"; echo "$out" | tail -15 | diag; fi

# 5. The namespace entered by a plugin before dltrain (pyxis's order): the plugin's task_init warns.
{ echo "required $DIR/lib/fake_container.so hide=/run"; echo "$DLT_LINE"; } > "$CONF"
out=$(timeout 60 srun --quiet -N2 --ntasks-per-node=2 --gpus-per-node=2 --dl-train bash -c \
  'test -e "$NCCL_TOPO_FILE" && echo "$SLURMD_NODENAME FILE_SEEN" || echo "$SLURMD_NODENAME FILE_GONE"' 2>&1); rc=$?
if ((rc == 0)) && [[ $(grep -c "FILE_GONE$" <<<"$out") == 4 &&
  $(grep -c "^dltrain: node n[12]: warning: NCCL_TOPO_FILE=$TOPO/n[12]/.*cannot be read here (No such file or directory).*--container-mounts=$TOPO/n[12]:$TOPO/n[12]:ro" <<<"$out") == 2 ]]; then
  ok "a plugin entering the namespace first (as pyxis): dltrain's task_init warns once per node, naming file and bind"
else not_ok "plugin-entered namespace without the bind (rc=$rc)"; echo "$out" | diag; fi

# 6. The same with the bind applied by that plugin: no warning, the file parses.
{ echo "required $DIR/lib/fake_container.so hide=/run bind=$TOPO stash=$WORK/stash"; echo "$DLT_LINE"; } > "$CONF"
out=$(timeout 60 srun --quiet -N2 --ntasks-per-node=1 --gpus-per-node=2 --dl-train bash -c "$PARSE" 2>&1); rc=$?
if ((rc == 0)) && [[ $(grep -c '^system 4 3$' <<<"$out") == 2 && $out != *warning* ]]; then
  ok "the same with topo_dir bound read-only: no warning, the task reads a valid file"
else not_ok "plugin-entered namespace with the bind (rc=$rc)"; echo "$out" | diag; fi

# 7. Listed after dltrain, the namespace is entered too late for its check (it sees the host):
# why spank_dltrain(8) says to list dltrain after pyxis. The task still cannot read the file.
{ echo "$DLT_LINE"; echo "required $DIR/lib/fake_container.so hide=/run"; } > "$CONF"
out=$(timeout 60 srun --quiet -N1 -n1 --gpus-per-node=1 --dl-train bash -c \
  'test -e "$NCCL_TOPO_FILE" && echo FILE_SEEN || echo FILE_GONE' 2>&1); rc=$?
if ((rc == 0)) && [[ $out == FILE_GONE ]]; then
  ok "dltrain listed before the container plugin: its check runs on the host and cannot see the task's view (the order matters)"
else not_ok "plugin order (rc=$rc)"; echo "$out" | diag; fi
echo "$DLT_LINE" > "$CONF"
exit 0
