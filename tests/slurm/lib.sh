# SPDX-License-Identifier: Apache-2.0
# lib.sh: shared by the Slurm integration tests (sourced). TAP output, one local cluster per
# test script, brought up here and always taken down on exit.
set -u
DLT_SRCDIR=${DLT_SRCDIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
DLT_BUILDDIR=${DLT_BUILDDIR:-$DLT_SRCDIR}
CLUSTER=$DLT_SRCDIR/tests/slurm/cluster.sh
TAP_N=0
TAP_FAILED=0
WORK=$DLT_BUILDDIR/tests/tmp/$(basename "$0" .sh)

tap_plan() { echo "1..$1"; }
ok() { TAP_N=$((TAP_N + 1)); echo "ok $TAP_N - $*"; }
not_ok() { TAP_N=$((TAP_N + 1)); TAP_FAILED=$((TAP_FAILED + 1)); echo "not ok $TAP_N - $*"; }
diag() { sed 's/^/# /'; }
# check NAME COMMAND...: ok when the command succeeds; its output goes to the log on failure.
check() {
  local name=$1 out; shift
  if out=$("$@" 2>&1); then ok "$name"; else not_ok "$name"; printf '%s\n' "$out" | tail -20 | diag; fi
}
skip_all() { echo "1..0 # SKIP $*"; exit 0; }
# Whether the build under test has the fault-injection hooks (configure --enable-test-hooks:
# DLT_TEST_STALL, DLT_TEST_SLOW_COMPUTE, DLT_TEST_FAULT_GEMM_RANK, DLTPMIX_TEST_RENDEZVOUS); packages never do.
have_test_hooks() { grep -q '^#define DLT_TEST_HOOKS 1' "$DLT_BUILDDIR/config.h" 2>/dev/null; }
NO_HOOKS="# SKIP built without --enable-test-hooks (the fault-injection hook is not compiled in)"

# The start of a test of the dltrain program on this machine: DLTRAIN and MK set (else the whole
# script is skipped), OpenMP at 2 threads, PLAN tests planned, $WORK empty.
local_test_start() {
  DLTRAIN=$DLT_BUILDDIR/trainer/dltrain
  MK=$DLT_BUILDDIR/tests/fixtures/mkjpegs
  [[ -x $DLTRAIN && -x $MK ]] || skip_all "dltrain or mkjpegs not built"
  export OMP_NUM_THREADS=2
  tap_plan "$1"
  rm -rf "${WORK:?}" && mkdir -p "$WORK"
}

# The start of a multi-node data test: the JPEG maker built (else the whole script is skipped), a
# cluster of NODES slurmd up at port OFFSET, PLAN tests planned; MK and DLTRAIN set, the shell in /tmp
# and $WORK empty.
data_test_start() {
  MK=$DLT_BUILDDIR/tests/fixtures/mkjpegs
  [[ -x $MK ]] || skip_all "mkjpegs not built (make check builds it)"
  cluster_up "$1" "$2"
  tap_plan "$3"
  DLTRAIN=$DLT_BUILDDIR/trainer/dltrain
  cd /tmp || exit 1
  rm -rf "${WORK:?}"/*
}

# Brings a cluster up for this script (its own dir and ports) and down when the script exits.
# $1: node count; $2: port offset so scripts run by make -j do not collide (DLT_TEST_PORT_BASE moves
# them all, for two test runs on one machine).
cluster_up() {
  [[ ${DLT_SANITIZED:-} ]] && skip_all "sanitizer build: an ASan plugin cannot be loaded into slurmstepd (the non-sanitized build runs these)"
  [[ ${DLT_DISTCHECK_LIGHT:-} && $(basename "$0") != cluster_basic.sh ]] &&
    skip_all "DLT_DISTCHECK_LIGHT: .ci/run's make check ran this cluster test on the same sources (cluster_basic.sh runs here)"
  [[ $(id -u) -eq 0 ]] || skip_all "the local Slurm cluster needs root"
  command -v slurmctld >/dev/null 2>&1 || [[ -x /usr/sbin/slurmctld ]] || skip_all "Slurm daemons not installed (contrib/install-deps.sh)"
  export DLT_CLUSTER_NODES=$1
  export DLT_CLUSTER_PORT=$((${DLT_TEST_PORT_BASE:-17800} + 100 * $2))
  export DLT_CLUSTER_DIR=/tmp/dltrain-test-$(basename "$0" .sh)-$$
  export DLT_PLUGIN=$DLT_BUILDDIR/plugin/.libs/spank_dltrain.so
  trap cluster_down EXIT
  if ! "$CLUSTER" up 2>"$WORK.cluster.log"; then
    echo "Bail out! cluster did not start: $(tail -3 "$WORK.cluster.log" | tr '\n' ' ')"
    exit 1
  fi
  eval "$("$CLUSTER" env)"
}

cluster_down() {
  "$CLUSTER" down 2>/dev/null || true
  rm -rf "$DLT_CLUSTER_DIR"
}

mkdir -p "$WORK"
