#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# topo_hwloc.sh [REPS]: the plugin's sysfs reader against hwloc (tests/bench/topo_hwloc_bench), on this
# machine and on fixture nodes (tests/fixtures/mktopo.py, which also writes the CPU, cache and NUMA
# distance files hwloc reads): median load time of each, hwloc from its own XML export, what each
# sees. The figures in doc/internals.md ("Topology: the sysfs reader and hwloc") come from here.
set -euo pipefail
REPS=${1:-51}
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=${DLT_BUILDDIR:-$(cd "$HERE/../.." && pwd)}
BENCH=$BUILD/tests/bench/topo_hwloc_bench
[[ -x $BENCH ]] || { echo "build it first: make tests/bench/topo_hwloc_bench (configure found no hwloc >= 2.0 if it is not in the Makefile)" >&2; exit 1; }
FX=$(mktemp -d /tmp/dltrain-topo-bench.XXXXXX)
trap 'rm -rf "$FX"' EXIT
echo "# $(uname -r), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg), hwloc $(pkg-config --modversion hwloc 2>/dev/null || echo '?')"
echo "== this machine (/)"
timeout 300 "$BENCH" / "$REPS"
echo "== this machine, hwloc without its x86 CPUID backend (HWLOC_COMPONENTS=-x86)"
HWLOC_COMPONENTS=-x86 timeout 300 "$BENCH" / "$REPS" | grep '^load'
for t in dgx1 lab2 nvswitch8 cloudvm; do
  python3 "$HERE/../fixtures/mktopo.py" "$t" "$FX/$t"
  echo "== fixture $t"
  timeout 300 "$BENCH" "$FX/$t" "$REPS" 2>&1 | grep -v '^\[hwloc'
done
