#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The input the network sees, as doc/training.md and dltrain(1) state it, against the code's own
# constants: the per-channel mean and std (trainer/train/step_verbs.c, on the 0-255 scale, and the
# same divided by 255 as torchvision's Normalize takes them), RandomResizedCrop's area and aspect
# ranges and the evaluation resize ratio (trainer/data/transform.c), RGB decoding, and the torchvision
# recipe's numbers (Resize 256 = 224 / 0.875). A constant changed in the code without the documents,
# or a document changed alone, fails here.
. "$(dirname "$0")/../slurm/lib.sh"
cd "$DLT_SRCDIR" || exit 1
tap_plan 4

out=$(python3 - <<'PYEOF' 2>&1
import re, sys

def grab(path, pattern, what):
    m = re.search(pattern, open(path).read(), re.S)
    if not m:
        print("%s: %s not found (pattern %s)" % (path, what, pattern))
        sys.exit(2)
    return m

sv = "trainer/train/step_verbs.c"
mean = [float(x) for x in grab(sv, r"g_mean\[3\]\s*=\s*\{([^}]*)\}", "g_mean").group(1).replace("f", "").split(",")]
inv = grab(sv, r"g_inv_std\[3\]\s*=\s*\{([^}]*)\}", "g_inv_std").group(1)
std = [float(x) for x in re.findall(r"1\.f?\s*/\s*([0-9.]+)f?", inv)]
tf = "trainer/data/transform.c"
area = float(grab(tf, r"area \* \(([0-9.]+) \+ \(1\.0 - \1\)", "the RandomResizedCrop area range").group(1))
lo = grab(tf, r"lr0 = log\(([0-9.]+) / ([0-9.]+)\)", "the aspect range's low end").groups()
hi = grab(tf, r"lr1 = log\(([0-9.]+) / ([0-9.]+)\)", "the aspect range's high end").groups()
ratio = float(grab(tf, r"dlt_crop_center\(w, h, ([0-9.]+), &c\)", "the evaluation ratio").group(1))
rgb = "TJPF_RGB" in open(tf).read() and "JCS_RGB" in open(tf).read()
flip = re.search(r"c->flip = \(int\)\(dlt_rng_u32\(r\) & 1u\)", open(tf).read()) is not None

def g(x):
    return "%g" % x

def scaled(v):
    # torchvision's numbers are 3-decimal: the code's must be those times 255 exactly.
    s = [round(x / 255, 3) for x in v]
    if any(abs(a * 255 - b) > 1e-3 for a, b in zip(s, v)):
        print("step_verbs.c: %s are not 255 x 3-decimal values" % v)
        sys.exit(2)
    return ", ".join("%.3f" % x for x in s)

mean255, std255 = ", ".join(g(x) for x in mean), ", ".join(g(x) for x in std)
mean1, std1 = scaled(mean), scaled(std)
resize = round(224 / ratio)
print("code: mean %s, std %s (0-1: %s / %s); area %g-1, aspect %s/%s-%s/%s, eval ratio %g (Resize %d), RGB %s, flip 1/2 %s"
      % (mean255, std255, mean1, std1, area, lo[0], lo[1], hi[0], hi[1], ratio, resize, rgb, flip))
aspect_lo, aspect_hi = "%d/%d" % (float(lo[0]), float(lo[1])), "%d/%d" % (float(hi[0]), float(hi[1]))
want = {
    "doc/training.md": [
        "mean %s and std %s on the 0-255 scale" % (mean255, std255),
        "mean %s and std %s on the 0-1 scale" % (mean1, std1),
        "T.Normalize(mean=[%s], std=[%s])" % (mean1, std1),
        "scale=(%g, 1.0) of the area" % area,
        "ratio=(%s, %s)" % (aspect_lo, aspect_hi),
        "T.RandomResizedCrop(224, scale=(%g, 1.0), ratio=(%s, %s))" % (area, aspect_lo.replace("/", " / "), aspect_hi.replace("/", " / ")),
        "`--image-size` / %g (%d for 224)" % (ratio, resize),
        "T.Resize(%d), T.CenterCrop(224)" % resize,
        "decoded to RGB (channel order R, G, B",
        "random horizontal flip (probability 0.5)" if flip else "no flip",
    ],
    "man/dltrain.1": [
        "mean %s and std %s:" % (mean255, std255),
        "mean %s and std %s on the" % (mean1, std1),
        "Resize(%d), CenterCrop(224), ToTensor(), Normalize(mean=[%s], std=[%s])" % (resize, mean1, std1),
        "scale=(%g, 1.0), ratio=(%s, %s))" % (area, aspect_lo, aspect_hi),
        "RandomResizedCrop (%d-100%% of the area, aspect %s-%s)" % (round(area * 100), aspect_lo, aspect_hi),
        "in RGB order (R, G, B",
    ],
}
bad = []
for path, needles in want.items():
    text = open(path).read()
    if path.endswith(".1"):
        text = text.replace("\\-", "-").replace("\\fB", "").replace("\\fR", "").replace("\\fI", "")
    flat = " ".join(text.split())
    for n in needles:
        if " ".join(n.split()) not in flat:
            bad.append("%s lacks: %s" % (path, n))
if not rgb:
    print("transform.c no longer decodes to RGB (TJPF_RGB / JCS_RGB): the documents say RGB")
    sys.exit(2)
print("\n".join(bad))
sys.exit(1 if bad else 0)
PYEOF
); rc=$?
code=$(head -1 <<<"$out")
if ((rc != 2)); then ok "the code's input constants: ${code#code: }"; else not_ok "reading the code's constants"; echo "$out" | diag; fi
for f in doc/training.md man/dltrain.1; do
  if ((rc == 0)) || ((rc == 1)) && ! grep -q "^$f lacks" <<<"$out"; then
    ok "$f states them: mean and std on both scales, crop and resize, RGB, the torchvision recipe"
  else not_ok "$f disagrees with the code (or the code could not be read)"; grep -v '^code:' <<<"$out" | diag; fi
done

# The 0-1 numbers are torchvision's own, where torchvision is installed (the reference they name).
PY=${DLT_TORCH_PYTHON:-/opt/torchvenv/bin/python}
tv=$("$PY" -c 'import inspect, torchvision.transforms as T
print(inspect.signature(T.RandomResizedCrop).parameters["scale"].default, inspect.signature(T.RandomResizedCrop).parameters["ratio"].default)' 2>/dev/null)
if [[ -z $tv ]]; then ok "# SKIP no Python with torchvision (DLT_TORCH_PYTHON) to compare RandomResizedCrop's defaults with"
elif [[ $tv == "(0.08, 1.0) (0.75, 1.3333333333333333)" ]] && grep -q 'scale=(0.08, 1.0)' doc/training.md; then
  ok "torchvision's RandomResizedCrop defaults are the ranges documented: $tv"
else not_ok "torchvision's RandomResizedCrop defaults: $tv"; fi
exit 0
