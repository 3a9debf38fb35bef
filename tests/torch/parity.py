#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""parity.py: dltrain against PyTorch/torchvision on the same tensors. Prints TAP lines.

forward DLTRAIN FORWARD_DUMP WORKDIR: for resnet18 and resnet50, a checkpoint of ours (after two
training steps, so the BN running statistics are not the initial ones) loaded into torchvision's
model, which must accept it strictly; both run inference on the same random input tensors and the
logits must agree to 1e-4 relative (max |diff| / max |logit|).

train DLTRAIN WORKDIR: the same 20 SGD steps in dltrain and in PyTorch: the same initial weights
(torchvision's resnet18 saved with safetensors, given to dltrain with --init), the same 16 images
(JPEG files that decode alike everywhere: 8x8 blocks of one colour, quality 100, no chroma
subsampling; 128x128, so the evaluation transform, resize to 128 and centre crop 112, is a plain
crop), no augmentation (--augment none), one full batch per step (the batch dltrain trained on is dumped
with --dump-batch and fed to PyTorch, so two JPEG decoders are not what is compared), the same recipe (LR 0.1 x 16/256
constant, momentum 0.9, weight decay 1e-4 except on BN parameters and biases, label smoothing
0.1). The first loss must be equal; after that the bound is stated against PyTorch's own spread:
the same PyTorch training with the batch reordered each step (as dltrain's loader does) sets a
noise floor, and ours must stay within 3x it, or within 1.5x PyTorch's
distance to itself with its own convolution loops instead of oneDNN's (another implementation, as
dltrain is), whichever is larger (at least 1e-3 for losses, 1e-4 for weights).

train-bf16 DLTRAIN WORKDIR: the same 20 steps with dltrain's --precision bf16 on the CPU
(activations bf16 between every layer) against PyTorch's CPU autocast in bf16 (which keeps its
activations bf16 too), from the same weights and batch. bf16 rounding is the noise here: the bound
is 3x PyTorch bf16 against itself with the batch reordered, or 1.5x PyTorch bf16 against PyTorch
fp32 (what autocast itself moves the training by), whichever is larger: ours in bf16 must be no
further from PyTorch's bf16 than that. Prints "ok 1 # SKIP" lines where dltrain refuses bf16 (a CPU
without AVX512-BF16 or AMX)."""
import json
import os
import subprocess
import sys

import numpy as np
import torch
import torchvision
from safetensors.torch import load_file


def forward(dltrain, dump, work):
    torch.manual_seed(0)
    cases = [("resnet18", 64, 10, 4), ("resnet50", 128, 1000, 2)]
    n_ok = 0
    for i, (arch, image, classes, n) in enumerate(cases, 1):
        ck = os.path.join(work, arch)
        subprocess.run([dltrain, "train", "--synthetic", "--arch", arch, "--image-size", str(image), "--classes",
                        str(classes), "--batch", "2", "--synthetic-size", "4", "--steps", "2", "--log-every", "0",
                        "--lr", "0.5", "--warmup-epochs", "0", "--checkpoint-dir", ck], check=True,
                       stdout=subprocess.DEVNULL)
        path = os.path.join(ck, "ckpt-00000002.safetensors")
        x = torch.randn(n, 3, image, image)
        inp, out = os.path.join(work, arch + ".in"), os.path.join(work, arch + ".out")
        x.permute(0, 2, 3, 1).contiguous().numpy().astype(np.float32).tofile(inp)
        subprocess.run([dump, arch, str(classes), str(image), path, inp, str(n), out], check=True)
        ours = torch.from_numpy(np.fromfile(out, dtype=np.float32).reshape(n, classes))
        m = getattr(torchvision.models, arch)(num_classes=classes)
        res = m.load_state_dict(load_file(path), strict=True)
        m.eval()
        with torch.no_grad():
            ref = m(x)
        rel = float((ours - ref).abs().max() / ref.abs().max())
        same_top = bool((ours.argmax(1) == ref.argmax(1)).all())
        ok = rel <= 1e-4 and same_top and not res.missing_keys and not res.unexpected_keys
        print("%s %d - %s forward parity at %dx%d, %d images, eval-mode BN: max |diff| / max |logit| = %.2e "
              "(bound 1e-4), same argmax" % ("ok" if ok else "not ok", i, arch, image, image, n, rel))
        n_ok += ok
    return n_ok == len(cases)


def _images(root, classes, per_class, size, seed):
    from PIL import Image
    rng = np.random.default_rng(seed)
    for c in range(classes):
        d = os.path.join(root, "c%02d" % c)
        os.makedirs(d, exist_ok=True)
        for i in range(per_class):
            img = rng.integers(0, 256, size=(size, size, 3)).astype(int)
            img[..., c % 3] = np.clip(img[..., c % 3] + 60 * (c + 1), 0, 255)  # learnable
            Image.fromarray(img.astype(np.uint8)).save(os.path.join(d, "img_%03d.jpg" % i), quality=100,
                                                       subsampling=0)


def train(dltrain, work, bf16=False):
    torch.manual_seed(1)
    classes, per_class, steps, batch = 4, 4, 20, 16
    data = os.path.join(work, "data")
    _images(os.path.join(data, "train"), classes, per_class, 128, 7)
    model = torchvision.models.resnet18(num_classes=classes)
    init = os.path.join(work, "init.safetensors")
    from safetensors.torch import save_file
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, init)
    metrics = os.path.join(work, "ours.jsonl")
    if bf16:
        probe = subprocess.run([dltrain, "bench", "--arch", "resnet18", "--image-size", "32", "--batch", "2",
                                "--iters", "1", "--warmup", "0", "--precision", "bf16"], capture_output=True, text=True)
        if probe.returncode != 0 and "AVX512-BF16" in probe.stderr:
            for i in (1, 2):
                print("ok %d # SKIP dltrain --precision bf16 needs a CPU with AVX512-BF16 or AMX: not this one" % i)
            return True
    subprocess.run([dltrain, "train"] + (["--precision", "bf16"] if bf16 else []) + [ "--data", data, "--arch", "resnet18", "--image-size", "112", "--batch", str(batch),
                    "--steps", str(steps), "--epochs", str(steps), "--init", init, "--augment", "none",
                    "--lr", "0.1", "--warmup-epochs", "0", "--milestones", "1000", "--momentum", "0.9", "--wd", "1e-4",
                    "--label-smoothing", "0.1", "--log-every", "1", "--eval-every", "0", "--workers", "1",
                    "--metrics", metrics, "--checkpoint-dir", os.path.join(work, "ck"),
                    "--dump-batch", os.path.join(work, "batch.bin")],
                   check=True, stdout=subprocess.DEVNULL)
    ours = [json.loads(l)["loss"] for l in open(metrics) if '"loss"' in l]
    # The batch exactly as dltrain decoded and cropped it (--dump-batch), normalised as both do: the
    # comparison is of the training step, not of two JPEG decoders. With one full batch and no
    # augmentation every step sees these images (their order within the batch does not matter).
    raw = np.fromfile(os.path.join(work, "batch.bin"), dtype=np.uint8)
    px = batch * 112 * 112 * 3
    imgs = torch.from_numpy(raw[:px].reshape(batch, 112, 112, 3).astype(np.float32))
    y = torch.from_numpy(raw[px:].view(np.int32).astype(np.int64))
    mean = torch.tensor([123.675, 116.28, 103.53]); std = torch.tensor([58.395, 57.12, 57.375])
    x = ((imgs - mean) / std).permute(0, 3, 1, 2).contiguous()
    def run(order_seed, mkldnn=True, autocast=False):
        """PyTorch's 20 steps from the initial weights; order_seed: permute the batch each step;
        mkldnn False: PyTorch's own convolution loops instead of oneDNN's; autocast: CPU autocast
        in bf16."""
        m = torchvision.models.resnet18(num_classes=classes)
        m.load_state_dict(load_file(init))
        decay = [p for n, p in m.named_parameters() if p.ndim > 1]
        no_decay = [p for n, p in m.named_parameters() if p.ndim <= 1]
        opt = torch.optim.SGD([{"params": decay, "weight_decay": 1e-4}, {"params": no_decay, "weight_decay": 0.0}],
                              lr=0.1 * batch / 256, momentum=0.9)
        loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=0.1)
        g = torch.Generator().manual_seed(order_seed or 0)
        m.train()
        losses = []
        with torch.backends.mkldnn.flags(enabled=mkldnn):
            for _ in range(steps):
                perm = torch.randperm(batch, generator=g) if order_seed else torch.arange(batch)
                opt.zero_grad()
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                    loss = loss_fn(m(x[perm]), y[perm])
                loss.backward()
                opt.step()
                losses.append(float(loss.detach()))
        return losses, m.state_dict()

    def dist(a, b):
        return max(abs(u - v) / max(abs(v), 1e-6) for u, v in zip(a, b)) if len(a) == len(b) else float("inf")

    def wdist(sd_a, sd_b):
        keys = [k for k in sd_b if not k.endswith("num_batches_tracked")]
        num = sum(float(((sd_a[k].float() - sd_b[k].float()) ** 2).sum()) for k in keys)
        den = sum(float((sd_b[k].float() ** 2).sum()) for k in keys)
        return (num / den) ** 0.5

    if bf16:
        return _judge_bf16(run, dist, wdist, ours, load_file(os.path.join(work, "ck", "ckpt-%08d.safetensors" % steps)))
    ref, ref_sd = run(0)
    # The noise floor: the same PyTorch training with only the order within the batch changed (as
    # dltrain's loader shuffles it each epoch): float sums in another order, amplified by training.
    # dltrain is another implementation, with other summation orders inside each convolution, not
    # only across the batch: the second floor is PyTorch against itself with its own convolution
    # loops instead of oneDNN's (on an AMD EPYC without AVX-512: batch orders 1.0e-3 to 2.1e-3 over
    # four seeds, the other convolutions 7.70e-3, dltrain 7.74e-3: with 3x the order floor alone
    # the test failed there; channels_last, 5.3e-3, is another oneDNN path, not another
    # implementation).
    perm, perm_sd = run(3)
    floor_l, floor_w = dist(perm, ref), wdist(perm_sd, ref_sd)
    impl, impl_sd = run(0, mkldnn=False)
    impl_l, impl_w = dist(impl, ref), wdist(impl_sd, ref_sd)
    final = load_file(os.path.join(work, "ck", "ckpt-%08d.safetensors" % steps))
    ours_l, ours_w = dist(ours, ref), wdist(final, ref_sd)
    bound_l, bound_w = max(3 * floor_l, 1.5 * impl_l, 1e-3), max(3 * floor_w, 1.5 * impl_w, 1e-4)
    ok1 = ours_l <= bound_l
    print("%s 1 - 20 SGD steps from the same weights on the same batch: losses %.5f -> %.5f (ours) vs %.5f -> %.5f "
          "(PyTorch); worst step %.2e relative, bound %.2e (PyTorch against itself: 3x the batch reordered "
          "%.2e, 1.5x its other convolutions %.2e)" % ("ok" if ok1 else "not ok", ours[0] if ours else float("nan"),
                                                             ours[-1] if ours else float("nan"), ref[0], ref[-1], ours_l,
                                                             bound_l, floor_l, impl_l))
    if not ok1:
        print("# ours    " + " ".join("%.5f" % v for v in ours))
        print("# pytorch " + " ".join("%.5f" % v for v in ref))
    ok2 = ours_w <= bound_w and abs(ours[0] - ref[0]) <= 1e-5 * abs(ref[0])
    print("%s 2 - the first loss equal (%.6f vs %.6f); final weights and BN statistics ||ours - PyTorch|| / "
          "||PyTorch|| = %.2e, bound %.2e (3x PyTorch reordered %.2e; 1.5x its other convolutions %.2e)" % ("ok" if ok2 else "not ok", ours[0] if ours else float("nan"), ref[0], ours_w, bound_w,
                                  floor_w, impl_w))
    return ok1 and ok2


def _judge_bf16(run, dist, wdist, ours, final):
    ref, ref_sd = run(0, autocast=True)
    perm, perm_sd = run(3, autocast=True)
    fp32, fp32_sd = run(0)
    floor_l, floor_w = dist(perm, ref), wdist(perm_sd, ref_sd)
    prec_l, prec_w = dist(fp32, ref), wdist(fp32_sd, ref_sd)
    ours_l, ours_w = dist(ours, ref), wdist(final, ref_sd)
    bound_l, bound_w = max(3 * floor_l, 1.5 * prec_l, 1e-3), max(3 * floor_w, 1.5 * prec_w, 1e-4)
    ok1 = ours_l <= bound_l
    print("%s 1 - bf16: 20 SGD steps from the same weights on the same batch: losses %.5f -> %.5f (ours, "
          "--precision bf16) vs %.5f -> %.5f (PyTorch autocast bf16); worst step %.2e relative, bound %.2e (PyTorch "
          "bf16 against itself: 3x the batch reordered %.2e, 1.5x against its fp32 %.2e)"
          % ("ok" if ok1 else "not ok", ours[0] if ours else float("nan"), ours[-1] if ours else float("nan"), ref[0],
             ref[-1], ours_l, bound_l, floor_l, prec_l))
    if not ok1:
        print("# ours    " + " ".join("%.5f" % v for v in ours))
        print("# pytorch " + " ".join("%.5f" % v for v in ref))
    # The first loss: both from bf16 activations of the same weights and batch; rounded in other
    # places, so within bf16's resolution (2^-8), not bit for bit.
    ok2 = ours_w <= bound_w and bool(ours) and abs(ours[0] - ref[0]) <= 2 ** -8 * abs(ref[0])
    print("%s 2 - bf16: the first loss within bf16's rounding (%.6f vs %.6f); final weights and BN statistics "
          "||ours - PyTorch|| / ||PyTorch|| = %.2e, bound %.2e (3x PyTorch bf16 reordered %.2e; 1.5x against its "
          "fp32 %.2e)" % ("ok" if ok2 else "not ok", ours[0] if ours else float("nan"), ref[0], ours_w, bound_w,
                          floor_w, prec_w))
    return ok1 and ok2


def main():
    if len(sys.argv) >= 5 and sys.argv[1] == "forward":
        print("1..2")
        forward(sys.argv[2], sys.argv[3], sys.argv[4])
    elif len(sys.argv) >= 4 and sys.argv[1] in ("train", "train-bf16"):
        print("1..2")
        train(sys.argv[2], sys.argv[3], bf16=sys.argv[1] == "train-bf16")
    else:
        sys.exit("usage: parity.py forward DLTRAIN FORWARD_DUMP WORKDIR | train DLTRAIN WORKDIR | "
                 "train-bf16 DLTRAIN WORKDIR")


if __name__ == "__main__":
    main()
