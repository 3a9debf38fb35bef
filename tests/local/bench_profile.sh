#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# dltrain bench --profile on the CPU backend: the calls per step of each class against the layers of
# torchvision's own ResNet-18 and ResNet-50 (tests/fixtures/*_state_dict.txt: a convolution per conv
# weight, a batch norm per running mean): every convolution once forward and once for its filter
# gradient, all but the stem once for its data gradient, each batch norm forward and backward, one
# SGD call, the classifier both ways; the shares and "other" add up to the step; the text table;
# --profile with --input-only refused, naming why. The images/s line is still printed.
. "$(dirname "$0")/../slurm/lib.sh"
DLTRAIN=$DLT_BUILDDIR/trainer/dltrain
[[ -x $DLTRAIN ]] || skip_all "dltrain not built"
command -v python3 >/dev/null || skip_all "python3 missing"
tap_plan 4
FIX=$DLT_SRCDIR/tests/fixtures
# check ARCH JSON: the profile's call counts against the fixture's layers.
check() {
  python3 - "$FIX/torchvision_$1_state_dict.txt" "$2" <<'PY'
import json, re, sys
names = [l.split()[0] for l in open(sys.argv[1]) if l.strip() and not l.startswith("#")]
convs = sum(1 for n in names if re.search(r"(^|\.)(conv\d*|downsample\.0)\.weight$", n))
bns = sum(1 for n in names if n.endswith(".running_mean"))
d = json.loads(sys.argv[2])
p = d["profile"]
c = {k: v["calls"] for k, v in p["classes"].items() if k != "other"}
shares = sum(v["share"] for v in p["classes"].values())
why = []
if p["steps"] != 2:
    why.append("steps %s" % p["steps"])
if c["conv_fwd"] != convs or c["conv_bwd_filter"] != convs or c["conv_bwd_data"] not in (convs - 1, convs):
    why.append("convolutions fwd %s, filter %s, data %s for %d layers" % (c["conv_fwd"], c["conv_bwd_filter"], c["conv_bwd_data"], convs))
if c["batch_norm"] < 2 * bns:
    why.append("batch norm calls %s for %d layers" % (c["batch_norm"], bns))
if c["sgd"] != 1 or c["fc"] != 2 or c["loss"] < 1:
    why.append("sgd %s, fc %s, loss %s" % (c["sgd"], c["fc"], c["loss"]))
if not (abs(shares - 1) < 2e-3 and p["step_ms"] > 0 and all(v["ms"] >= 0 for v in p["classes"].values())):
    why.append("shares add up to %.4f, step %.3f ms" % (shares, p["step_ms"]))
if d.get("images_per_s", 0) <= 0:
    why.append("no images/s")
print("%d convolutions, %d batch norms in torchvision's %s: calls per step conv %s/%s/%s, batch norm %s, sgd %s, fc %s; shares add up to %.4f%s" % (
    convs, bns, sys.argv[1].split("torchvision_")[1].split("_")[0], c["conv_fwd"], c["conv_bwd_data"], c["conv_bwd_filter"],
    c["batch_norm"], c["sgd"], c["fc"], shares, "" if not why else ": " + "; ".join(why)))
sys.exit(1 if why else 0)
PY
}
for arch in resnet18 resnet50; do
  out=$(OMP_NUM_THREADS=1 timeout 300 "$DLTRAIN" bench --backend cpu --arch $arch --image-size 32 --classes 10 --batch 2 \
        --warmup 1 --iters 2 --profile --json 2>&1); rc=$?
  if ((rc == 0)) && why=$(check $arch "$(tail -1 <<<"$out")"); then ok "bench --profile $arch: $why"
  else not_ok "bench --profile $arch (rc=$rc): ${why:-}"; echo "$out" | tail -5 | diag; fi
done
out=$(OMP_NUM_THREADS=1 timeout 300 "$DLTRAIN" bench --backend cpu --arch resnet18 --image-size 32 --classes 10 --batch 2 \
      --warmup 1 --iters 2 --profile 2>&1); rc=$?
if ((rc == 0)) && [[ $out == *"images/s"* && $out == *"where a step's time goes (2 steps, each call timed on the host clock"* &&
      $out == *"conv forward"* && $out == *"conv backward filter"* && $out == *"other "* && $out == *"step "*"100.0%"* ]]; then
  ok "bench --profile prints the images/s, then the table by class on the host clock"
else not_ok "bench --profile text (rc=$rc)"; echo "$out" | diag; fi
out=$("$DLTRAIN" bench --backend cpu --arch resnet18 --image-size 32 --batch 2 --input-only --synthetic --profile 2>&1); rc=$?
if ((rc != 0)) && [[ $out == *"--profile"*"--input-only runs none"* ]]; then ok "--profile with --input-only refused, saying why"
else not_ok "--profile --input-only (rc=$rc)"; echo "$out" | diag; fi
exit 0
