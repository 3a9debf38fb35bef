#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The one-node Slurm the GPU check carries (dltrain-slurm.tar.xz of tests/device/pack.sh), started
# here, without a GPU, the way tests/device/slurm_node.sh starts it there: .devpack's when it has
# one, else one made by pack.sh --slurm-only, unpacked under /tmp; munged, slurmctld and slurmd
# start from the unpacked copy on loopback and the node goes idle; each daemon is the copy's
# program (/proc/PID/exe) and maps nothing of the installed Slurm, munge or PMIx, and their logs
# name no missing plugin; srun -n1 hostname runs; a PMIx step's slurmstepd is the copy's, its
# PMIx server the carried libpmix, which the carried mpi/pmix opens in srun too; dltrain env gets
# two ranks and the torch.distributed contract from that server; srun --dl-train=verbose loads the
# carried plugin, which says there is no GPU here; `down` leaves no process of the copy. Needs root
# and Slurm's packages (what the pack takes its files from).
. "$(dirname "$0")/lib.sh"
[[ ${DLT_SANITIZED:-} ]] && skip_all "sanitizer build: an ASan plugin cannot be loaded into slurmstepd (the non-sanitized build runs this)"
[[ ${DLT_DISTCHECK_LIGHT:-} ]] &&
  skip_all "DLT_DISTCHECK_LIGHT: .ci/run's make check ran this cluster test on the same sources (cluster_basic.sh runs here)"
[[ $(id -u) -eq 0 ]] || skip_all "the one-node Slurm needs root (slurmd starts the tasks as their users)"
for f in /usr/sbin/slurmctld /usr/sbin/slurmd /usr/sbin/slurmstepd /usr/sbin/munged /usr/bin/srun; do
  [[ -x $f ]] || skip_all "Slurm's packages are not installed ($f; slurmctld slurmd slurm-client munge, contrib/install-deps.sh): the pack takes its Slurm from them"
done
PLUGIN=$DLT_BUILDDIR/plugin/.libs/spank_dltrain.so
DLTRAIN=$DLT_BUILDDIR/trainer/dltrain
[[ -f $PLUGIN && -x $DLTRAIN ]] || skip_all "spank_dltrain.so or dltrain not built"
tap_plan 9
T=$(mktemp -d /tmp/dlt-sp.XXXXXX)
chmod 755 "$T" # topo_dir below it must be searchable by others (spank_dltrain(8))
S=$T/slurm
NODE=$DLT_SRCDIR/tests/device/slurm_node.sh
export DLT_SLURM_NODE_DIR=$T/state DLT_SLURM_GPUS=0 DLT_CLUSTER_PORT=$((${DLT_TEST_PORT_BASE:-17800} + 100 * 27))
cleanup() { [[ -x $S/libexec/slurmd ]] && bash "$NODE" down "$S" >/dev/null 2>&1; rm -rf "$T"; }
trap cleanup EXIT
start=$SECONDS

# 1. The pack's Slurm part: the one that travels, else a fresh one.
P=$DLT_SRCDIR/.devpack
if [[ -f $P/dltrain-slurm.tar.xz ]] && (cd "$P" && grep ' dltrain-slurm.tar.xz$' SHA256SUMS | sha256sum -c --quiet); then
  tarball=$P/dltrain-slurm.tar.xz from=".devpack's (checksum matches)"
else
  out=$(DLT_PLUGIN=$PLUGIN bash "$DLT_SRCDIR/tests/device/pack.sh" --slurm-only "$T/out" 2>&1)
  tarball=$T/out/dltrain-slurm.tar.xz from="pack.sh --slurm-only: $(grep -o 'Slurm part: .*' <<<"$out")"
fi
if [[ -f $tarball ]] && xz -dc "$tarball" | tar -xf - -C "$T" && [[ -x $S/libexec/slurmd && -x $S/bin/srun ]]; then
  ok "the Slurm part of the pack, $(($(stat -c %s "$tarball") / 1024)) KiB, unpacked in $T: $from"
else not_ok "the Slurm part of the pack ($from)"; echo "${out:-}" | diag; exit 0; fi

