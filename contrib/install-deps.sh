#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs the Debian packages dltrain builds, tests and runs its local Slurm cluster with.
# Idempotent: packages already present are not touched, apt-get update runs at most once.
set -euo pipefail

PACKAGES=(
  build-essential autoconf automake libtool pkg-config
  slurm-wlm slurmctld slurmd slurm-client munge libslurm-dev
  libpmix-dev libpmix-bin
  libdnnl-dev libturbojpeg0-dev libjpeg62-turbo-dev libstb-dev libjpeg-turbo-progs zlib1g-dev
  libopenmpi-dev openmpi-bin
  libcmocka-dev valgrind strace clang libclang-rt-14-dev
  python3 iproute2 procps tmux bsdutils
  charliecloud-runtime runc
  debhelper lintian rpm chrpath
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "install-deps: all ${#PACKAGES[@]} packages present"
fi

# Slurm's packaged services must not run: the tests start their own private daemons.
for svc in slurmctld slurmd; do
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet "$svc" 2>/dev/null; then
    systemctl stop "$svc" || true
  fi
done

# NVML headers (nvml.h) for the plugin's NVML loader come from PyPI; optional.
if ! python3 -c 'import importlib.util,sys; sys.exit(0 if importlib.util.find_spec("nvidia") and __import__("glob").glob(__import__("os").path.join(__import__("nvidia").__path__[0],"*","include","nvml.h")) else 1)' 2>/dev/null; then
  python3 -m pip install -q nvidia-nvml-dev 2>/dev/null || echo "install-deps: nvidia-nvml-dev not installed (optional; built-in NVML declarations are used)"
fi
