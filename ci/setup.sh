#!/usr/bin/env bash
# Set up everything pcplugins needs in a virtual environment at .venv:
# system BLAS/LAPACK and MPI through apt when missing, then mpi4py, PETSc and
# petsc4py built from their PyPI sources, NumPy, SciPy, pytest, and CuPy when an
# NVIDIA GPU is present. A second run is quick: the venv is kept and pip caches
# the built wheels.
#
# MPI comes from the system (Debian's mpich), not from the mpich wheel: a
# pip-built libpetsc records the directory of the MPI it was linked with, and a
# wheel-installed MPI lives inside a venv that may be deleted while pip's wheel
# cache keeps handing the same libpetsc to new venvs.
#
# PETSC_CONFIGURE_OPTIONS is passed to PETSc's configure (for example
# "--with-cuda=1 --with-cuda-arch=90"); pip's wheel cache does not know about
# it, so a changed value needs PIP_NO_CACHE_DIR=1 or its own PIP_CACHE_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo

need=()
ldconfig -p | grep -q 'libopenblas\|liblapack\.so' && [ -e /usr/include/x86_64-linux-gnu/cblas.h -o -e /usr/include/cblas.h -o -n "$(ls /usr/include/*/openblas* 2>/dev/null)" ] || need+=(libopenblas-dev)
command -v mpicc >/dev/null || need+=(mpich libmpich-dev)
command -v make >/dev/null && command -v gcc >/dev/null || need+=(build-essential)
if [ ${#need[@]} -gt 0 ]; then
  echo "setup: apt-get install ${need[*]}"
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
PY="$VENV/bin/python"
"$PY" -m pip install -q --upgrade pip setuptools wheel cython
"$PY" -m pip install -q numpy scipy pytest
# the linter make test runs (pyproject.toml configures it), pinned so that a new release's rules
# cannot turn CI red by themselves
"$PY" -m pip install -q ruff==0.17.6
export MPICC=${MPICC:-$(command -v mpicc)}
# mpi4py built against the system MPI (PyPI's binary wheel looks for libmpi.so.12, which
# Debian's mpich does not ship); pip caches the built wheel
"$PY" -c 'from mpi4py import MPI' 2>/dev/null || "$PY" -m pip install -q --force-reinstall --no-binary mpi4py mpi4py
if ! "$PY" -c 'import petsc4py' 2>/dev/null; then
  export PETSC_CONFIGURE_OPTIONS=${PETSC_CONFIGURE_OPTIONS:---with-debugging=0 --with-fc=0}
  echo "setup: building PETSc (about 10 minutes on 2 cores the first time) with: $PETSC_CONFIGURE_OPTIONS"
  "$PY" -m pip install -q petsc
  echo "setup: building petsc4py (about 10 minutes the first time)"
  "$PY" -m pip install -q --no-build-isolation petsc4py
fi
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
  "$PY" -c 'import cupy' 2>/dev/null || "$PY" -m pip install -q cupy-cuda12x || echo "setup: CuPy not installed; GPU paths unavailable"
fi
"$PY" -m pip install -q --no-deps --no-build-isolation -e .
"$PY" -c 'from petsc4py import PETSc; import pcplugins; print("setup: PETSc", ".".join(map(str, PETSc.Sys.getVersion())), "ready in", "'"$VENV"'")'
