#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Installs what tests/repo/easybuild.sh builds the easyconfig (contrib/easybuild/) with: EasyBuild,
# pinned, from PyPI in a venv at ${DLT_EB_VENV:-/opt/ebvenv} (its eb is $DLT_EB_VENV/bin/eb), and
# Lmod from Debian (`lmod`). Idempotent: a venv with this EasyBuild and an installed lmod are kept.
# The apt-get install holds /tmp/dpkg-test.lock, as every package install on a shared test machine does.
set -euo pipefail
VENV=${DLT_EB_VENV:-/opt/ebvenv}
EB_VERSION=5.4.1
if ! dpkg-query -W -f='${Status}' lmod 2>/dev/null | grep -q 'install ok installed'; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  export DEBIAN_FRONTEND=noninteractive
  flock /tmp/dpkg-test.lock bash -c "$SUDO apt-get update -q >/dev/null && $SUDO apt-get install -y -q --no-install-recommends lmod >/dev/null" ||
    { echo "install-easybuild: apt-get install lmod failed"; exit 1; }
fi
echo "install-easybuild: Lmod $(dpkg-query -W -f='${Version}' lmod)"
# eb is a shell script that looks for python on PATH: the venv's.
eb_version() { PATH=$VENV/bin:$PATH "$VENV/bin/eb" --version 2>/dev/null | sed -n 's/^This is EasyBuild \([0-9.]*\) .*/\1/p'; }
if [ -x "$VENV/bin/eb" ] && [ "$(eb_version)" = "$EB_VERSION" ]; then
  echo "install-easybuild: $VENV has EasyBuild $EB_VERSION"
  exit 0
fi
command -v python3 >/dev/null || { echo "install-easybuild: python3 missing (contrib/install-deps.sh)"; exit 1; }
python3 -m venv "$VENV" 2>/dev/null ||
  { flock /tmp/dpkg-test.lock apt-get install -y -q python3-venv >/dev/null && python3 -m venv "$VENV"; }
"$VENV/bin/pip" install -q --disable-pip-version-check "easybuild==$EB_VERSION"
v=$(eb_version)
[ "$v" = "$EB_VERSION" ] || { echo "install-easybuild: $VENV/bin/eb reports EasyBuild '$v', not $EB_VERSION"; exit 1; }
echo "install-easybuild: EasyBuild $v in $VENV"
