#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""converge.py DLTRAIN WORKDIR: a convergence check on real images that ship inside a package:
scikit-learn's handwritten digits (UCI, 1,797 8x8 images of 10 classes), written as 32x32 RGB JPEG
files in an ImageFolder with a fixed 1,437 / 360 train/validation split. dltrain and torchvision's
ResNet-18 trained by a plain PyTorch loop in the style of torchvision's reference scripts, with the
same recipe (batch 32, 12 epochs, SGD momentum 0.9, LR 0.8 x 32/256 = 0.1, x0.1 at epochs 8 and 11, weight decay 1e-4
except BN parameters and biases, label smoothing 0.1, RandomResizedCrop + flip for training,
resize + centre crop for validation) must reach validation top-1 within 1.5 points of each other.
Prints TAP and the figures."""
import json
import os
import subprocess
import sys
import threading
import time

import numpy as np
import torch
import torchvision
from PIL import Image
from torchvision import datasets, transforms

EPOCHS, BATCH, LR, MILESTONES = 12, 32, 0.8 * 32 / 256, (8, 11)


def write_digits(root):
    from sklearn.datasets import load_digits
    d = load_digits()
    rng = np.random.default_rng(0)
    order = rng.permutation(len(d.target))
    for n, i in enumerate(order):
        split = "val" if n < 360 else "train"
        img = (d.images[i] * (255.0 / 16.0)).astype(np.uint8)
        img = Image.fromarray(img).resize((32, 32), Image.BILINEAR).convert("RGB")
        path = os.path.join(root, split, "d%d" % d.target[i])
        os.makedirs(path, exist_ok=True)
        img.save(os.path.join(path, "img_%04d.jpg" % i), quality=95)


def ours(dltrain, data, work):
    metrics = os.path.join(work, "ours.jsonl")
    t0 = time.time()
    subprocess.run([dltrain, "train", "--data", data, "--arch", "resnet18", "--image-size", "32", "--batch",
                    str(BATCH), "--epochs", str(EPOCHS), "--lr", "0.8", "--warmup-epochs", "0", "--milestones", ",".join(map(str, MILESTONES)),
                    "--momentum", "0.9", "--wd", "1e-4", "--label-smoothing", "0.1", "--log-every", "0",
                    "--eval-every", "1", "--workers", "1", "--metrics", metrics], check=True,
                   stdout=subprocess.DEVNULL, env=dict(os.environ, OMP_NUM_THREADS="1"))
    evals = [e for e in map(json.loads, open(metrics)) if e.get("key") == "eval_accuracy"]
    return [e["value"] for e in evals], time.time() - t0, evals[-1]["metadata"]["val_images"] if evals else 0


def reference(data):
    torch.manual_seed(0)
    norm = transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
    train = datasets.ImageFolder(os.path.join(data, "train"), transforms.Compose(
        [transforms.RandomResizedCrop(32), transforms.RandomHorizontalFlip(), transforms.ToTensor(), norm]))
    val = datasets.ImageFolder(os.path.join(data, "val"), transforms.Compose(
        [transforms.Resize(36), transforms.CenterCrop(32), transforms.ToTensor(), norm]))
    tl = torch.utils.data.DataLoader(train, batch_size=BATCH, shuffle=True, drop_last=True)
    vl = torch.utils.data.DataLoader(val, batch_size=100)
    m = torchvision.models.resnet18(num_classes=10)
    for mod in m.modules():  # zero-init of each block's last BN gamma, as the Goyal recipe (and dltrain)
        if isinstance(mod, torchvision.models.resnet.BasicBlock):
            torch.nn.init.zeros_(mod.bn2.weight)
    decay = [p for p in m.parameters() if p.ndim > 1]
    no_decay = [p for p in m.parameters() if p.ndim <= 1]
    opt = torch.optim.SGD([{"params": decay, "weight_decay": 1e-4}, {"params": no_decay, "weight_decay": 0.0}], lr=LR,
                          momentum=0.9)
    sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=list(MILESTONES), gamma=0.1)
    loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=0.1)
    accs, t0 = [], time.time()
    for _ in range(EPOCHS):
        m.train()
        for x, y in tl:
            opt.zero_grad()
            loss_fn(m(x), y).backward()
            opt.step()
        m.eval()
        hit = n = 0
        with torch.no_grad():
            for x, y in vl:
                hit += int((m(x).argmax(1) == y).sum())
                n += len(y)
        accs.append(hit / n)
        sched.step()
    return accs, time.time() - t0


def main():
    dltrain, work = sys.argv[1], sys.argv[2]
    data = os.path.join(work, "digits")
    write_digits(data)
    print("1..2")
    # Side by side, one thread each: two 2-thread trainings on a 2-core machine that is also running
    # other tests spend their time at OpenMP barriers waiting for a descheduled thread (one epoch of
    # dltrain beside one busy process: 9.0 s with 2 threads, 4.9 s with 1).
    torch.set_num_threads(1)
    got = {}
    t = threading.Thread(target=lambda: got.update(r=ours(dltrain, data, work)))
    t.start()
    b, tb = reference(data)
    t.join()
    if "r" not in got:
        sys.exit("Bail out! dltrain train failed (its error is above)")
    a, ta, nval = got["r"]
    print("# validation top-1 per epoch, dltrain:  " + " ".join("%.4f" % v for v in a) + "  (%.0f s)" % ta)
    print("# validation top-1 per epoch, PyTorch:  " + " ".join("%.4f" % v for v in b) + "  (%.0f s)" % tb)
    ok = len(a) == EPOCHS and nval == 360
    print("%s 1 - dltrain validated all 360 images after each of %d epochs" % ("ok" if ok else "not ok", EPOCHS))
    gap = abs(a[-1] - b[-1]) * 100 if a else float("inf")
    print("%s 2 - sklearn digits, ResNet-18, same recipe: final validation top-1 %.2f%% (dltrain) vs %.2f%% "
          "(PyTorch reference loop), %.2f points apart (bound 1.5)" % ("ok" if gap <= 1.5 else "not ok",
                                                                        100 * a[-1] if a else float("nan"),
                                                                        100 * b[-1], gap))


if __name__ == "__main__":
    main()
