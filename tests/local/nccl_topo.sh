#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The plugin's NCCL topology file judged by NCCL's own topology code, without a GPU. tests/nccl/build.sh
# builds NCCL's host-side src/graph code (from ../shared/nccl-src, under the build tree, cached) with
# stand-ins for what needs a device (tests/nccl/*.cc: NVML from the fixture's nvml.txt, /sys read
# under the fixture, a net plugin with net_ib's / net_socket's properties, the bootstrap, CUDA).
# For each fixture node of tests/fixtures/mktopo.py with GPUs, tests/nccl/harness runs the sequence
# src/init.cc runs (ncclTopoGetSystem, ComputePaths, TrimSystem, ComputePaths, SearchInit, Compute
# for ring and tree) once with NCCL_TOPO_FILE set to the plugin's XML (dltrain-topo ... xml) and once
# on NCCL's own detection of the same node, for a job of that node alone and one of two such nodes
# (where the search goes through the NICs), with NCCL_NET_GDR_LEVEL and NCCL_P2P_LEVEL unset and each
# set to PIX. A test fails where the two differ in a path (type and bandwidth, GPU to GPU and GPU to
# NIC) or in the ring's or tree's channels, bandwidths or path types, naming both values.
. "$(dirname "$0")/../slurm/lib.sh"
TOOL=$DLT_BUILDDIR/dltrain-topo
FAKE=$DLT_BUILDDIR/tests/fake_nvml/.libs/libfakenvml.so
[[ -x $TOOL && -f $FAKE ]] || skip_all "dltrain-topo or the fake NVML not built"
command -v python3 >/dev/null || skip_all "python3 missing"
# Only what each run sets: no NCCL_* of the caller's environment.
for v in $(compgen -e | grep '^NCCL_'); do unset "$v"; done
B=$DLT_BUILDDIR/tests/nccl/build
t0=$(date +%s)
built=$(nice -n 10 bash "$DLT_SRCDIR/tests/nccl/build.sh" "$B" 2>&1); rc=$?
((rc == 77)) && skip_all "$(tail -1 <<<"$built")"
FIXTURES=(lab2 c4130k dgx1 nvswitch8 pcie4 pex4 nic2sw)
SETTINGS=("" NCCL_NET_GDR_LEVEL=PIX NCCL_P2P_LEVEL=PIX)
tap_plan $((1 + ${#FIXTURES[@]} * ${#SETTINGS[@]} + 1))
rm -rf "$WORK"; mkdir -p "$WORK"
if ((rc == 0)); then ok "NCCL's topology code and the stand-ins built ($(tail -1 <<<"$built" | cut -c1-200); $(($(date +%s) - t0)) s)"
else
  not_ok "NCCL's topology code did not build"; echo "$built" | tail -20 | diag
  for ((i = 1; i < ${#FIXTURES[@]} * ${#SETTINGS[@]} + 2; i++)); do not_ok "not run: no harness"; done
  exit 0
fi
H=$B/harness

# compare OURS OWN: the differing keys, both values; status 1 when there are some.
compare() {
  python3 - "$@" <<'PY'
import sys
def load(path):
    d = {}
    for line in open(path):
        k, _, v = line.rstrip("\n").partition("\t")
        d[k] = v
    return d
ours, own = load(sys.argv[1]), load(sys.argv[2])
diff = [k for k in sorted(set(ours) | set(own)) if ours.get(k) != own.get(k)]
for k in diff:
    print("%s: plugin XML %s, NCCL's own %s" % (k, ours.get(k, "(none)"), own.get(k, "(none)")))
sys.exit(1 if diff else 0)
PY
}

for t in "${FIXTURES[@]}"; do
  fx=$WORK/fx/$t
  python3 "$DLT_SRCDIR/tests/fixtures/mktopo.py" "$t" "$fx"
  xmlok=1
  DLT_FAKE_NVML=$fx/nvml.txt "$TOOL" "$FAKE" "$fx" xml >"$WORK/$t.xml" 2>"$WORK/$t.xml.err" || xmlok=0
  ngpus=$(grep -c '^gpu ' "$fx/nvml.txt")
  for s in "${SETTINGS[@]}"; do
    name="$t, ${s:-NCCL_NET_GDR_LEVEL and NCCL_P2P_LEVEL unset}"
    tag=$t.${s:-default}
    if ((!xmlok)); then not_ok "$name: dltrain-topo wrote no XML"; diag <"$WORK/$t.xml.err"; continue; fi
    # shellcheck disable=SC2086 # $s is one VAR=VALUE or nothing
    env $s "$H" --sysroot "$fx" --nvml "$fx/nvml.txt" --out "$WORK/$tag.own" >"$WORK/$tag.own.log" 2>&1 &&
      env $s "$H" --sysroot "$fx" --nvml "$fx/nvml.txt" --xml "$WORK/$t.xml" --out "$WORK/$tag.ours" >"$WORK/$tag.ours.log" 2>&1
    hrc=$?
    if ((hrc != 0)); then
      not_ok "$name: the harness failed (status $hrc)"; tail -5 "$WORK/$tag.own.log" "$WORK/$tag.ours.log" 2>/dev/null | diag
    elif ! grep -q -x -F "1node GPUs detected	$ngpus" "$WORK/$tag.own" || grep -q -x -F '1node ring nChannels	0' "$WORK/$tag.own"; then
      not_ok "$name: NCCL's own detection did not see the node's $ngpus GPUs or found no ring"; diag <"$WORK/$tag.own"
    elif d=$(compare "$WORK/$tag.ours" "$WORK/$tag.own"); then
      ok "$name: the plugin's XML and NCCL's own detection agree ($(grep -c . "$WORK/$tag.own") values: paths GPU->GPU and GPU->NIC, ring and tree, 1 and 2 nodes)"
    else
      not_ok "$name: the plugin's XML and NCCL's own detection differ in $(grep -c . <<<"$d") value(s)"
      echo "$d" | diag
    fi
  done
done

# The PEX fixture is there for ncclTopoFlattenBcmSwitches: GPUs of the two virtual switches are one
# PCIe switch apart (PIX) only once NCCL flattened it, in both runs.
k='1node path GPU 0000:05:00.0 -> GPU 0000:0a:00.0'
own=$(grep -F "$k	" "$WORK/pex4.default.own" 2>/dev/null | cut -f2) ours=$(grep -F "$k	" "$WORK/pex4.default.ours" 2>/dev/null | cut -f2)
if [[ $own == PIX* && $ours == PIX* ]]; then ok "pex4: NCCL flattened the Broadcom PEX switch: GPU 05:00.0 -> 0a:00.0 is $own (own) and $ours (plugin XML)"
else not_ok "pex4: GPU 05:00.0 -> 0a:00.0 is '$own' (own), '$ours' (plugin XML), not PIX: the PEX switch was not flattened"; fi
exit 0
