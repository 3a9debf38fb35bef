#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/device/torch_bench.py's strongest peer (--peer strong: SGD(fused=True), a static loss scale
# unscaled on the device with its non-finite check, the whole step a CUDA graph on a GPU), on the CPU
# with a small ResNet-18: its --check (K steps from one seed on one batch against the eager
# GradScaler loop at the same scale) finds the two weight updates equal in fp32, fp16 and bf16; a
# strong step whose SGD was taken out (patched in from outside) fails the check with a relative
# difference of 1; a strong step that never unscales fails it too; a timed run prints its JSON row
# (peer strong, images/s, its --self-check passed); bad arguments are refused. One Python process runs every case (importing
# torch takes most of the time).
. "$(dirname "$0")/../slurm/lib.sh"
BENCH=$DLT_SRCDIR/tests/device/torch_bench.py
PY=${DLT_TORCH_PYTHON:-/opt/torchvenv/bin/python}
"$PY" -c 'import torch, torchvision' 2>/dev/null || skip_all "no Python with torch+torchvision (set DLT_TORCH_PYTHON)"
tap_plan 5
rm -rf "$WORK"; mkdir -p "$WORK"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
# Each case: NAME<TAB>rc<TAB>the last line it printed (a JSON row, or argparse's message).
timeout 300 "$PY" - "$BENCH" >"$WORK/cases.tsv" 2>"$WORK/stderr" <<'PYEOF'
import contextlib, io, runpy, sys
import torch
bench = sys.argv[1]
tb = runpy.run_path(bench, run_name="torch_bench")
S = tb["Stepper"]
SMALL = ["--device", "cpu", "--arch", "resnet18", "--image", "32", "--batch", "8"]

def run(name, args, patch=None):
    out, err = io.StringIO(), io.StringIO()
    saved = S._strong_body
    if patch:
        S._strong_body = patch(saved)
    sys.argv = [bench] + args
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = tb["main"]()
    except SystemExit as e:
        rc = e.code
    finally:
        S._strong_body = saved
    last = (out.getvalue().strip().splitlines() or err.getvalue().strip().splitlines() or [""])[-1]
    print("%s\t%s\t%s" % (name, rc, last), flush=True)

def no_sgd(body):
    def f(self):
        step, self.opt.step = self.opt.step, lambda: None
        try:
            return body(self)
        finally:
            self.opt.step = step
    return f

def no_unscale(body):
    def f(self):
        real = torch._amp_foreach_non_finite_check_and_unscale_
        torch._amp_foreach_non_finite_check_and_unscale_ = lambda g, found, inv: real(g, found, torch.ones_like(inv))
        try:
            return body(self)
        finally:
            torch._amp_foreach_non_finite_check_and_unscale_ = real
    return f

for p in ("fp32", "fp16", "bf16"):
    run("check-" + p, SMALL + ["--precision", p, "--check", "3"])
run("no-sgd", SMALL + ["--precision", "fp16", "--check", "2"], no_sgd)
run("no-unscale", SMALL + ["--precision", "fp16", "--check", "2"], no_unscale)
run("timed", SMALL + ["--precision", "fp16", "--peer", "strong", "--warmup", "1", "--iters", "2", "--feed", "--self-check"])
run("batch0", ["--batch", "0"])
run("peer", ["--peer", "fastest"])
PYEOF
rc=$?
case_rc() { awk -F'\t' -v n="$1" '$1 == n { print $2 }' "$WORK/cases.tsv"; }
case_out() { awk -F'\t' -v n="$1" '$1 == n { print $3 }' "$WORK/cases.tsv"; }
field() { case_out "$1" | "$PY" -c 'import json, sys; print(json.loads(sys.stdin.read()).get(sys.argv[1]))' "$2" 2>/dev/null; }
small() { "$PY" -c 'import sys; sys.exit(not float(sys.argv[1]) <= float(sys.argv[2]))' "$1" "$2" 2>/dev/null; }
if ((rc != 0)); then diag <"$WORK/stderr"; fi

good=1
for p in fp32 fp16 bf16; do
  [[ $(case_rc check-$p) == 0 && $(field check-$p pass) == True ]] && small "$(field check-$p relative_difference)" 1e-3 || good=0
done
if ((good)); then ok "strong and eager steps give the same weight updates on the CPU in fp32, fp16 and bf16 (3 steps)"
else not_ok "strong vs eager check"; diag <"$WORK/cases.tsv"; fi

d=$(field no-sgd relative_difference)
if [[ $(case_rc no-sgd) == 1 ]] && small "$d" 1.000001 && ! small "$d" 0.999999; then
  ok "a strong step without its SGD fails the check (relative difference $d)"
else not_ok "the check misses a strong step without SGD"; diag <"$WORK/cases.tsv"; fi

d=$(field no-unscale relative_difference)
if [[ $(case_rc no-unscale) == 1 ]] && ! small "$d" 0.02; then
  ok "a strong step that does not unscale fails the check (relative difference $d)"
else not_ok "the check misses a strong step that skips the unscale"; diag <"$WORK/cases.tsv"; fi

if [[ $(case_rc timed) == 0 && $(field timed peer) == strong && $(field timed loss_scale) == 128.0 && $(field timed feed) == True &&
      $(field timed self_check) == *"'pass': True"* ]] &&
   ! small "$(field timed images_per_s)" 0; then
  ok "a timed strong run (fed, --self-check first) prints its row: $(case_out timed | cut -c1-150)"
else not_ok "timed strong run"; diag <"$WORK/cases.tsv"; fi

if [[ $(case_rc batch0) == 2 && $(case_out batch0) == *"--batch and --iters must be >= 1"* && $(case_rc peer) == 2 &&
      $(case_out peer) == *"invalid choice"* ]]; then
  ok "a zero batch and an unknown peer are refused, naming the rule"
else not_ok "argument checks"; diag <"$WORK/cases.tsv"; fi
