#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# installed.sh [DEB_DIR]: the installed product, as a site gets it. The .deb files `make deb` built
# (default DEB_DIR: the build tree's _deb) are installed with apt-get; a local Slurm cluster loads
# the plugin from the path the package installed (plugstack.conf holds the shipped snippet's line,
# switched on) and runs the dltrain on PATH, no build tree: `srun --mpi=pmix --dl-train dltrain env`,
# a short training, and a program built against libdltpmix-dev; slurm-spank-dltrain is removed
# (not purged) with its line on, srun still works, and a reinstall restores the line, checking it
# (dltrain-topo --check-plugstack from the postinst; a refused line warns, the install goes on). Then the
# packages are purged:
# nothing of theirs is left, and Slurm's configuration files are as they were before.
# The coupling to Slurm's release (doc/site-install.md, "Which Slurm loads the plugin"): the
# installed plugin's plugin_version is the installed Slurm's major.minor, the package depends on that
# series only, its preinst refuses another (dpkg on a copy of the dpkg database), Slurm's loader
# refuses a plugin_version of another series (srun on the local cluster), and apt, asked to upgrade
# Slurm to a later series (stand-in packages, simulated: the real Slurm is never touched), removes
# the plugin package (whose prerm switches the line off) instead of leaving it to be refused.
# Needs root (apt-get, slurmd). Refuses to run where a dltrain package is already installed, since it
# would remove it. The cluster's stand-in NVML is test scaffolding from the build tree.
. "$(dirname "$0")/lib.sh"
PKGS=(slurm-spank-dltrain dltrain libdltpmix0 libdltpmix-dev)
DEBDIR=${1:-$DLT_BUILDDIR/_deb}
[[ $(id -u) -eq 0 ]] || skip_all "installing packages needs root"
command -v apt-get >/dev/null && command -v dpkg-architecture >/dev/null || skip_all "not a Debian system with dpkg-dev"
command -v slurmctld >/dev/null 2>&1 || [[ -x /usr/sbin/slurmctld ]] || skip_all "Slurm daemons not installed (contrib/install-deps.sh)"
[[ ${DLT_SANITIZED:-} ]] && skip_all "sanitizer build: the packages are built without sanitizers; the plain build runs this"
for p in "${PKGS[@]}" dltrain-cuda; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' &&
    skip_all "$p is already installed here; this test would purge it"
done
debs=()
for p in "${PKGS[@]}"; do
  f=$(ls "$DEBDIR/${p}_"*.deb 2>/dev/null | head -1)
  [[ -n $f ]] || { echo "Bail out! no ${p}_*.deb in $DEBDIR (build them: make deb)"; exit 1; }
  debs+=("$(readlink -f "$f")")
done
export DEBIAN_FRONTEND=noninteractive
ARCH=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
PLUGIN=/usr/lib/$ARCH/slurm-wlm/spank_dltrain.so
SNIPPET=/etc/slurm/plugstack.conf.d/dltrain.conf
unset LD_LIBRARY_PATH
export PATH=$PATH:/usr/sbin:/sbin
# This script's own cluster (set before the exit trap, which takes it down).
export DLT_CLUSTER_NODES=2
export DLT_CLUSTER_PORT=$((${DLT_TEST_PORT_BASE:-17800} + 100 * 9))
export DLT_CLUSTER_DIR=/tmp/dltrain-test-installed-$$
export DLT_PLUGIN=$PLUGIN
cd /tmp
tap_plan 30

