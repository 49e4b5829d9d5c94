# pcplugins: `make demo` and `make test` set everything up on a fresh Debian/Ubuntu machine.
VENV ?= .venv
PY := $(VENV)/bin/python
N ?= 65

.PHONY: setup demo test test-gpu bench clean

setup: $(VENV)/.pcplugins-setup

$(VENV)/.pcplugins-setup: ci/setup.sh setup.py
	VENV=$(VENV) bash ci/setup.sh
	touch $@

demo: setup
	$(PY) examples/poisson.py -n $(N) -dim 3 -convention petsc -ksp_type cg -pc_type python \
	  -pc_python_type pcplugins.GMG -ksp_rtol 1e-8

test: setup
	$(PY) -m pytest -q tests

bench: setup
	$(PY) benchmarks/gmg_poisson.py

clean:
	rm -rf $(VENV) build *.egg-info
