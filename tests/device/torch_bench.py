#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""torch_bench: the peer figure for `dltrain bench`: torchvision ResNet-50 training steps in
PyTorch eager mode (channels_last; AMP autocast + GradScaler for fp16, autocast for bf16; TF32
switched on only for tf32), SGD with momentum, synthetic data already on the device, the same
batch and step structure as dltrain's benchmark. With --feed (dltrain bench --feed's peer) every
step takes a new uint8 batch from pinned host memory (a ring of 3), copied with non_blocking=True
and normalised on the device, as a DataLoader with pin_memory feeds a training loop. Prints one
JSON line per configuration.

usage: torch_bench.py --precision fp32|tf32|fp16|bf16 --batch N [--warmup N] [--iters N]
                      [--device cuda|cpu] [--image 224] [--arch resnet50] [--feed]
"""
import argparse
import json
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--precision", default="fp16", choices=["fp32", "tf32", "fp16", "bf16"])
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--image", type=int, default=224)
    ap.add_argument("--arch", default="resnet50")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--feed", action="store_true")
    a = ap.parse_args()
    try:
        import torch
        import torchvision
    except ImportError as e:
        print(json.dumps({"error": "no torch/torchvision: %s" % e}))
        return 3
    dev = torch.device(a.device)
    tf32 = a.precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = True
    model = getattr(torchvision.models, a.arch)().to(dev).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    x = torch.randn(a.batch, 3, a.image, a.image, device=dev).to(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (a.batch,), device=dev)
    ring, ring_y = [], []
    if a.feed:
        pin = dev.type == "cuda"
        for _ in range(3):
            ring.append(torch.randint(0, 256, (a.batch, a.image, a.image, 3), dtype=torch.uint8).pin_memory()
                        if pin else torch.randint(0, 256, (a.batch, a.image, a.image, 3), dtype=torch.uint8))
            ring_y.append(torch.randint(0, 1000, (a.batch,)).pin_memory() if pin else torch.randint(0, 1000, (a.batch,)))
        mean = torch.tensor([123.675, 116.28, 103.53], device=dev).view(1, 3, 1, 1)
        inv_std = 1.0 / torch.tensor([58.395, 57.12, 57.375], device=dev).view(1, 3, 1, 1)
    counter = [0]

    def batch():
        if not a.feed:
            return x, y
        i = counter[0] % 3
        counter[0] += 1
        u8 = ring[i].to(dev, non_blocking=True)
        xb = ((u8.permute(0, 3, 1, 2).float() - mean) * inv_std).contiguous(memory_format=torch.channels_last)
        return xb, ring_y[i].to(dev, non_blocking=True)
    amp_dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(a.precision)
    scaler = torch.amp.GradScaler(a.device, enabled=a.precision == "fp16")
    loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=0.1)

    def step():
        opt.zero_grad(set_to_none=True)
        xb, yb = batch()
        with torch.autocast(device_type=a.device, dtype=amp_dtype or torch.float32, enabled=amp_dtype is not None):
            loss = loss_fn(model(xb), yb)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    model.train()
    for _ in range(a.warmup):
        step()
    sync()
    t0 = time.perf_counter()
    for _ in range(a.iters):
        step()
    sync()
    el = time.perf_counter() - t0
    ips = a.iters * a.batch / el
    print(json.dumps({"framework": "pytorch-%s" % torch.__version__, "arch": a.arch, "precision": a.precision,
                      "batch": a.batch, "feed": a.feed, "iters": a.iters, "images_per_s": round(ips, 3),
                      "tflops": round(ips * 24.5e-3, 4) if a.image == 224 else None}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
