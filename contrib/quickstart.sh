#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# quickstart.sh: from a fresh clone to a real srun step on a local two-node Slurm cluster:
# install dependencies, build, start the test cluster, run the main job, stop the cluster.
# Needs root (the local cluster runs slurmd). Leaves nothing running.
set -euo pipefail
cd "$(dirname "$0")/.."
bash contrib/install-deps.sh
[ -x configure ] || ./autogen.sh
[ -f Makefile ] || ./configure
make -j"$(nproc)"
# The local cluster's stand-in NVML (a test library, not installed; make check builds it too).
make tests/fake_nvml/libfakenvml.la
export DLT_CLUSTER_NODES=2
trap 'bash tests/slurm/cluster.sh down; rm -rf "${ckpt:-}"' EXIT
bash tests/slurm/cluster.sh up
eval "$(bash tests/slurm/cluster.sh env)"
echo "quickstart: sinfo"; sinfo -N
echo "quickstart: srun -N2 -n4 --ntasks-per-node=2 --gpus-per-node=2 --mpi=pmix --dl-train=verbose dltrain env"
srun -N2 -n4 --ntasks-per-node=2 --gpus-per-node=2 --mpi=pmix --dl-train=verbose trainer/dltrain env
# The main job: synchronous data-parallel training on 2 nodes x 2 ranks, CPU backend, a small
# ResNet-18 on small synthetic images, checkpoints in a temporary directory.
ckpt=$(mktemp -d /tmp/dltrain-quickstart.XXXXXX)
echo "quickstart: srun ... --dl-train dltrain train --synthetic (ResNet-18 x0.25, 32x32, 4 classes, 4 epochs)"
srun -N2 --ntasks-per-node=2 --gpus-per-node=2 --mpi=pmix --dl-train trainer/dltrain train --synthetic \
  --arch resnet18 --width 0.25 --image-size 32 --classes 4 --batch 8 --synthetic-size 512 --epochs 4 \
  --warmup-epochs 0 --lr 0.4 --log-every 16 --checkpoint-dir "$ckpt"
srun -N2 --ntasks-per-node=2 --gpus-per-node=2 --mpi=pmix --dl-train trainer/dltrain eval --synthetic \
  --arch resnet18 --width 0.25 --image-size 32 --classes 4 --batch 8 --eval-size 256 \
  --checkpoint "$ckpt/ckpt-00000064.safetensors"
