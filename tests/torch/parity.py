#!/usr/bin/env python3
"""parity.py: dltrain against PyTorch/torchvision on the same tensors. Prints TAP lines.

forward DLTRAIN FORWARD_DUMP WORKDIR: for resnet18 and resnet50, a checkpoint of ours (after two
training steps, so the BN running statistics are not the initial ones) loaded into torchvision's
model, which must accept it strictly; both run inference on the same random input tensors and the
logits must agree to 1e-4 relative (max |diff| / max |logit|)."""
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


def main():
    if sys.argv[1] == "forward":
        print("1..2")
        forward(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit("usage: parity.py forward DLTRAIN FORWARD_DUMP WORKDIR")


if __name__ == "__main__":
    main()
