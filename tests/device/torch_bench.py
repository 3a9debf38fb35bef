#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""torch_bench: the peer figures for `dltrain bench`: torchvision ResNet-50 training steps in PyTorch,
channels_last, synthetic data already on the device, the same batch and step structure as dltrain's
benchmark, in one of two configurations (--peer):

  eager    the usual training loop: autocast + GradScaler (dynamic scale, a host sync each step)
           for fp16, autocast for bf16, SGD with momentum (foreach), one Python step at a time.
  strong   what a performance-minded user runs: autocast without its weight cache, SGD(fused=True),
           fp16 with a static loss scale (--loss-scale, 128) whose unscale also checks for non-finite
           gradients on the device (torch._amp_foreach_non_finite_check_and_unscale_, GradScaler's
           own kernel) and hands the flag to the fused step, which then skips, as dltrain does; and
           on a GPU the whole step (forward, loss, backward, unscale, SGD) recorded once as a
           torch.cuda.graph and replayed (PyTorch's documented whole-network capture:
           static inputs, the optimizer's state made before the capture, gradients set to None).

TF32 is switched on only for tf32. With --feed (dltrain bench --feed's peer) every step takes a new
uint8 batch from pinned host memory (a ring of 3), copied with non_blocking=True and normalised on the
device (inside the graph for strong), as a DataLoader with pin_memory feeds a training loop. Prints
one JSON line.

--check K: instead of timing, proves the strong step trains like the eager one: two copies of the
model from one seed take K steps on one batch, one with each step, at one loss scale; prints the
relative difference of their weight updates |dw_strong - dw_eager| / |dw_eager| (L2 over every
parameter) and exits 1 when it exceeds --check-tol (a step that replays nothing, or skips SGD,
differs by 1). --self-check does the same on a small ResNet-18 before a timed strong run, in the same
process, and puts the result in the row (a failed check prints an error row instead, exit 1).

usage: torch_bench.py --precision fp32|tf32|fp16|bf16 --batch N [--warmup N] [--iters N]
                      [--device cuda|cpu] [--image 224] [--arch resnet50] [--feed]
                      [--peer eager|strong] [--no-graph] [--loss-scale S] [--check K] [--check-tol T]
                      [--self-check]
"""
import argparse
import json
import sys
import time


def build(a, torch, torchvision, dev, seed):
    torch.manual_seed(seed)
    model = getattr(torchvision.models, a.arch)().to(dev).to(memory_format=torch.channels_last)
    strong = a.peer == "strong"
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4,
                          **({"fused": True} if strong else {}))
    return model, opt


class Stepper:
    """One training step of either configuration over static device tensors x (or u8), y."""

    def __init__(self, a, torch, dev, model, opt, peer, scale):
        self.a, self.torch, self.dev, self.model, self.opt, self.peer = a, torch, dev, model, opt, peer
        self.amp = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(a.precision)
        self.loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=0.1)
        self.scale = scale if a.precision == "fp16" else None
        self.graph = None
        if peer == "eager":
            # a check compares at one scale: the eager scaler starts there and never grows
            kw = {"init_scale": scale, "growth_interval": 1 << 30} if a.check else {}
            self.scaler = torch.amp.GradScaler(dev.type, enabled=a.precision == "fp16", **kw)
        elif self.scale is not None:
            self.inv_scale = torch.full((), 1.0 / self.scale, device=dev)
            self.found_inf = torch.zeros((), device=dev)
            opt.found_inf = self.found_inf  # read by SGD(fused=True)'s step: skip when nonzero
        self.u8 = None
        if a.feed:
            self.u8 = torch.zeros((a.batch, a.image, a.image, 3), dtype=torch.uint8, device=dev)
            self.mean = torch.tensor([123.675, 116.28, 103.53], device=dev).view(1, 3, 1, 1)
            self.inv_std = 1.0 / torch.tensor([58.395, 57.12, 57.375], device=dev).view(1, 3, 1, 1)
        self.x = torch.randn(a.batch, 3, a.image, a.image, device=dev).to(memory_format=torch.channels_last)
        self.y = torch.randint(0, 1000, (a.batch,), device=dev)

    def _input(self):
        if self.u8 is None:
            return self.x
        return ((self.u8.permute(0, 3, 1, 2).float() - self.mean) * self.inv_std).contiguous(
            memory_format=self.torch.channels_last)

    def _forward_loss(self):
        torch = self.torch
        with torch.autocast(device_type=self.dev.type, dtype=self.amp or torch.float32, enabled=self.amp is not None,
                            cache_enabled=self.peer == "eager"):
            return self.loss_fn(self.model(self._input()), self.y)

    def _strong_body(self):
        torch = self.torch
        loss = self._forward_loss()
        (loss * self.scale if self.scale is not None else loss).backward()
        if self.scale is not None:
            self.found_inf.zero_()
            grads = [p.grad for p in self.model.parameters() if p.grad is not None]
            torch._amp_foreach_non_finite_check_and_unscale_(grads, self.found_inf, self.inv_scale)
        self.opt.step()
        return loss

    def step(self):
        if self.peer == "eager":
            self.opt.zero_grad(set_to_none=True)
            loss = self._forward_loss()
            self.scaler.scale(loss).backward()
            self.scaler.step(self.opt)
            self.scaler.update()
            return
        if self.graph is not None:
            self.graph.replay()
            return
        self.opt.zero_grad(set_to_none=True)
        self._strong_body()

    def record(self, warm):
        """strong on a GPU: `warm` plain steps on a side stream (the fused SGD's momentum made
        there), then one step recorded as a CUDA graph; every later step() replays it."""
        torch = self.torch
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(warm):
                self.step()
        torch.cuda.current_stream().wait_stream(s)
        self.opt.zero_grad(set_to_none=True)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            self._strong_body()
        self.graph = g


def feed_ring(a, torch, dev):
    pin = dev.type == "cuda"
    ring = []
    for _ in range(3):
        u = torch.randint(0, 256, (a.batch, a.image, a.image, 3), dtype=torch.uint8)
        t = torch.randint(0, 1000, (a.batch,))
        ring.append((u.pin_memory(), t.pin_memory()) if pin else (u, t))
    return ring


def params_flat(torch, model):
    return torch.cat([p.detach().float().reshape(-1) for p in model.parameters()])


def check(a, torch, torchvision, dev):
    """K steps of eager and strong from one seed on one batch: their weight updates must agree."""
    res = {}
    for peer in ("eager", "strong"):
        a.peer = peer
        model, opt = build(a, torch, torchvision, dev, seed=1)
        st = Stepper(a, torch, dev, model, opt, peer, a.loss_scale)
        torch.manual_seed(2)  # the same batch for both
        st.x.copy_(torch.randn(a.batch, 3, a.image, a.image, device=dev))
        st.y.copy_(torch.randint(0, 1000, (a.batch,), device=dev))
        model.train()
        w0 = params_flat(torch, model)
        if peer == "strong" and dev.type == "cuda" and not a.no_graph:
            st.record(1)  # one plain step, then K-1 replays
            for _ in range(a.check - 1):
                st.step()
        else:
            for _ in range(a.check):
                st.step()
        if dev.type == "cuda":
            torch.cuda.synchronize()
        res[peer] = params_flat(torch, model) - w0
    ref = res["eager"].norm().item()
    diff = (res["strong"] - res["eager"]).norm().item() / ref if ref > 0 else float("inf")
    return {"check": "strong vs eager", "framework": "pytorch-%s" % torch.__version__, "arch": a.arch,
            "precision": a.precision, "batch": a.batch, "image": a.image, "steps": a.check, "loss_scale": a.loss_scale,
            "eager_update_norm": ref, "relative_difference": diff, "tolerance": a.check_tol,
            "graph": dev.type == "cuda" and not a.no_graph, "pass": diff <= a.check_tol}


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
    ap.add_argument("--peer", default="eager", choices=["eager", "strong"])
    ap.add_argument("--no-graph", action="store_true", help="strong without the CUDA graph")
    ap.add_argument("--loss-scale", type=float, default=128.0)
    ap.add_argument("--check", type=int, default=0, metavar="K")
    ap.add_argument("--check-tol", type=float, default=0.02)
    ap.add_argument("--self-check", action="store_true",
                    help="strong: --check 3 on a ResNet-18 (64x64, batch 16 at most) before timing; the result goes in the row")
    a = ap.parse_args()
    if a.batch < 1 or a.iters < 1 or a.warmup < 0 or a.check < 0 or a.loss_scale <= 0:
        ap.error("--batch and --iters must be >= 1, --warmup and --check >= 0, --loss-scale > 0")
    try:
        import torch
        import torchvision
    except ImportError as e:
        print(json.dumps({"error": "no torch/torchvision: %s" % e}))
        return 3
    dev = torch.device(a.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        print(json.dumps({"error": "--device cuda: PyTorch sees no GPU (torch.cuda.is_available() is False)"}))
        return 3
    tf32 = a.precision == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = True
    if a.check:
        r = check(a, torch, torchvision, dev)
        print(json.dumps(r))
        return 0 if r["pass"] else 1
    verified = None
    if a.self_check and a.peer == "strong":
        c = argparse.Namespace(**vars(a))
        c.arch, c.image, c.batch, c.check, c.feed = "resnet18", min(a.image, 64), min(a.batch, 16), 3, False
        verified = check(c, torch, torchvision, dev)
        if not verified["pass"]:
            print(json.dumps({"error": "the strong step does not train like the eager one", "self_check": verified}))
            return 1
    model, opt = build(a, torch, torchvision, dev, seed=0)
    st = Stepper(a, torch, dev, model, opt, a.peer, a.loss_scale)
    ring = feed_ring(a, torch, dev) if a.feed else None
    counter = [0]

    def step():
        if ring is not None:
            u8, t = ring[counter[0] % 3]
            counter[0] += 1
            st.u8.copy_(u8, non_blocking=True)
            st.y.copy_(t, non_blocking=True)
        st.step()

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize()

    graph = a.peer == "strong" and dev.type == "cuda" and not a.no_graph
    model.train()
    if graph:
        st.record(min(a.warmup, 3) or 1)
        for _ in range(max(a.warmup - 3, 0)):
            step()
    else:
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
                      "batch": a.batch, "feed": a.feed, "peer": a.peer, "graph": graph,
                      "loss_scale": a.loss_scale if a.peer == "strong" and a.precision == "fp16" else None,
                      "iters": a.iters, "images_per_s": round(ips, 3), "self_check": verified,
                      "tflops": round(ips * 24.5e-3, 4) if a.image == 224 else None}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
