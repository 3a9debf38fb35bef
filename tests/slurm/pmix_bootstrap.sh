#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# libdltpmix under a real srun --mpi=pmix across two slurmd: broadcasts from rank 0 and from the
# last rank, all-gather checked against Slurm's own SLURM_PROCID/LOCALID/NODEID, the refusal
# without PMIx, the bounded failure when a rank leaves or stalls, the NCCL bootstrap when one rank
# cannot join, and the MPI host communicator; a task whose Slurm variables disagree with PMIx (another
# PMIx than Slurm's) is refused naming the variable and both values, 0 included; a join mark
# (DLT_JOIN_MARK) that leaves /dev/shm/dltrain-joined-* through a folder is not made.
. "$(dirname "$0")/lib.sh"
cluster_up 2 2
tap_plan 19
PROBE=$DLT_BUILDDIR/tests/slurm/pmix_probe
DLTRAIN=$DLT_BUILDDIR/trainer/dltrain

out=$(timeout 60 srun --quiet -N2 -n4 --mpi=pmix "$PROBE" 2>&1); rc=$?
lines=$(grep -c '^probe rank=.* GOOD$' <<<"$out")
if ((rc == 0 && lines == 4)); then ok "srun -N2 -n4: 4 ranks bootstrap, all-gather matches SLURM_PROCID/LOCALID/NODEID"; else not_ok "bootstrap -N2 -n4 (rc=$rc, good=$lines)"; echo "$out" | diag; fi
b0=$(grep -o 'blob0=[0-9a-f]*' <<<"$out" | sort -u)
bn=$(grep -o 'blobN=[0-9a-f]*' <<<"$out" | sort -u)
if [[ $(wc -l <<<"$b0") -eq 1 && ${#b0} -eq $((6 + 256)) && $b0 != "blob0=$(printf '0%.0s' {1..256})" ]]; then ok "128-byte random blob from rank 0 identical on all ranks"; else not_ok "rank 0 broadcast"; echo "$b0" | diag; fi
if [[ $(wc -l <<<"$bn") -eq 1 && ${#bn} -eq $((6 + 256)) && ${b0#blob0=} != "${bn#blobN=}" ]]; then ok "a different blob from the last rank identical on all ranks"; else not_ok "last-rank broadcast"; echo "$bn" | diag; fi
# Block distribution puts 3 tasks on n1 and 1 on n2: local ranks and node ids must still match.
out=$(timeout 60 srun --quiet -N2 -n4 --distribution=block "$PROBE" 2>&1); rc=$?
if ((rc == 0)) && [[ $(grep -c 'GOOD$' <<<"$out") -eq 4 && $out == *"local=2/3 node=0/2"* ]]; then ok "uneven placement (3+1): local ranks and node ids match Slurm"; else not_ok "uneven placement"; echo "$out" | diag; fi
out=$(timeout 60 srun --quiet -N2 -n4 --distribution=cyclic "$PROBE" 2>&1); rc=$?
if ((rc == 0)) && [[ $(grep -c 'GOOD$' <<<"$out") -eq 4 ]] && grep -q 'probe rank=1 .*node=1/2' <<<"$out"; then ok "cyclic distribution: rank 1 on node 1, all checks pass"; else not_ok "cyclic distribution"; echo "$out" | diag; fi

out=$(timeout 60 srun --quiet -N2 -n4 --mpi=none "$PROBE" 2>&1); rc=$?
if ((rc != 0)) && [[ $out == *"--mpi=pmix"* ]]; then ok "--mpi=none: fails, saying to use --mpi=pmix"; else not_ok "--mpi=none refusal (rc=$rc)"; echo "$out" | diag; fi

start=$SECONDS
out=$(timeout 120 srun --quiet -N2 -n4 "$PROBE" --timeout 5 --exit-before-fence 3 2>&1); rc=$?
el=$((SECONDS - start))
if ((rc != 0 && rc != 124 && el < 30)); then ok "a rank exiting before the fence ends the step with an error in ${el}s (no hang)"; else not_ok "rank exit before fence (rc=$rc, ${el}s)"; echo "$out" | diag; fi

start=$SECONDS
out=$(timeout 120 srun --quiet -N2 -n4 "$PROBE" --timeout 4 --stall-before-fence 2 30 2>&1); rc=$?
el=$((SECONDS - start))
if ((rc != 0 && rc != 124 && el < 25)) && [[ $out == *"timed out after 4 s"* && $out == *"never arrived: 2"* ]]; then
  ok "a stalled rank: the others time out in ${el}s naming rank 2"
else not_ok "stalled rank timeout (rc=$rc, ${el}s)"; echo "$out" | diag; fi

out=$(timeout 60 srun --quiet -N2 -n4 --ntasks-per-node=2 "$DLTRAIN" env 2>&1); rc=$?
if ((rc == 0)) && [[ $out == *"4 rank(s) on 2 node(s)"* && $out == *"all-reduce check passed (mpi, sum of ranks 6)"* ]]; then ok "dltrain env: MPI host communicator direct-launched by srun --mpi=pmix"; else not_ok "dltrain env over MPI (rc=$rc)"; echo "$out" | diag; fi

# A contract that differs across ranks (one task's RANK overridden) fails the command on every
# rank (it exited 0, printing the difference only).
out=$(timeout 60 srun --quiet -N2 -n4 --ntasks-per-node=2 --dl-train=gpus=none sh -c '[ "$SLURM_PROCID" = 3 ] && export RANK=9; exec "$0" env' "$DLTRAIN" 2>&1); rc=$?
if ((rc == 1)) && [[ $out == *"rank 3 (host "*"): RANK=9, but PMIx says 3"* && $out == *"the torch.distributed contract is wrong in 1 place(s)"* ]]; then
  ok "dltrain env: a contract that differs across ranks (RANK=9 on rank 3) names it and exits 1"
else not_ok "dltrain env with a wrong RANK (rc=$rc)"; echo "$out" | diag; fi
# One rank cannot allocate the reports (a test hook): it still takes part in an agreement, so
# every rank exits 1 within seconds, rank 0 naming that rank once (the others waited in the
# all-gather for ever, before).
if have_test_hooks; then
start=$SECONDS
out=$(DLT_TEST_ENV_ALLOC_FAIL_RANK=2 timeout 60 srun --quiet -N2 -n4 --ntasks-per-node=2 bash -c \
  '"$0" env; echo "task $SLURM_PROCID exit $?"' "$DLTRAIN" 2>&1); rc=$?
el=$((SECONDS - start))
want="dltrain: rank 2 on node n2: out of memory for the reports of 4 ranks"
if ((rc == 0 && el < 20)) && [[ $(grep -cF -- "$want" <<<"$out") == 1 && $(grep -c '^task [0-3] exit 1$' <<<"$out") == 4 &&
      $out != *"rank(s) on"* ]]; then
  ok "dltrain env: one rank without memory for the reports: every rank exits 1 in ${el}s, rank 2 named once"
else not_ok "dltrain env with a failed allocation on rank 2 (rc=$rc, ${el}s)"; echo "$out" | diag; fi
else ok "$NO_HOOKS"; fi
# The NCCL bootstrap when one rank cannot join (rank 1's node has no loadable CUDA runtime; rank 0
# has stand-in libraries that work): every rank ends at once naming rank 1's cause, where rank 0
# used to wait out the timeout in a broadcast rank 1 never joined.
rt=$(strings "$DLT_BUILDDIR/pmix/.libs/libdltpmix.so" 2>/dev/null | grep -o 'libcudart\.so\.[0-9]*' | head -1)
if [[ -n $rt ]]; then
  mkdir -p "$WORK/fakecu" "$WORK/nocu"
  printf 'int cudaSetDevice(int d) { (void)d; return 0; }\nconst char *cudaGetErrorString(int e) { (void)e; return "stand-in"; }\n' >"$WORK/fakecu/rt.c"
  printf '%s\n' '#include <string.h>' 'typedef struct { char internal[128]; } ncclUniqueId;' \
    'int ncclGetUniqueId(ncclUniqueId *id) { memset(id, 7, sizeof(*id)); return 0; }' \
    'int ncclCommInitRankConfig(void **c, int n, ncclUniqueId id, int r, void *cfg) { (void)c; (void)n; (void)id; (void)r; (void)cfg; return 3; }' \
    'int ncclCommGetAsyncError(void *c, int *e) { (void)c; *e = 0; return 0; }' 'int ncclCommAbort(void *c) { (void)c; return 0; }' \
    'const char *ncclGetErrorString(int r) { (void)r; return "stand-in"; }' 'const char *ncclGetLastError(void *c) { (void)c; return ""; }' >"$WORK/fakecu/nccl.c"
  : >"$WORK/nocu/$rt"
  if cc -shared -fPIC -o "$WORK/fakecu/$rt" "$WORK/fakecu/rt.c" && cc -shared -fPIC -o "$WORK/fakecu/libnccl.so.2" "$WORK/fakecu/nccl.c"; then
    start=$SECONDS
    out=$(timeout 60 srun --quiet -N2 -n2 bash -c 'if [ "$SLURM_PROCID" = 1 ]; then d=nocu; else d=fakecu; fi
      LD_LIBRARY_PATH=$1/$d exec "$0" --timeout 30 --nccl-init 0' "$PROBE" "$WORK" 2>&1); rc=$?
    el=$((SECONDS - start))
    if ((rc != 0 && el < 20)) && [[ $out == *"probe rank=0 nccl-init rc="*"1 of 2 rank(s) cannot join NCCL, every rank stops (rank 1: dltpmix: cannot load $rt"* &&
          $out == *"probe rank=1 nccl-init rc="*"dltpmix: cannot load $rt"*"1 of 2 rank(s) cannot join NCCL"* ]]; then
      ok "NCCL bootstrap: rank 1 without a CUDA runtime: both ranks end in ${el}s, rank 0 naming rank 1's cause"
    else not_ok "NCCL bootstrap with one rank unable to join (rc=$rc, ${el}s)"; echo "$out" | diag; fi
    # The same when a rank fails before it can call the bootstrap (its device set-up) and says so.
    start=$SECONDS
    out=$(LD_LIBRARY_PATH=$WORK/fakecu timeout 60 srun --quiet -N2 -n2 "$PROBE" --timeout 30 --nccl-init 0 --nccl-refuse-rank 1 2>&1); rc=$?
    el=$((SECONDS - start))
    if ((rc != 0 && el < 20)) && [[ $out == *"probe rank=0 nccl-init rc="*"(rank 1: probe: this rank's device set-up failed)"* ]]; then
      ok "dltpmix_nccl_comm_refuse on rank 1: rank 0's bootstrap ends in ${el}s with rank 1's reason"
    else not_ok "dltpmix_nccl_comm_refuse (rc=$rc, ${el}s)"; echo "$out" | diag; fi
  else not_ok "cannot build the stand-in CUDA runtime and NCCL"; ok "# SKIP no stand-ins"; fi
else ok "# SKIP libdltpmix built without NCCL"; ok "# SKIP libdltpmix built without NCCL"; fi
out=$(timeout 60 srun --quiet -N1 -n1 "$DLTRAIN" env --comm single 2>&1); rc=$?
if ((rc == 0)) && [[ $out == *"1 rank(s) on 1 node(s)"* && $out == *"(single, sum of ranks 0)"* ]]; then ok "single-rank path needs no MPI"; else not_ok "single rank (rc=$rc)"; echo "$out" | diag; fi

out=$(env -u SLURM_CONF -u PMIX_NAMESPACE SLURM_STEP_NUM_TASKS=1 "$DLTRAIN" env 2>&1); rc=$?
if ((rc == 0)) && [[ $out == *"namespace singleton"* ]]; then ok "outside Slurm: runs as a singleton"; else not_ok "singleton (rc=$rc)"; echo "$out" | diag; fi
out=$(DLTPMIX_LIB=$DLT_BUILDDIR/pmix/.libs/libdltpmix.so.0 timeout 60 srun --quiet -N2 -n2 python3 "$DLT_SRCDIR/tests/slurm/ctypes_example.py" 2>&1 | sort); rc=$?
if [[ $out == $'0 2 n1 b\'hello\'\n1 2 n2 b\'hello\'' ]]; then ok "the dltpmix(3) ctypes example works under srun"; else not_ok "ctypes example"; echo "$out" | diag; fi
# Slurm's variables against PMIx's answers: a wrong 0 is caught as a wrong 5 is.
out=$(timeout 60 srun --quiet -N2 -n2 --mpi=pmix env SLURM_NODEID=0 "$PROBE" 2>&1); rc=$?
if ((rc != 0)) && [[ $out == *"PMIx and Slurm disagree: SLURM_NODEID=0 but PMIx gives 1"* ]]; then
  ok "SLURM_NODEID=0 on the second node: refused, both values named"
else not_ok "SLURM_NODEID mismatch (rc=$rc)"; echo "$out" | diag; fi
out=$(timeout 60 srun --quiet -N1 -n1 --mpi=pmix env SLURM_PROCID=5 "$PROBE" 2>&1); rc=$?
if ((rc != 0)) && [[ $out == *"PMIx and Slurm disagree: SLURM_PROCID=5 but PMIx gives 0"* ]]; then
  ok "SLURM_PROCID=5 on rank 0: refused, both values named"
else not_ok "SLURM_PROCID mismatch (rc=$rc)"; echo "$out" | diag; fi
# The join mark is a file named /dev/shm/dltrain-joined-NAME, NAME without '/': a value that climbs
# out through a folder of that prefix makes nothing (the rank still runs).
jd=/dev/shm/dltrain-joined-t$$; esc=/dev/shm/dlt-escape-$$
rm -rf "$jd" "$esc"; mkdir -p "$jd"
out=$(timeout 60 srun --quiet -N1 -n1 --mpi=pmix env DLT_JOIN_MARK="$jd/../dlt-escape-$$" "$PROBE" 2>&1); rc=$?
if ((rc == 0)) && [[ ! -e $esc ]]; then ok "DLT_JOIN_MARK=$jd/../dlt-escape-$$: nothing made outside the mark's name, the rank runs"
else not_ok "join mark through a folder (rc=$rc, $(ls -l "$esc" 2>&1))"; echo "$out" | diag; fi
rm -rf "$jd" "$esc"
exit 0
