#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""ddp_contract: a torch.distributed program with no launcher code: init_process_group from env://
alone (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT from srun --dl-train), three DDP steps of a small
model on gloo, an all-reduce of the ranks. Prints one line per rank: its rank, the contract it was
given, the reduced sum, a checksum of the weights (equal on every rank after DDP), the CPUs it may
run on (os.sched_getaffinity) and the CPUs per task Slurm gave (SLURM_CPUS_PER_TASK)."""
import os
import sys

import torch
import torch.distributed as dist


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 2)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(100 + rank)
    for _ in range(3):
        loss = ddp(torch.randn(4, 8, generator=gen)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    t = torch.tensor([float(rank)])
    dist.all_reduce(t)
    weights = sum(p.double().sum().item() for p in model.parameters())
    # One write(2) of the whole line: workers started by one torchrun share its stdout pipe, and
    # print()'s separate writes of text and newline interleaved two workers' lines on a loaded machine.
    line = ("ddp rank=%d world=%d procid=%s local=%s/%s group=%s sum=%d weights=%.12f master=%s:%s cpus=%s cpt=%s\n" % (
        rank, world, os.environ.get("SLURM_PROCID"), os.environ.get("LOCAL_RANK"), os.environ.get("LOCAL_WORLD_SIZE"),
        os.environ.get("GROUP_RANK"), int(t.item()), weights, os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"],
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