# The release series (major.minor, "22.05") of the installed Slurm, from its own daemon.
SLURMD_V=$(slurmd -V 2>/dev/null | awk 'NR == 1 { print $NF }')
SERIES=$(awk -F. '{ printf "%d.%02d", $1, $2 }' <<<"$SLURMD_V")
[[ $SERIES =~ ^[0-9]+\.[0-9]{2}$ ]] || { echo "Bail out! cannot read the Slurm release from slurmd -V ($SLURMD_V)"; exit 1; }
S_MAJOR=${SERIES%.*} S_MINOR=$((10#${SERIES#*.}))
# A later release series for the stand-in packages (only its being another series matters).
LATER=$((S_MAJOR + 1)).02
# The file offset of the dynamic symbol plugin_version in $1 (what Slurm's loader reads through
# dlsym), from the ELF tables: the plugin cannot be dlopened outside Slurm (-z now, Slurm's symbols).
plugin_version_offset() {
  local sym val ndx sec addr off
  sym=$(readelf -W --dyn-syms "$1" | awk '$8 == "plugin_version" && $7 != "UND" { print $2, $7; exit }')
  [[ -n $sym ]] || return 1
  read -r val ndx <<<"$sym"
  sec=$(readelf -SW "$1" | sed 's/\[ */[/' | awk -v n="[$ndx]" '$1 == n { print $4, $5; exit }')
  [[ -n $sec ]] || return 1
  read -r addr off <<<"$sec"
  echo $((0x$val - 0x$addr + 0x$off))
}
plugin_version_of() {
  local off
  off=$(plugin_version_offset "$1") || return 1
  printf '0x%06x\n' "0x$(od -An -tx4 -j "$off" -N4 "$1" | tr -d ' ')"
}
set_plugin_version() {
  local off v=$(($2))
  off=$(plugin_version_offset "$1") || return 1
  printf "$(printf '\\x%02x\\x%02x\\x%02x\\x%02x' $((v & 255)) $(((v >> 8) & 255)) $(((v >> 16) & 255)) $(((v >> 24) & 255)))" |
    dd of="$1" bs=1 seek="$off" conv=notrunc status=none
}
# Stand-ins for every installed package of Slurm's source at version $1 (nothing inside): what apt
# would do with a Slurm upgrade is asked with apt-get -s, which changes nothing.
standin_debs() {
  local dir=$WORK/standin-$1 p a
  rm -rf "$dir" && mkdir -p "$dir"
  for p in $(dpkg-query -W -f='${source:Package} ${Package} ${db:Status-Abbrev}\n' | awk '$1 == "slurm-wlm" && $3 ~ /^.i/ { print $2 }'); do
    a=$(dpkg-query -W -f='${Architecture}' "$p")
    mkdir -p "$dir/$p/DEBIAN"
    printf 'Package: %s\nVersion: %s\nArchitecture: %s\nMaintainer: dltrain tests <tests@localhost>\nDescription: stand-in for a Slurm upgrade (simulated)\n' "$p" "$1" "$a" >"$dir/$p/DEBIAN/control"
    dpkg-deb -Zgzip --build --root-owner-group "$dir/$p" "$dir/${p}_$1_$a.deb" >/dev/null || return 1
    echo "$dir/${p}_$1_$a.deb"
  done
}

# Slurm's configuration before anything happens (every file under /etc/slurm, by content).
slurm_etc() { find /etc/slurm -type f -print0 2>/dev/null | sort -z | xargs -0 -r sha256sum; }
etc_before=$(slurm_etc)
installed=0
purge() { apt-get purge -y -q "${PKGS[@]}" >"$WORK/purge.log" 2>&1; }
cleanup() {
  cluster_down
  ((installed)) && purge
  rm -rf "$WORK/ckpt" "$WORK/probe" "$WORK/probe.c"
}
trap cleanup EXIT

out=$(timeout 300 apt-get install -y -q --no-install-recommends "${debs[@]}" 2>&1); rc=$?
installed=1
states=$(for p in "${PKGS[@]}"; do dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null; done | sort -u)
if ((rc == 0)) && [[ $states == "install ok installed" ]]; then ok "apt-get install of ${PKGS[*]}"
else not_ok "apt-get install (rc=$rc)"; echo "$out" | tail -15 | diag; echo "Bail out! packages did not install"; exit 1; fi
for p in "${PKGS[@]}"; do dpkg -L "$p"; done | sort -u > "$WORK/files"

# The package's bound, checked with dpkg's own comparison: the installed Slurm is inside it, the
# next micro release too, a later series is not.
deps=$(dpkg-query -W -f='${Depends}' slurm-spank-dltrain)
lo=$(grep -o 'slurm-wlm-basic-plugins (>= [^)]*)' <<<"$deps" | sed 's/.*>= //; s/)//')
hi=$(grep -o 'slurm-wlm-basic-plugins (<< [^)]*)' <<<"$deps" | sed 's/.*<< //; s/)//')
have=$(dpkg-query -W -f='${Version}' slurm-wlm-basic-plugins)
inside() { dpkg --compare-versions "$1" ge "$lo" && dpkg --compare-versions "$1" lt "$hi"; }
if [[ $lo == "$SERIES" ]] && inside "$have" && inside "$SERIES.99-1" && ! inside "$LATER.0-1" && ! inside "$S_MAJOR.$(printf %02d $((S_MINOR - 1))).9-1"; then
  ok "slurm-spank-dltrain depends on Slurm $SERIES only (slurm-wlm-basic-plugins >= $lo, << $hi): the installed $have and $SERIES.99-1 satisfy it, $LATER.0-1 does not"
else not_ok "the package's Slurm bound (slurmd -V $SLURMD_V, slurm-wlm-basic-plugins $have)"; echo "Depends: $deps" | diag; fi

pv=$(plugin_version_of "$PLUGIN")
if [[ -n $pv ]] && (((pv & 0xffff00) == ((S_MAJOR << 16) | (S_MINOR << 8)))); then
  ok "the installed plugin's plugin_version $pv is the installed Slurm's release series $SERIES (slurmd -V: $SLURMD_V)"
else not_ok "plugin_version of the installed plugin ($pv) against slurmd -V $SLURMD_V"; fi

# dpkg itself, on copies of the dpkg database in which Slurm is at another series and the plugin
# package is not installed: at a later series the package's Conflicts stop dpkg -i before anything
# runs; at an earlier one (which the Conflicts do not name, and a Depends does not stop dpkg -i) the
# preinst refuses before unpacking, naming both releases; the same preinst passes on the real database.
EARLIER=$((S_MAJOR - 1)).08
# (The copy's record of slurm-spank-dltrain is dropped by editing it: a dpkg --purge there would run
# the package's scripts on the real files. Should dpkg not refuse, it unpacks into / the same files
# apt just installed from the same .deb; the test then fails.)
dpkg_into_slurm() {
  local adm=$WORK/admindir-$1
  rm -rf "$adm" && cp -a /var/lib/dpkg "$adm" && rm -f "$adm"/info/slurm-spank-dltrain.*
  awk -v RS= -v ORS='\n\n' -v v="$1" '
    /(^|\n)Package: slurm-spank-dltrain\n/ { next }
    /(^|\n)Package: slurm-wlm-basic-plugins\n/ { sub(/\nVersion: [^\n]*/, "\nVersion: " v) }
    { print }' /var/lib/dpkg/status >"$adm/status"
  dout=$(timeout 120 dpkg --admindir="$adm" -i "${debs[0]}" 2>&1); drc=$?
  dstate=$(dpkg-query --admindir="$adm" -W -f='${db:Status-Abbrev}' slurm-spank-dltrain 2>/dev/null)
  rm -rf "$adm"
}
sum_before=$(sha256sum "$PLUGIN" "$SNIPPET")
dpkg_into_slurm "$LATER.0-1"; lout=$dout lrc=$drc lstate=$dstate
dpkg_into_slurm "$EARLIER.8-1"
rm -rf "$WORK/ctrl" && mkdir -p "$WORK/ctrl" && dpkg-deb -e "${debs[0]}" "$WORK/ctrl"
pout=$(sh "$WORK/ctrl/preinst" install 2>&1); prc=$?
if ((lrc != 0 && drc != 0 && prc == 0)) && [[ $lout == *"slurm-spank-dltrain conflicts with slurm-wlm-basic-plugins (>= "*"conflicting packages - not installing slurm-spank-dltrain"* &&
  $dout == *"built against the headers of Slurm $SERIES, but the installed Slurm is $EARLIER (slurm-wlm-basic-plugins $EARLIER.8-1)"* &&
  $lstate != ?i* && $dstate != ?i* && $(sha256sum "$PLUGIN" "$SNIPPET") == "$sum_before" ]]; then
  ok "dpkg -i into a Slurm $LATER (a copy of the dpkg database) is refused by the package's Conflicts, into a Slurm $EARLIER by the preinst naming both releases; the preinst passes on this Slurm $SERIES"
else not_ok "dpkg -i into another Slurm (later: rc=$lrc state '$lstate'; earlier: rc=$drc state '$dstate'; preinst here rc=$prc)"; { echo "$lout" | tail -4; echo "$dout"; echo "$pout"; } | tail -14 | diag; fi
echo "$dout" | grep 'refusing' | diag

if [[ $(dpkg -S "$PLUGIN" 2>/dev/null) == "slurm-spank-dltrain: $PLUGIN" && -f $(dirname "$PLUGIN")/mpi_pmix.so ]]; then
  ok "the plugin is in Slurm's plugin directory ($PLUGIN, beside mpi_pmix.so)"
else not_ok "plugin location"; dpkg -L slurm-spank-dltrain | diag; fi

if [[ -f $SNIPPET ]] && ! grep -v '^#' "$SNIPPET" | grep -q . && grep -q "^#required $PLUGIN " "$SNIPPET"; then
  ok "the plugstack.conf.d snippet ships disabled (comments only) and names the installed plugin"
else not_ok "plugstack.conf.d snippet"; cat "$SNIPPET" 2>&1 | diag; fi

if [[ $(slurm_etc | grep -v " $SNIPPET\$") == "$etc_before" ]]; then ok "installing changed no Slurm configuration file (only added the snippet)"
else not_ok "Slurm configuration changed by the install"; diff <(echo "$etc_before") <(slurm_etc) | diag; fi

hard=$(for f in "$PLUGIN" /usr/lib/"$ARCH"/libdltpmix.so.0 /usr/bin/dltrain; do
  echo "$f $(readelf -d "$f" | grep -c BIND_NOW) $(readelf -lW "$f" | grep -c GNU_RELRO) $(readelf -d "$f" | grep -c -E 'RPATH|RUNPATH')"; done)
if ! grep -qv ' [1-9][0-9]* 1 0$' <<<"$hard"; then ok "installed plugin, library and trainer: BIND_NOW, GNU_RELRO, no RPATH"
else not_ok "hardening of the installed files (file BIND_NOW GNU_RELRO RPATH)"; echo "$hard" | diag; fi

ldd_out=$(ldd /usr/bin/dltrain 2>&1)
if [[ $(command -v dltrain) == /usr/bin/dltrain ]] && grep -qE "libdltpmix.so.0 => (/usr)?/lib/$ARCH/libdltpmix.so.0 " <<<"$ldd_out" &&
   ! grep -q 'not found' <<<"$ldd_out"; then ok "dltrain on PATH is /usr/bin/dltrain, loading the installed libdltpmix"
else not_ok "installed dltrain"; { command -v dltrain; echo "$ldd_out"; } | diag; fi
# A package is built without --enable-test-hooks: the fault-injection variables change nothing (with
# the hooks the 30 s stall would pass the 10 s --stall-timeout; 2 s was passed by a real step on a loaded machine).
rdv=$(mktemp -d /tmp/dlt-rdv-XXXXXX)
stall=$(DLT_TEST_STALL=compute:2:30 DLT_TEST_SLOW_COMPUTE=50 DLT_TEST_FAULT=2 timeout 60 dltrain train --synthetic --arch resnet18 --width 0.25 --image-size 32 \
  --batch 4 --synthetic-size 32 --steps 4 --stall-timeout 10 --log-every 0 2>&1); src=$?
env_out=$(env -u SLURM_JOB_ID DLTPMIX_TEST_RENDEZVOUS="$rdv" DLTPMIX_TEST_RANK=1 DLTPMIX_TEST_SIZE=2 timeout 30 dltrain env 2>&1); erc=$?
if ((src == 0 && erc == 0)) && [[ $stall == *"done: 4 steps"* && $env_out == *"1 rank(s) on 1 node(s), namespace singleton"* && -z $(ls -A "$rdv") ]] &&
   ! grep -q -e DLT_TEST_STALL -e DLT_TEST_SLOW_COMPUTE -e DLT_TEST_FAULT -e DLT_TEST_ENV_ALLOC_FAIL_RANK /usr/bin/dltrain && ! grep -q DLTPMIX_TEST_RENDEZVOUS "/usr/lib/$ARCH/libdltpmix.so.0"; then
  ok "the packages carry no test hooks: DLT_TEST_STALL, DLT_TEST_SLOW_COMPUTE, DLT_TEST_FAULT and DLTPMIX_TEST_RENDEZVOUS change nothing, no such name (nor DLT_TEST_ENV_ALLOC_FAIL_RANK) is in the binaries"
else not_ok "test hooks in the packages (train rc=$src, env rc=$erc)"; { echo "$stall" | tail -3; echo "$env_out" | head -3; } | diag; fi
rm -rf "$rdv"

# libdltpmix-dev: a program from the installed header, pkg-config file and library only.
cat > "$WORK/probe.c" <<'C'
#include <dltpmix.h>
#include <stdio.h>
int main(void)
{
    char err[256];
    dltpmix_ctx *ctx;
    int token = 0;
    if (dltpmix_init(&ctx, NULL, err, sizeof(err))) { fprintf(stderr, "%s\n", err); return 1; }
    const dltpmix_info *i = dltpmix_get_info(ctx);
    if (i->rank == 0) token = 4242;
    if (dltpmix_bcast(ctx, 0, &token, sizeof(token))) { fprintf(stderr, "%s\n", dltpmix_error(ctx)); return 1; }
    printf("probe %d/%d token %d\n", i->rank, i->size, token);
    return dltpmix_finalize(ctx) ? 1 : 0;
}
C
out=$(cc -o "$WORK/probe" "$WORK/probe.c" $(pkg-config --cflags --libs dltpmix) 2>&1); rc=$?
if ((rc == 0)) && [[ $(pkg-config --modversion dltpmix) == "$(dpkg-query -W -f='${Version}' libdltpmix-dev | sed 's/-[^-]*$//')" ]]; then
  ok "libdltpmix-dev: a program builds with pkg-config dltpmix (version $(pkg-config --modversion dltpmix))"
else not_ok "build against libdltpmix-dev (rc=$rc)"; echo "$out" | diag; fi

# The RPM of the same build (make rpm, .ci/run builds it before this script): its requirement, and
# its %pre run with a stand-in rpm on PATH answering for the slurm package (this machine's rpm
# database holds no Slurm).
RPMDIR=${DLT_RPMDIR:-$DLT_BUILDDIR/_rpm/RPMS}
rpmf=$(ls "$RPMDIR"/*/slurm-spank-dltrain-[0-9]*.rpm 2>/dev/null | head -1)
if [[ -z $rpmf ]] || ! command -v rpm >/dev/null; then
  ok "# SKIP no slurm-spank-dltrain RPM in $RPMDIR (make rpm RPMBUILD_FLAGS=--nodeps builds it) or no rpm"
else
  req=$(rpm -qp --requires "$rpmf" 2>/dev/null | grep '^slurm ' | sort | tr '\n' ',')
  rpm -qp --qf '%{PREIN}' "$rpmf" >"$WORK/rpm-pre.sh" 2>/dev/null
  mkdir -p "$WORK/fakerpm"
  printf '#!/bin/sh\n[ -n "$FAKE_SLURM" ] || { echo "package slurm is not installed"; exit 1; }\necho "$FAKE_SLURM"\n' >"$WORK/fakerpm/rpm"
  chmod 755 "$WORK/fakerpm/rpm"
  rlater=$(FAKE_SLURM=$LATER.0 PATH=$WORK/fakerpm:$PATH sh "$WORK/rpm-pre.sh" 2>&1); rlrc=$?
  rsame=$(FAKE_SLURM=$SERIES.99 PATH=$WORK/fakerpm:$PATH sh "$WORK/rpm-pre.sh" 2>&1); rsrc=$?
  if [[ $req == "slurm < $(printf '%d.%02d' "$S_MAJOR" $((S_MINOR + 1))),slurm >= $SERIES," ]] && ((rlrc != 0 && rsrc == 0)) &&
    [[ $rlater == *"built against the headers of Slurm $SERIES, but the installed Slurm is $LATER (rpm package slurm $LATER.0)"* ]]; then
    ok "the RPM requires slurm >= $SERIES, < the next series; its %pre refuses Slurm $LATER.0 naming both releases and passes $SERIES.99"
  else not_ok "the RPM's Slurm bound and %pre (requires '$req', %pre rc $rlrc for $LATER.0, $rsrc for $SERIES.99)"; { echo "$rlater"; echo "$rsame"; } | diag; fi
  rm -rf "$WORK/fakerpm" "$WORK/rpm-pre.sh"
fi

# The local cluster with the installed plugin: cluster.sh starts from a copy; plugstack.conf is then
# rewritten to the shipped snippet's line, switched on, naming the installed path, with the test
# cluster's arguments after it (per-node topo_dir, the stand-in NVML) in place of the shipped line's
# own values of those keys (a key given twice is refused), and the copy is removed so no other
# plugin file exists.
if ! "$CLUSTER" up 2>"$WORK.cluster.log"; then
  echo "Bail out! cluster did not start: $(tail -3 "$WORK.cluster.log" | tr '\n' ' ')"; exit 1
fi
eval "$("$CLUSTER" env)"
conf=$DLT_CLUSTER_DIR/etc/plugstack.conf
test_args=$(sed -n "s|^required $DLT_CLUSTER_DIR/lib/spank_dltrain.so ||p" "$conf")
[[ $test_args == *nvml_lib=* ]] || { echo "Bail out! the cluster's stand-in NVML is not built (make check builds tests/fake_nvml)"; exit 1; }
# The line is switched on where an admin switches it on, in the installed snippet (the test's
# arguments appended), and the cluster's plugstack.conf includes that file, as Debian's does.
shipped=$(sed -n 's|^#required ||p' "$SNIPPET")
for kv in $test_args; do shipped=$(sed "s| ${kv%%=*}=[^ ]*||g" <<<"$shipped"); done
sed -i "s|^#required .*\$|required $shipped $test_args|" "$SNIPPET"
echo "include $SNIPPET" > "$conf"
enabled=$(grep -v '^#' "$SNIPPET")
rm -f "$DLT_CLUSTER_DIR/lib/spank_dltrain.so"
out=$(srun --help 2>&1)
if [[ $(awk '{print $2}' <<<"$enabled") == "$PLUGIN" && $(wc -l <<<"$enabled") == 1 && $out == *--dl-train* ]]; then ok "plugstack.conf names the installed plugin only; srun offers --dl-train"
else not_ok "cluster with the installed plugin"; { cat "$conf" "$SNIPPET"; echo "$out" | grep -i -e dl-train -e error; } | diag; fi

# Slurm's own loader (srun) on the plugin with its plugin_version changed: another micro release of
# the same series loads; another series is refused (src/common/plugin.c masks 0xffff00), and with
# "required" srun fails. The installed snippet is put back afterwards.
cp "$SNIPPET" "$WORK/snippet.on"
cp "$PLUGIN" "$WORK/micro.so" && set_plugin_version "$WORK/micro.so" $(((pv & 0xffff00) | 0xfe))
cp "$PLUGIN" "$WORK/later.so" && set_plugin_version "$WORK/later.so" $(((${LATER%.*} << 16) | (10#${LATER#*.} << 8)))
sed "s|^required $PLUGIN |required $WORK/micro.so |" "$WORK/snippet.on" >"$SNIPPET"
mout=$(timeout 60 srun --help 2>&1)
sed "s|^required $PLUGIN |required $WORK/later.so |" "$WORK/snippet.on" >"$SNIPPET"
lout=$(timeout 60 srun --quiet -N1 true 2>&1); lrc=$?
cp "$WORK/snippet.on" "$SNIPPET"
if [[ $(plugin_version_of "$WORK/micro.so") == $(printf '0x%06x' $(((pv & 0xffff00) | 0xfe))) && $mout == *--dl-train* ]] && ((lrc != 0)) &&
  [[ $lout == *"Incompatible"* && $lout != *--dl-train* ]]; then
  ok "Slurm $SLURMD_V's srun loads the plugin with plugin_version $SERIES.254 and refuses it with $LATER.0 (required: srun fails)"
else not_ok "Slurm's version check on the plugin (later: srun rc=$lrc)"; { echo "$mout" | grep -i -e dl-train -e error; echo "$lout"; } | tail -8 | diag; fi
echo "$lout" | grep -i incompatible | head -2 | diag
rm -f "$WORK/micro.so" "$WORK/later.so" "$WORK/snippet.on"

out=$(DLT_FAKE_NVML=$DLT_CLUSTER_DIR/fixture/nvml.txt timeout 60 dltrain-topo "$DLT_CLUSTER_DIR/lib/libfakenvml.so" "$DLT_CLUSTER_DIR/fixture" matrix 2>&1); rc=$?
if ((rc == 0)) && [[ $(command -v dltrain-topo) == /usr/sbin/dltrain-topo && $out == *"4 GPU(s)"* ]]; then
  ok "the node check: /usr/sbin/dltrain-topo shows the node's GPUs, NICs and NUMA nodes"
else not_ok "dltrain-topo (rc=$rc)"; { command -v dltrain-topo; echo "$out"; } | diag; fi

SRUN=(srun --quiet -N2 --ntasks-per-node=2 --gpus-per-node=2 --mpi=pmix --dl-train)
out=$(timeout 120 "${SRUN[@]}" dltrain env 2>&1); rc=$?
if ((rc == 0)) && [[ $out == *"4 rank(s) on 2 node(s)"* && $out == *"all-reduce check passed"* ]] &&
   [[ $(grep -c 'nccl_topo.xml' <<<"$out") -eq 4 ]]; then
  ok "srun --mpi=pmix --dl-train dltrain env: 4 ranks on 2 nodes, each with the plugin's topology file"
else not_ok "srun --dl-train dltrain env (rc=$rc)"; echo "$out" | diag; fi
echo "$out" | diag

out=$(timeout 120 "${SRUN[@]}" bash -c 'echo "$DLT_OPTS $DLT_LOCAL_GPU $(command -v dltrain)"' 2>&1); rc=$?
if ((rc == 0)) && [[ $(grep -cxE 'bind=closest,gpus=task,nccl=auto,nic=auto [0-3] /usr/bin/dltrain' <<<"$out") -eq 4 ]]; then
  ok "each task gets the plugin's settings (DLT_OPTS, DLT_LOCAL_GPU) and runs /usr/bin/dltrain"
else not_ok "task environment under the installed plugin"; echo "$out" | diag; fi

out=$(timeout 300 "${SRUN[@]}" dltrain train --synthetic --arch resnet18 --width 0.25 --image-size 32 --classes 4 \
  --batch 8 --synthetic-size 64 --steps 2 --warmup-epochs 0 --log-every 1 --checkpoint-dir "$WORK/ckpt" 2>&1); rc=$?
if ((rc == 0)) && [[ $out == *"on 4 rank(s)"* && -f $WORK/ckpt/ckpt-00000002.safetensors ]]; then
  ok "srun ... --dl-train dltrain train: 2 synchronous steps on 4 ranks, checkpoint written"
else not_ok "short training with the installed trainer (rc=$rc)"; { echo "$out" | tail -12; ls "$WORK/ckpt" 2>&1; } | diag; fi
echo "$out" | tail -4 | diag

out=$(timeout 120 srun --quiet -N2 --ntasks-per-node=1 --mpi=pmix "$WORK/probe" 2>&1 | sort); rc=$?
if ((rc == 0)) && [[ $out == $'probe 0/2 token 4242\nprobe 1/2 token 4242' ]]; then ok "the libdltpmix-dev program bootstraps 2 ranks under srun --mpi=pmix"
else not_ok "libdltpmix-dev program under srun (rc=$rc)"; echo "$out" | diag; fi

# A Slurm upgrade as apt sees it, with the plugin installed and its line on (stand-in packages of
# every installed Slurm package, simulated with apt-get -s: nothing is installed). To a later series
# apt removes slurm-spank-dltrain (and nothing else of ours), so its prerm switches the line off (the
# removal test below); within the series it keeps the plugin.
if later_debs=$(standin_debs "$LATER.0-1") && micro_debs=$(standin_debs "$SERIES.99-1"); then
  # shellcheck disable=SC2086
  uout=$(timeout 120 apt-get -s -q install $later_debs 2>&1); urc=$?
  # shellcheck disable=SC2086
  sout=$(timeout 120 apt-get -s -q install $micro_debs 2>&1); src=$?
  removed=$(awk '$1 == "Remv" { print $2 }' <<<"$uout" | sort | tr '\n' ' ')
  if ((urc == 0)) && [[ $removed == "slurm-spank-dltrain " ]] && grep -q "^Inst slurm-wlm-basic-plugins \[$have\] ($LATER.0-1 " <<<"$uout" &&
    grep -q "^Inst slurmd .*($LATER.0-1 " <<<"$uout"; then
    ok "apt upgrading Slurm to $LATER (simulated) removes slurm-spank-dltrain, nothing else of ours, instead of leaving a plugin Slurm refuses"
  else not_ok "apt's plan for a Slurm upgrade to $LATER (rc=$urc, removes: $removed)"; echo "$uout" | grep -E '^(Inst|Remv|E:|W:)' | diag; fi
  if ((src == 0)) && ! grep -q '^Remv' <<<"$sout" && grep -q "^Inst slurm-wlm-basic-plugins \[$have\] ($SERIES.99-1 " <<<"$sout"; then
    ok "apt upgrading Slurm within $SERIES (to $SERIES.99-1, simulated) keeps slurm-spank-dltrain"
  else not_ok "apt's plan for a Slurm $SERIES.99 upgrade (rc=$src)"; echo "$sout" | grep -E '^(Inst|Remv|E:|W:)' | diag; fi
  # dpkg -i bypasses apt's plan: the package's Conflicts make dpkg refuse to unpack a later
  # series of what loads the plugin (--no-act: nothing is unpacked either way); within the series
  # it has nothing to say against it.
  conf=$(dpkg-query -W -f='${Conflicts}' slurm-spank-dltrain)
  refused=() let_in=()
  for p in slurmd slurm-client slurm-wlm-basic-plugins; do
    d=$(grep "/${p}_$LATER.0-1_" <<<"$later_debs"); m=$(grep "/${p}_$SERIES.99-1_" <<<"$micro_debs")
    [[ -n $d ]] || continue
    dout=$(timeout 60 dpkg --no-act -i "$d" 2>&1) || [[ $dout != *"slurm-spank-dltrain conflicts with $p (>= "* ]] || refused+=("$p")
    timeout 60 dpkg --no-act -i "$m" >/dev/null 2>&1 && let_in+=("$p")
  done
  if [[ ${#refused[@]} -ge 2 && ${#refused[@]} == "${#let_in[@]}" && $conf == *"slurmd (>= $hi)"* && $conf == *"slurm-client (>= $hi)"* ]]; then
    ok "dpkg -i of a later Slurm ($LATER.0-1: ${refused[*]}) is refused before unpacking (Conflicts: $conf); $SERIES.99-1 is let in"
  else not_ok "dpkg -i of a later Slurm (refused: ${refused[*]:-none}; let in: ${let_in[*]:-none})"; { echo "Conflicts: $conf"; echo "$dout" | tail -5; } | diag; fi
else
  not_ok "building the stand-in Slurm packages"; not_ok "building the stand-in Slurm packages"; not_ok "building the stand-in Slurm packages"
fi
rm -rf "$WORK"/standin-*

# apt-get remove (not purge) with the line switched on: the plugin goes, the line goes off with it
# (marked), srun keeps working; a reinstall switches the admin's line back on.
out=$(timeout 300 apt-get remove -y -q slurm-spank-dltrain 2>&1); rc=$?
sout=$(timeout 60 srun --quiet -N2 true 2>&1); src=$?
if ((rc == 0 && src == 0)) && [[ ! -e $PLUGIN && -z $(grep -v '^#' "$SNIPPET") && $(grep -c "^#disabled-by-removal# required $PLUGIN " "$SNIPPET") == 1 && $sout != *"initialization failed"* ]]; then
  ok "apt-get remove slurm-spank-dltrain with the line on: the line is switched off with the plugin, srun still works"
else not_ok "remove with the line on (rc=$rc, srun rc=$src)"; { echo "$out" | tail -4; echo "$sout"; cat "$SNIPPET"; } | diag; fi
out=$(timeout 300 apt-get install -y -q --no-install-recommends "${debs[0]}" 2>&1); rc=$?
hout=$(srun --help 2>&1)
if ((rc == 0)) && [[ -e $PLUGIN && $(grep -v '^#' "$SNIPPET") == "$enabled" && $hout == *--dl-train* ]]; then
  ok "reinstalling slurm-spank-dltrain switches the admin's line back on as it was; srun offers --dl-train"
else not_ok "reinstall after remove (rc=$rc)"; { echo "$out" | tail -4; cat "$SNIPPET"; } | diag; fi
# The postinst checks an active line (the stack slurmd reads: SLURM_CONF reaches it through apt-get).
lineno=$(grep -n -v '^#' "$SNIPPET" | cut -d: -f1)
if [[ $out == *"slurm-spank-dltrain: $SNIPPET:$lineno: OK: required $PLUGIN: default_bind=closest"* ]]; then
  ok "the reinstall checks the active line: $SNIPPET:$lineno: OK with its settings"
else not_ok "postinst check of the good line"; echo "$out" | grep -i -e dltrain -e warn | tail -8 | diag; fi
# A refused line: the install goes on, saying so loudly; srun without --dl-train keeps working.
cp "$SNIPPET" "$WORK/snippet.good"
sed -i 's/ default_bind=closest / default_bind=numa /' "$SNIPPET"
out=$(timeout 300 dpkg-reconfigure slurm-spank-dltrain 2>&1); rc=$?
sout=$(timeout 60 srun --quiet -N2 true 2>&1); src=$?
if ((rc == 0 && src == 0)) && [[ $out == *"$SNIPPET:$lineno: plugstack.conf default_bind='numa' invalid (closest|none)"* &&
  $out == *"WARNING: the dltrain plugstack line is refused"* && -z $sout ]]; then
  ok "postinst with a refused line: succeeds, names $SNIPPET:$lineno and warns; srun without --dl-train still works"
else not_ok "postinst with a refused line (rc=$rc, srun rc=$src)"; { echo "$out" | tail -12; echo "$sout"; } | diag; fi
cp "$WORK/snippet.good" "$SNIPPET"

sleep 1
check "nodes idle after the steps (nothing drained)" bash -c '[[ $(sinfo -h -N -o "%t" | sort -u) == idle ]]'
cluster_down

out=$(timeout 300 apt-get purge -y -q "${PKGS[@]}" 2>&1); rc=$?
left_pkgs=$(for p in "${PKGS[@]}"; do dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' "$p" 2>/dev/null; done | grep -v '^un ' || true)
if ((rc == 0)) && [[ -z $left_pkgs ]]; then installed=0; ok "apt-get purge removes all four packages"
else not_ok "apt-get purge (rc=$rc)"; { echo "$out" | tail -8; echo "$left_pkgs"; } | diag; fi

# Every path the packages held is gone, except directories other packages own (/usr/bin, ...).
left=$(while read -r f; do
  [[ $f == /. ]] && continue
  [[ -e $f || -L $f ]] || continue
  [[ -d $f && ! -L $f ]] && dpkg -S "$f" >/dev/null 2>&1 && continue
  echo "$f"
done < "$WORK/files")
stray=$(find /etc /usr -xdev \( -name '*dltrain*' -o -name '*dltpmix*' \) -not -path '/usr/local/*' 2>/dev/null)
if [[ -z $left && -z $stray ]]; then ok "nothing of the packages is left ($(wc -l < "$WORK/files") paths checked, and no *dltrain*/*dltpmix* under /etc, /usr)"
else not_ok "files left after purge"; { echo "$left"; echo "$stray"; } | diag; fi

if [[ $(slurm_etc) == "$etc_before" ]]; then ok "Slurm's configuration files are byte for byte as before the install"
else not_ok "Slurm configuration differs after purge"; diff <(echo "$etc_before") <(slurm_etc) | diag; fi
exit 0
