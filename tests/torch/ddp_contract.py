#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""ddp_contract: a torch.distributed program with no launcher code: init_process_group from env://
alone (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT from srun --dl-train), three DDP steps of a small
model on gloo (the default) or, with --backend nccl, on NCCL and the task's GPU (device 0: the one
--dl-train left visible), an all-reduce of the ranks. Prints one line per rank: its rank, the
contract it was given, the reduced sum, a checksum of the weights (equal on every rank after DDP),
the CPUs it may run on (os.sched_getaffinity), the CPUs per task Slurm gave (SLURM_CPUS_PER_TASK),
the backend, the device and, on a GPU, its PCI bus id beside the plugin's DLT_GPU_PCI."""
import argparse
import os
import sys

import torch
import torch.distributed as dist


def gpu_bus_id(dev):
    """The PCI bus id of a CUDA device as dddd:bb:dd.f, or "-" where this PyTorch does not say."""
    p = torch.cuda.get_device_properties(dev)
    if not hasattr(p, "pci_bus_id"):
        return "-"
    return "%04x:%02x:%02x.0" % (getattr(p, "pci_domain_id", 0), p.pci_bus_id, p.pci_device_id)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", choices=("gloo", "nccl"), default="gloo")
    args = ap.parse_args()
    dev = torch.device("cuda", 0) if args.backend == "nccl" else torch.device("cpu")
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    dist.init_process_group(args.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 2).to(dev)
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[0] if dev.type == "cuda" else None)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(100 + rank)
    for _ in range(3):
        loss = ddp(torch.randn(4, 8, generator=gen).to(dev)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    t = torch.tensor([float(rank)], device=dev)
    dist.all_reduce(t)
    weights = sum(p.double().sum().item() for p in model.parameters())
    # One write(2) of the whole line: workers started by one torchrun share its stdout pipe, and
    # print()'s separate writes of text and newline interleaved two workers' lines on a loaded machine.
    line = ("ddp rank=%d world=%d procid=%s local=%s/%s group=%s sum=%d weights=%.12f master=%s:%s backend=%s device=%s "
            "gpu=%s dlt_gpu=%s cpus=%s cpt=%s\n" % (
                rank, world, os.environ.get("SLURM_PROCID"), os.environ.get("LOCAL_RANK"),
                os.environ.get("LOCAL_WORLD_SIZE"), os.environ.get("GROUP_RANK"), int(t.item()), weights,
                os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"], args.backend, dev,
                gpu_bus_id(dev) if dev.type == "cuda" else "-", os.environ.get("DLT_GPU_PCI", "-"),
                ",".join(str(c) for c in sorted(os.sched_getaffinity(0))), os.environ.get("SLURM_CPUS_PER_TASK", "-")))
    sys.stdout.flush()
    os.write(1, line.encode())
    dist.barrier()
    dist.destroy_process_group()
    # Leave without C++ teardown: at interpreter exit PyTorch's gloo/store threads now and then end
    # in std::terminate ("terminate called without an active exception", SIGABRT) when a peer's
    # store connection went first, a crash after the work that would fail the step. The contract
    # is what this program checks; its result is printed and flushed above.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
