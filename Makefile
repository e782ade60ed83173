# The two commands a newcomer needs: `make plan` and `make test`. Everything else is optional.
PYTHON ?= python3
VENV := .venv
TOOLS := .venv-tools
PY := $(VENV)/bin/python
STACK ?= dev

.PHONY: plan test lint unit rehearse bench clean

$(VENV)/.installed: requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $@

$(TOOLS)/.installed: requirements-tools.txt
	$(PYTHON) -m venv $(TOOLS)
	$(TOOLS)/bin/pip install --quiet --disable-pip-version-check -r requirements-tools.txt
	touch $@

## The plan of a stack (default dev), with its Kubernetes objects rendered into rendered/<stack>.
plan: $(VENV)/.installed
	$(PY) -m infra.plan --stack $(STACK) --render rendered/$(STACK)

## Lint and the whole test suite (offline).
test: $(VENV)/.installed $(TOOLS)/.installed lint unit

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

unit: $(VENV)/.installed $(TOOLS)/.installed
	PATH="$(CURDIR)/$(TOOLS)/bin:$$PATH" $(PY) -m pytest -q

## Real vLLM, two ranks on loopback, on a tiny model of the stack's layout.
rehearse: $(VENV)/.installed
	$(PY) -m infra.rehearse --stack $(STACK)

clean:
	rm -rf $(VENV) $(TOOLS) .rehearsal rendered .pytest_cache .ruff_cache

## vLLM's memory guard in a pod-sized memory cgroup, with and without the weight prefetch (root).
.PHONY: rehearse-guard
rehearse-guard: $(VENV)/.installed
	$(PY) -m infra.rehearse.memory_guard --stack $(STACK)

## Break the rehearsal group on purpose and measure how each fault is noticed and recovered.
.PHONY: rehearse-faults
rehearse-faults: $(VENV)/.installed
	$(PY) -m infra.rehearse --faults --stack $(STACK)