# 2. Up from the copy alone.
t0=$SECONDS
if out=$(bash "$NODE" up "$S" 2>&1); then ok "slurm_node.sh up from the copy in $((SECONDS - t0)) s: $(tail -1 <<<"$out" | sed 's/^slurm_node: //')"
else not_ok "slurm_node.sh up"; { echo "$out"; tail -5 "$T"/state/log/*.log; } | diag; exit 0; fi
eval "$(bash "$NODE" env "$S")"

# Files a process maps (or runs) that belong to the installed Slurm, munge or PMIx instead of the copy.
foreign() { awk '$6 ~ /^\// {print $6}' "$1" | sort -u | grep -v "^$T/" |
  grep -E '/slurm-wlm/|/pmix2/|/(sbin|bin)/|lib(slurm|pmix|munge)[^/]*$' || true; }
# 3. The daemons: programs of the copy, nothing of the installed packages mapped, no missing plugin.
bad=() said=()
while read -r name pid; do
  exe=$(readlink "/proc/$pid/exe")
  f=$(foreign "/proc/$pid/maps" | tr '\n' ' ')
  [[ $exe == "$S/libexec/"* && -z $f ]] || bad+=("$name $pid: $exe ${f:+maps $f}")
  said+=("$name=${exe#"$T"/}")
done <"$T/state/pids"
missing=$(grep -h -i -E "couldn't find the specified plugin|cannot find .* plugin|cannot create .* context" "$T"/state/log/*.log || true)
if ((${#bad[@]} == 0 && ${#said[@]} == 3)) && [[ -z $missing ]]; then
  ok "the daemons run the copy (${said[*]}), map nothing of the installed Slurm, munge or PMIx, and log no missing plugin"
else not_ok "the daemons (${#said[@]} of 3 seen)"; printf '%s\n' "${bad[@]}" "$missing" | diag; fi

# 4. The simplest step, through the copy's srun.
out=$(timeout 60 srun -n1 hostname 2>&1); rc=$?
if ((rc == 0)) && [[ $out == "$(hostname)" && $(command -v srun) == "$S/bin/srun" ]]; then ok "srun -n1 hostname (srun: $S/bin/srun): $out"
else not_ok "srun -n1 hostname (rc=$rc)"; echo "$out" | diag; fi

# 5. A PMIx step: slurmstepd and its PMIx server from the copy; srun's mpi/pmix opens the carried libpmix.
out=$(timeout 60 srun -n1 --mpi=pmix bash -c 'echo "rank=$PMIX_RANK ns=$PMIX_NAMESPACE"; echo "exe $(readlink /proc/$PPID/exe)"; cat /proc/$PPID/maps' 2>&1); rc=$?
echo "$out" | grep -v '^rank=\|^exe ' >"$T/stepd.maps"
timeout 60 srun -n1 --mpi=pmix sleep 3 >/dev/null 2>&1 &
for _ in $(seq 30); do sp=$(pgrep -f "^[^ ]* --library-path [^ ]* $S/libexec/srun" | head -1); [[ -n $sp ]] && grep -q libpmix "/proc/$sp/maps" 2>/dev/null && break; sleep 0.1; done
[[ -n $sp ]] && cp "/proc/$sp/maps" "$T/srun.maps" 2>/dev/null
wait
f=$(foreign "$T/stepd.maps" | tr '\n' ' ') g=$(foreign "$T/srun.maps" 2>/dev/null | tr '\n' ' ')
if ((rc == 0)) && [[ $out == *"rank=0 ns=slurm.pmix."* && $out == *"exe $S/libexec/slurmstepd"* && -z $f && -z $g ]] &&
   grep -q " $S/pmix2/lib/libpmix.so.2$" "$T/stepd.maps" && grep -q " $S/lib/slurm/mpi_pmix_v4.so$" "$T/stepd.maps" &&
   grep -q " $S/pmix2/lib/libpmix.so.2$" "$T/srun.maps"; then
  ok "srun --mpi=pmix: the task has PMIx rank 0 from the copy's slurmstepd, whose PMIx server and srun's are the carried libpmix"
else not_ok "the PMIx step (rc=$rc)"; { echo "$out" | grep '^rank=\|^exe '; echo "stepd maps outside the copy: $f"; echo "srun ($sp) maps outside the copy: $g"; } | diag; fi

# 6. dltrain env: two ranks and the contract from the carried PMIx server.
out=$(timeout 120 srun -n2 --mpi=pmix --dl-train=gpus=none "$DLTRAIN" env 2>&1); rc=$?
if ((rc == 0)) && [[ $out == *"2 rank(s) on 1 node(s), namespace slurm.pmix."* && $out == *"all-reduce check passed"* &&
      $out == *"the contract agrees with PMIx's ranks"* ]]; then
  ok "dltrain env on 2 ranks: $(grep -o '2 rank(s) on 1 node(s), namespace [^ ,]*' <<<"$out"), the contract agrees with PMIx"
else not_ok "dltrain env on 2 ranks (rc=$rc)"; echo "$out" | diag; fi

# 7. The carried plugin, loaded by srun and slurmstepd, says there is no GPU here.
out=$(timeout 60 srun -n1 --dl-train=verbose true 2>&1); rc=$?
if ((rc == 0)) && [[ $out == *"node n1: no GPU on this node: gpus=none"* ]] && cmp -s "$S/lib/spank_dltrain.so" "$T/state/lib/spank_dltrain.so" &&
   grep -q "^required $T/state/lib/spank_dltrain.so " "$T/state/etc/plugstack.conf"; then
  ok "srun --dl-train=verbose with the carried plugin: $(grep -o 'no GPU on this node: .*' <<<"$out" | head -1)"
else not_ok "srun --dl-train=verbose (rc=$rc)"; echo "$out" | diag; fi

# 8. Down: nothing of the copy left.
pids=$(awk '{print $2}' "$T/state/pids" | tr '\n' ' ')
t0=$SECONDS
out=$(bash "$NODE" down "$S" 2>&1); rc=$?
left=""
for p in /proc/[0-9]*; do [[ $(readlink "$p/exe" 2>/dev/null) == "$S/"* ]] && left+="${p#/proc/} "; done
for p in $pids; do kill -0 "$p" 2>/dev/null && left+="$p "; done
if ((rc == 0)) && [[ -z $left ]]; then ok "slurm_node.sh down in $((SECONDS - t0)) s: the daemons (${pids% }) and every process of the copy gone"
else not_ok "down (rc=$rc, left: $left)"; echo "$out" | diag; fi

# 9. Within the time a cluster test may take.
if ((SECONDS - start <= 60)); then ok "all in $((SECONDS - start)) s (at most 60)"
else not_ok "took $((SECONDS - start)) s (over 60)"; fi
exit 0
