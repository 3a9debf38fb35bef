#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/device/slurm_node.sh up|down|kill|status|env SLURMDIR
# A one-node Slurm on this machine, run from the Slurm a pack carries: SLURMDIR is the slurm/ folder
# of .devpack/dltrain-slurm.tar.xz (tests/device/pack.sh), which go.sh unpacks into
# /tmp/dlt-devpack/slurm. `up` starts munged, slurmctld and one slurmd from SLURMDIR alone, on
# loopback, with the configuration tests/slurm/cluster.sh writes (DLT_CLUSTER_NODES=1): the machine's
# GPUs as gpu gres (/dev/nvidia0.., no stand-in NVML: the plugin reads the driver's), the pack's
# dltrain plugin in plugstack.conf, every file in the state folder; it returns once the node is
# idle. `env` prints the export lines for the commands (SLURM_CONF, PATH with SLURMDIR/bin first,
# and for the tasks' PMIx the server's components);
# `down` stops every daemon `up` started and anything else still running from SLURMDIR, and checks
# that none is left (exit 1, naming it, when one is); `kill` sends KILL to every process of
# SLURMDIR at once (the last resort when `down` ran out of time). Needs root, as cluster.sh does.
#
# Debian's build has paths compiled in, none of which exists on a machine without Slurm; each is
# met without writing outside SLURMDIR, the state folder and (see PMIx) one folder in /tmp:
#   libraries  the daemons run through SLURMDIR/sbin/*, which set LD_LIBRARY_PATH to SLURMDIR/lib
#              and SLURMDIR/pmix2/lib (slurmstepd inherits slurmd's); the commands of SLURMDIR/bin
#              run through the dynamic loader with --library-path, which srun does not hand on to
#              the tasks in their environment as it would LD_LIBRARY_PATH
#   plugins    PluginDir=SLURMDIR/lib/slurm (DLT_CLUSTER_PLUGIN_DIR)
#   slurmstepd slurmd -d SLURMDIR/libexec/slurmstepd (DLT_CLUSTER_STEPD): slurm.conf has no setting
#   munge      munged's socket, key, pid, log and seed files in the state folder (its options, as
#              cluster.sh gives them); AuthInfo=socket= points Slurm at that socket
#   PMIx       mpi/pmix dlopens libpmix.so by the absolute folder compiled into it
#              (/usr/lib/x86_64-linux-gnu/pmix2/lib; no setting or variable changes it): `up`
#              writes SLURMDIR/lib/slurm/mpi_pmix_v4.so from the pristine copy with that string
#              replaced by SLURMDIR/pmix2/lib, same length or shorter, NUL-padded (when SLURMDIR is
#              too long for that, by a /tmp/dlt-px.XXXXXX folder holding a link to libpmix.so,
#              removed by `down`). libpmix's own install folders (its components, help files) come
#              from PMIX_PREFIX, PMIX_LIBDIR and the like, set by the daemons' wrappers.
# Environment: DLT_SLURM_NODE_DIR (state folder, default /tmp/dlt-slurm-node), DLT_CLUSTER_PORT
# (default 33800: slurmctld; the node PORT+1, slurmd's PORT+10, step ports PORT+50..89),
# DLT_SLURM_GPUS (GPUs to declare, default the /dev/nvidia0, 1, ... character devices here, 0
# without), DLT_SLURM_CPUS (CPUs the node claims, default nproc).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CLUSTER=$HERE/../slurm/cluster.sh
die() { echo "slurm_node: $*" >&2; exit 1; }
log() { echo "slurm_node: $*" >&2; }
USAGE="usage: tests/device/slurm_node.sh up|down|kill|status|env SLURMDIR"
[ $# -eq 2 ] || { echo "$USAGE" >&2; exit 2; }
CMD=$1
[ -x "$2/libexec/slurmd" ] && [ -d "$2/lib/slurm" ] || die "$2: not the slurm/ folder of an unpacked dltrain-slurm.tar.xz (no libexec/slurmd)"
S=$(cd "$2" && pwd -P)
STATE=${DLT_SLURM_NODE_DIR:-/tmp/dlt-slurm-node}
gpus_here() { local i=0; while [ -c "/dev/nvidia$i" ]; do i=$((i + 1)); done; echo "$i"; }
export DLT_CLUSTER_DIR=$STATE DLT_CLUSTER_NODES=1 DLT_CLUSTER_PORT=${DLT_CLUSTER_PORT:-33800}
export DLT_CLUSTER_GPUS=${DLT_SLURM_GPUS:-$(gpus_here)} DLT_CLUSTER_CPUS=${DLT_SLURM_CPUS:-$(nproc)}
export DLT_CLUSTER_PLUGIN_DIR=$S/lib/slurm DLT_CLUSTER_STEPD=$S/libexec/slurmstepd DLT_PLUGIN=$S/lib/spank_dltrain.so
unset DLT_PLUGIN_ARGS DLT_FAKE_NVML
export PATH=$S/sbin:$S/bin:$PATH
LINK_NOTE=$S/lib/pristine/libpmix-link

# The carried mpi/pmix, made to open the carried libpmix.so (above).
patch_pmix() {
  local old new
  old=$(cat "$S/lib/pristine/libpmix-dir")
  new=$S/pmix2/lib
  if [ -f "$LINK_NOTE" ]; then rm -rf "$(cat "$LINK_NOTE")"; rm -f "$LINK_NOTE"; fi
  if [ "${#new}" -gt "${#old}" ]; then
    new=$(mktemp -d /tmp/dlt-px.XXXXXX)
    chmod 755 "$new" # srun, as any user, opens the library through it
    ln -s "$S/pmix2/lib/libpmix.so" "$new/libpmix.so"
    echo "$new" >"$LINK_NOTE"
  fi
  python3 - "$S/lib/pristine/mpi_pmix_v4.so" "$S/lib/slurm/mpi_pmix_v4.so.tmp" "$old" "$new" <<'EOF' || die "cannot write the carried mpi_pmix_v4.so"
import sys
src, dst, old, new = sys.argv[1], sys.argv[2], sys.argv[3].encode(), sys.argv[4].encode()
data = open(src, "rb").read()
key = b"\0" + old + b"\0"
if data.count(key) != 1 or len(new) > len(old):
    sys.exit("slurm_node: %s names %r %d times (want once; the new folder %r must be no longer)" % (src, old, data.count(key), new))
open(dst, "wb").write(data.replace(key, b"\0" + new + b"\0" * (len(old) - len(new) + 1)))
EOF
  chmod 644 "$S/lib/slurm/mpi_pmix_v4.so.tmp"
  mv -f "$S/lib/slurm/mpi_pmix_v4.so.tmp" "$S/lib/slurm/mpi_pmix_v4.so"
}

# The processes of this pack still alive: its programs (/proc/PID/exe under SLURMDIR) and its
# commands (started through the loader, SLURMDIR/libexec/NAME as their first argument).
pack_procs() {
  local p exe args
  for p in /proc/[0-9]*; do
    exe=$(readlink "$p/exe" 2>/dev/null) || continue
    args=$(tr '\0' ' ' <"$p/cmdline" 2>/dev/null) || continue
    case "$exe $args" in "$S"/*|*" $S/libexec/"*) echo "${p#/proc/}" ;; esac
  done
}

up() {
  [ ! -f "$STATE/pids" ] || { log "already up in $STATE"; return 0; }
  patch_pmix
  "$CLUSTER" up || { down >/dev/null 2>&1 || true; die "the one-node Slurm did not start (logs: $STATE/log)"; }
  log "up: node n1 idle ($DLT_CLUSTER_GPUS GPU(s), $DLT_CLUSTER_CPUS CPUs), SLURM_CONF=$STATE/etc/slurm.conf, daemons: $(tr '\n' ' ' <"$STATE/pids")"
}

down() {
  local pids="" pid left i
  [ ! -f "$STATE/pids" ] || pids=$(awk '{print $2}' "$STATE/pids" | xargs)
  [ "${1:-}" = now ] || "$CLUSTER" down || true
  for i in $(seq 30); do
    left=$(pack_procs | tr '\n' ' ')
    for pid in $pids; do kill -0 "$pid" 2>/dev/null && left+="$pid "; done
    [ -n "${left// /}" ] || break
    { [ "$i" = 20 ] || [ "${1:-}" = now ]; } && for pid in $left; do kill -KILL "$pid" 2>/dev/null || true; done
    sleep 0.1
  done
  if [ -f "$LINK_NOTE" ]; then rm -rf "$(cat "$LINK_NOTE")"; rm -f "$LINK_NOTE"; fi
  if [ -n "${left// /}" ]; then
    log "still running after down: $(for pid in $left; do echo "$pid $(readlink "/proc/$pid/exe" 2>/dev/null)"; done | tr '\n' ';')"
    return 1
  fi
  log "down: no process of $S left${pids:+ (daemons were $pids)}"
}

case $CMD in
  up) up ;;
  down) down ;;
  kill) down now; rm -f "$STATE/pids" ;;
  status) "$CLUSTER" status ;;
  env) echo "export SLURM_CONF=$STATE/etc/slurm.conf PMIX_MCA_mca_base_component_path=$S/pmix2/lib/pmix"; echo "export PATH=$S/bin:\$PATH" ;;
  *) echo "$USAGE" >&2; exit 2 ;;
esac
