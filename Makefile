# pcplugins: `make demo` and `make test` set everything up on a fresh Debian/Ubuntu machine.
VENV ?= .venv
PY := $(VENV)/bin/python
# a second PETSc, built for complex scalars, for pcplugins.ShiftedLaplace's complex form; its own pip
# cache, since pip's wheel cache does not know about PETSC_CONFIGURE_OPTIONS
VENV_COMPLEX ?= .venv-complex
PYC := $(VENV_COMPLEX)/bin/python
N ?= 65

.PHONY: setup demo test test-core test-gpu lint bench c-example clean

setup: $(VENV)/.pcplugins-setup $(VENV_COMPLEX)/.pcplugins-setup

$(VENV)/.pcplugins-setup: ci/setup.sh setup.py
	VENV=$(VENV) bash ci/setup.sh
	touch $@

$(VENV_COMPLEX)/.pcplugins-setup: ci/setup.sh setup.py
	VENV=$(VENV_COMPLEX) PIP_CACHE_DIR=$${PIP_CACHE_DIR:-$$HOME/.cache/pip}-complex \
	  PETSC_CONFIGURE_OPTIONS="--with-debugging=0 --with-fc=0 --with-scalar-type=complex" bash ci/setup.sh
	touch $@

demo: $(VENV)/.pcplugins-setup
	$(PY) examples/poisson.py -n $(N) -dim 3 -convention petsc -ksp_type cg -pc_type python \
	  -pc_python_type pcplugins.GMG -ksp_rtol 1e-8

test: setup lint
	$(PY) -m pytest -q tests
	$(PYC) -m pytest -q tests

# the array core's tests: NumPy and SciPy only, no PETSc (any Python with numpy, scipy, pytest)
test-core:
	$${PYTHON:-$(PY)} -m pytest -q tests/core

# the GPU tests, on a machine with CuPy, a GPU and PETSc built with CUDA (ci/setup.sh's CUDA
# configure, or the device's PETSc): refuses to pass by skipping everything
test-gpu:
	$${PYTHON:-$(PY)} -c "from pcplugins import backend; assert backend.gpu_available(), 'make test-gpu: no CuPy or no GPU here'"
	$${PYTHON:-$(PY)} -m pytest -q -m gpu tests

# ruff, configured in pyproject.toml (ci/setup.sh installs it)
lint: setup
	$${PYTHON:-$(PY)} -m ruff check pcplugins tests benchmarks examples

bench: setup
	$(PY) benchmarks/gmg_poisson.py

# A C PETSc application selecting pcplugins.GMG: PCPYTHON from C needs -python and PETSC_DIR.
c-example: setup
	$(eval PD := $(shell $(PY) -c "import petsc; print(petsc.get_petsc_dir())"))
	mpicc -O2 -o examples/c/poisson3d examples/c/poisson3d.c -I$(PD)/include -L$(PD)/lib -lpetsc -Wl,-rpath,$(PD)/lib
	PETSC_DIR=$(PD) PYTHONPATH=$(CURDIR) examples/c/poisson3d -python $(abspath $(PY)) \
	  -ksp_type cg -pc_type python -pc_python_type pcplugins.GMG -ksp_view

clean:
	rm -rf $(VENV) $(VENV_COMPLEX) build *.egg-info
