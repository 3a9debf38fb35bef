#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Slurm's own OCI containers (srun --container=BUNDLE, oci.conf) with runc, on this Slurm. The
# bundle is made here (runc spec; a skeleton root with the host's /usr bound). Slurm 22.05 starts
# the container with the step's launch environment, written before any task exists: SLURM_PROCID
# and every variable of the plugin's task_init are missing inside, and more than one task per node
# is refused. So srun refuses --dl-train with --container there, before the step starts, naming why
# and what to run instead; from 23.02 (each task's own environment) it lets the step through. A
# --container allocation's variable alone (an srun without --container inside it) is not refused.
. "$(dirname "$0")/lib.sh"
command -v runc >/dev/null || skip_all "runc not installed (contrib/install-deps.sh installs it)"
cluster_up 1 34
tap_plan 6
DIR=$DLT_CLUSTER_DIR
cd /tmp || exit 1
VERSION=$(srun --version | awk '{print $2}')
MAJOR=${VERSION%%.*} MINOR=${VERSION#*.} MINOR=${MINOR%%.*}
TASK_ENV=0
((10#$MAJOR > 23 || (10#$MAJOR == 23 && 10#$MINOR >= 2))) && TASK_ENV=1

# The bundle: runc's default spec, run as root here, with the host's /usr bound read-only into a
# skeleton root that carries a marker (a task that sees it runs inside).
B=$WORK/bundle
rm -rf "$B" && mkdir -p "$B/rootfs"/{usr,etc,dev,proc,sys,tmp,run,root} || exit 1
for l in bin sbin lib lib64; do ln -s "usr/$l" "$B/rootfs/$l"; done
touch "$B/rootfs/.dlt-oci-inside"
(cd "$B" && runc spec) || { echo "Bail out! runc spec failed"; exit 1; }
python3 - "$B/config.json" <<'EOF' || { echo "Bail out! cannot edit the bundle"; exit 1; }
import json, sys
c = json.load(open(sys.argv[1]))
c["process"]["terminal"] = False
c["root"] = {"path": "rootfs", "readonly": False}
c["mounts"].append({"destination": "/usr", "type": "bind", "source": "/usr", "options": ["rbind", "ro"]})
json.dump(c, open(sys.argv[1], "w"), indent=1)
EOF
R="runc --root=$DIR/runc"
cat >"$DIR/etc/oci.conf" <<EOF
RunTimeQuery="$R state %n.%u.%j.%s.%t"
RunTimeKill="$R kill -a %n.%u.%j.%s.%t"
RunTimeDelete="$R delete --force %n.%u.%j.%s.%t"
RunTimeRun="$R run %n.%u.%j.%s.%t -b %b"
EOF
SHOW='test -e /.dlt-oci-inside && echo INSIDE; echo "procid=$SLURM_PROCID rank=$RANK topo=$NCCL_TOPO_FILE"'

# 1. The runtime works here: a step without --dl-train runs inside the bundle; on this release the
# task has (or lacks) SLURM_PROCID as the release note says.
out=$(timeout 60 srun --quiet -N1 -n1 --container="$B" /bin/sh -c "$SHOW" 2>&1); rc=$?
if ((TASK_ENV)); then want='procid=0 rank= topo='; else want='procid= rank= topo='; fi
if ((rc == 0)) && [[ $out == $'INSIDE\n'"$want" ]]; then
  ok "srun --container=BUNDLE with runc: the task runs inside; Slurm $VERSION gives it ${want%% *} (its own environment: $TASK_ENV)"
else not_ok "srun --container without --dl-train (rc=$rc)"; echo "$out" | diag; fi

# 2-4. --dl-train with --container: refused by srun before the step on 22.05 (both spellings, and
# --dl-train carried in from a batch script), let through from 23.02.
refused() {
  [[ $2 != *INSIDE* && $2 == *"dltrain: --dl-train cannot run in Slurm $MAJOR.$(printf %02d $((10#$MINOR)))'s own OCI containers (--container)"* &&
    $2 == *"SLURM_PROCID"* && $2 == *"srun --dl-train ch-run -b TOPO_DIR IMAGE -- CMD"* && $2 == *"Slurm 23.02 or later"* ]] && (($1 != 0))
}
for form in "--container=$B" "--container $B" "env"; do
  label="${form/$B/BUNDLE} --dl-train"
  [[ $form == env ]] && label="--container=BUNDLE, --dl-train carried in from the batch script's environment"
  case $form in
  env) out=$(_SLURM_SPANK_OPTION_dltrain_dl_train='(null)' timeout 60 srun --quiet -N1 -n1 --gpus-per-node=1 --container="$B" /bin/sh -c "$SHOW" 2>&1); rc=$? ;;
  *) # shellcheck disable=SC2086 # the form's two words
    out=$(timeout 60 srun --quiet -N1 -n1 --gpus-per-node=1 $form --dl-train /bin/sh -c "$SHOW" 2>&1); rc=$? ;;
  esac
  if ((TASK_ENV)); then
    if ((rc == 0)) && [[ $out == *INSIDE* && $out == *"procid=0 rank=0 topo=/"* ]]; then ok "$label on Slurm $VERSION: runs, the task has its contract"
    else not_ok "$label on Slurm $VERSION (rc=$rc)"; echo "$out" | diag; fi
  elif refused "$rc" "$out"; then
    ok "$label: srun refuses it on Slurm $VERSION before the step starts, naming why and what to run instead"
  else not_ok "$label: not refused (rc=$rc)"; echo "$out" | diag; fi
done

# 5. An srun without --container inside a --container allocation (its SLURM_CONTAINER inherited)
# is an ordinary step: not refused, the contract set.
out=$(SLURM_CONTAINER=$B timeout 60 srun --quiet -N1 -n1 --gpus-per-node=1 --dl-train /bin/sh -c "$SHOW" 2>&1); rc=$?
if ((rc == 0)) && [[ $out == "procid=0 rank=0 topo=/"*"/nccl_topo.xml" ]]; then
  ok "SLURM_CONTAINER inherited, no --container: --dl-train runs on the host with its contract"
else not_ok "inherited SLURM_CONTAINER (rc=$rc)"; echo "$out" | diag; fi

# 6. Without --dl-train the step's tasks have none of the plugin's variables (nothing set, nothing refused).
out=$(timeout 60 srun --quiet -N1 -n1 --container="$B" /bin/sh -c 'echo "dlt=$DLT_SET"' 2>&1); rc=$?
if ((rc == 0)) && [[ $out == "dlt=" ]]; then ok "--container without --dl-train: nothing of dltrain's in the task, not refused"
else not_ok "--container without --dl-train (rc=$rc)"; echo "$out" | diag; fi
exit 0
