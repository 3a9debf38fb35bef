#!/usr/bin/env bash
# quickstart.sh: from a fresh clone to a real srun step on a local two-node Slurm cluster:
# install dependencies, build, start the test cluster, run the main job, stop the cluster.
# Needs root (the local cluster runs slurmd). Leaves nothing running.
set -euo pipefail
cd "$(dirname "$0")/.."
bash contrib/install-deps.sh
[ -x configure ] || ./autogen.sh
[ -f Makefile ] || ./configure
make -j"$(nproc)"
export DLT_CLUSTER_NODES=2
trap 'bash tests/slurm/cluster.sh down' EXIT
bash tests/slurm/cluster.sh up
eval "$(bash tests/slurm/cluster.sh env)"
echo "quickstart: sinfo"; sinfo -N
echo "quickstart: srun -N2 -n4 --ntasks-per-node=2 --gpus-per-node=2 --mpi=pmix --dl-train=verbose dltrain env"
srun -N2 -n4 --ntasks-per-node=2 --gpus-per-node=2 --mpi=pmix --dl-train=verbose trainer/dltrain env
