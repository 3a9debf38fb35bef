#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# dltrain-topo --check-plugstack on plugstack files written here (no Slurm needed): the exit status
# (0 good or no line, 1 bad, 2 usage), file:line through includes, the settings in effect, two lines,
# a missing required plugin file, a CRLF file, notes for lines Slurm ignores, PlugStackConfig from
# $SLURM_CONF, and nothing raw from the file reaching the terminal.
. "$(dirname "$0")/../slurm/lib.sh"
TOOL=$DLT_BUILDDIR/dltrain-topo
[[ -x $TOOL ]] || skip_all "dltrain-topo not built"
tap_plan 11
D=$WORK/etc
rm -rf "$D" && mkdir -p "$D/plugstack.conf.d" "$WORK/lib"
: > "$WORK/lib/spank_dltrain.so"
SO=$WORK/lib/spank_dltrain.so
printf '# site\nrequired /lib/other.so x=1\ninclude plugstack.conf.d/*.conf\n' > "$D/plugstack.conf"
# run NAME WANT_RC PATTERN... : the tool's output on $D/plugstack.conf (or $ARGS), status and fixed strings
run() {
  local name=$1 want=$2 out rc p miss=""; shift 2
  out=$("$TOOL" --check-plugstack ${ARGS-"$D/plugstack.conf"} 2>&1); rc=$?
  for p in "$@"; do [[ $out == *"$p"* ]] || miss+=" [$p]"; done
  if ((rc == want)) && [[ -z $miss ]]; then ok "$name"; else not_ok "$name (rc=$rc, want $want; missing:$miss)"; echo "$out" | diag; fi
}

printf '# dltrain\n\nrequired %s default_bind=numa\n' "$SO" > "$D/plugstack.conf.d/dltrain.conf"
run "a bad argument through an include: status 1, file:line and the refusal" 1 \
  "$D/plugstack.conf.d/dltrain.conf:3: plugstack.conf default_bind='numa' invalid (closest|none)" "fix the line(s) above"

printf 'required %s default_bind=none default_gpus=step nccl_ib_hca=mlx5_0\n' "$SO" > "$D/plugstack.conf.d/dltrain.conf"
run "a good line: status 0 and every setting in effect" 0 \
  "$D/plugstack.conf.d/dltrain.conf:1: OK: required $SO: default_bind=none default_nccl=auto default_gpus=step enable=optin allow_bind_none=yes topo_dir=/run/dltrain nvml_lib=libnvidia-ml.so.1 sysfs_root=/ nccl_socket_ifname=(unset) nccl_ib_hca=mlx5_0"

printf 'optional %s enable=always\n' "$SO" > "$D/plugstack.conf.d/zz.conf"
run "two lines loading the plugin: status 1, both named" 1 \
  "dltrain.conf:1: OK" "zz.conf:1: OK: optional" "2 lines load spank_dltrain.so"
rm -f "$D/plugstack.conf.d/zz.conf"

printf 'required %s topo_dir=/run/a topo_dir=/run/b\n' "$SO" > "$D/plugstack.conf.d/dltrain.conf"
run "a key given twice: status 1, both values named (not the last one silently winning)" 1 \
  "plugstack.conf: topo_dir given twice ('topo_dir=/run/a' and 'topo_dir=/run/b'): keep one"


printf 'required %s/missing/spank_dltrain.so\n' "$WORK" > "$D/plugstack.conf.d/dltrain.conf"
run "a required plugin file that does not exist: status 1" 1 "required $WORK/missing/spank_dltrain.so: No such file or directory"

printf 'required %s topo_dir=/run/d\r\n' "$SO" > "$D/plugstack.conf.d/dltrain.conf"
run "a CRLF line: the '\\r' Slurm keeps is refused and shown escaped" 1 "topo_dir='/run/d\\x0d' must be an absolute path"

printf '#required %s default_bind=numa\nRequired %s\n' "$SO" "$SO" > "$D/plugstack.conf.d/dltrain.conf"
run "no active line: status 0, said, and the line Slurm ignores noted" 0 \
  "no line loads spank_dltrain.so" "dltrain.conf:2: 'Required' is not required, optional or include: Slurm ignores this line"

printf 'required %s nccl_socket_ifname=\033[31mred\n' "$SO" > "$D/plugstack.conf.d/dltrain.conf"
out=$("$TOOL" --check-plugstack "$D/plugstack.conf" 2>&1); rc=$?
if ((rc == 1)) && [[ $out == *'\x1b[31mred'* && $out != *$'\033'* ]]; then ok "an escape sequence in the file reaches the terminal as \\x1b"
else not_ok "raw bytes from the file (rc=$rc)"; echo "$out" | cat -v | diag; fi

printf 'required %s\n' "$SO" > "$D/plugstack.conf.d/dltrain.conf"
printf 'ClusterName=x\nPlugStackConfig=%s/plugstack.conf # the site stack\n' "$D" > "$WORK/slurm.conf"
ARGS="" SLURM_CONF=$WORK/slurm.conf run "no FILE: PlugStackConfig from \$SLURM_CONF" 0 \
  "checking $D/plugstack.conf (PlugStackConfig in $WORK/slurm.conf)" "dltrain.conf:1: OK"
printf 'ClusterName=x\n' > "$WORK/slurm.conf"
ARGS="" SLURM_CONF=$WORK/slurm.conf run "no FILE and no PlugStackConfig: plugstack.conf beside slurm.conf" 0 \
  "checking $WORK/plugstack.conf (beside $WORK/slurm.conf, which sets no PlugStackConfig)" "does not exist"

bad=""
for a in "$WORK/absent.conf" "-x" "a b"; do
  # shellcheck disable=SC2086
  "$TOOL" --check-plugstack $a >/dev/null 2>&1; rc=$?
  ((rc == 2)) || bad+=" [$a]=$rc"
done
if [[ -z $bad ]]; then ok "usage errors (a missing named file, an option, two files): status 2"
else not_ok "usage errors:$bad"; fi
exit 0
