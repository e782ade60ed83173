# The two commands a newcomer needs: `make plan` and `make test`. Everything else is optional.
PYTHON ?= python3
VENV := .venv
TOOLS := .venv-tools
MUTANTS := .venv-mutants
PY := $(VENV)/bin/python
# .venv holds the runtime (requirements.txt: what the planner and the program import) for `make
# plan`; the development set (requirements-dev.txt: tests, lint, scanners, browser) is laid on
# top of it, with a stamp of its own, by the targets that need it.
DEV := $(VENV)/.installed-dev
STACK ?= dev

.PHONY: plan test packages lint unit rehearse bench clean mutants

$(VENV)/.installed: requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $@

$(DEV): $(VENV)/.installed requirements-dev.txt
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $@

$(TOOLS)/.installed: requirements-tools.txt
	$(PYTHON) -m venv $(TOOLS)
	$(TOOLS)/bin/pip install --quiet --disable-pip-version-check -r requirements-tools.txt
	touch $@

$(MUTANTS)/.installed: requirements.txt requirements-dev.txt requirements-mutants.txt
	$(PYTHON) -m venv $(MUTANTS)
	$(MUTANTS)/bin/pip install --quiet --disable-pip-version-check -r requirements-mutants.txt
	touch $@

## The plan of a stack (default dev), with its Kubernetes objects rendered into rendered/<stack>;
## ARGS go to `python -m infra.plan` as they are, e.g. ARGS="--set instanceType=m7g.4xlarge".
plan: $(VENV)/.installed
	$(PY) -m infra.plan --stack $(STACK) --render rendered/$(STACK) $(ARGS)

## Every shipped image's tag resolved to its multi-arch index's digest at its registry, the index
## checked for linux/arm64, the pins written to components/manifests/images.json (needs the
## registries: Docker Hub, registry.k8s.io); ARGS="--registry-host-map docker.io=http://host:port".
.PHONY: pin-images
pin-images: $(VENV)/.installed
	$(PY) -m tools.pins $(ARGS)

## Every generated file written again after a change meant to alter them: the rendered dev and
## prod objects (tests/fixtures/rendered) and the docs' generated blocks (the README's scaling day
## and change table, docs/planning.md's ranking and stack keys). tests/test_regen.py runs
## `python -m tools.regen --check`, which names each stale file.
.PHONY: regen
regen: $(VENV)/.installed
	$(PY) -m tools.regen

## Lint and the whole test suite (offline), after the distribution's packages it uses.
test: packages $(DEV) $(TOOLS)/.installed lint unit

## nginx, libseccomp and venv support, installed only when missing (root or sudo).
packages:
	@PYTHON=$(PYTHON) .ci/packages

lint: $(DEV)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

unit: $(DEV) $(TOOLS)/.installed
	PATH="$(CURDIR)/$(TOOLS)/bin:$$PATH" $(PY) -m pytest -q

## Real vLLM, two ranks on loopback, on a tiny model of the stack's layout; then the prefill
## probe on a short full-width slice of the model (~3 minutes more).
rehearse: packages $(DEV)
	$(PY) -m tools.rehearse --stack $(STACK)

## Capacity of the deployed stack (`pulumi stack output`, or ARGS="--endpoint URL"), measured
## with the pinned vLLM's `vllm bench serve` and printed beside the plan; raw results in
## bench-results/. ARGS=--quick is the smoke test (three 100-token replies, one stream);
## `python -m tools.bench.capacity --job` is the same run as an in-cluster Job.
bench: $(DEV)
	$(PY) -m tools.venvs --root .rehearsal/venv
	$(PY) -m tools.bench.capacity --stack $(STACK) $(ARGS)

## The served model's quality on the project's lm-eval task (tools/bench/quality_task), for the
## stack's endpoint, or ARGS="--endpoint URL --against URL2" to compare bf16 with a quantized stack
## (keys: GEMMA_GRAVITON_API_KEY, GEMMA_GRAVITON_AGAINST_API_KEY). Builds .rehearsal/quality once.
.PHONY: quality
quality: $(DEV)
	$(PY) -m tools.bench.quality $(ARGS)

## Mutation testing of the pure core against its unit tests ([tool.mutmut] in pyproject.toml),
## then every mutant not killed; results stay in mutants/, and a second run retests only what
## changed. ARGS="infra.plan.kv_cache.*" narrows the run to mutants whose names match.
mutants: $(MUTANTS)/.installed
	$(MUTANTS)/bin/mutmut run $(ARGS)
	$(MUTANTS)/bin/mutmut results

clean:
	rm -rf $(VENV) $(TOOLS) $(MUTANTS) mutants .rehearsal rendered .pytest_cache .ruff_cache

## Break the rehearsal group on purpose and measure how each fault is noticed and recovered.
.PHONY: rehearse-faults
rehearse-faults: packages $(DEV)
	$(PY) -m tools.rehearse --faults --stack $(STACK)

## The same, with the fuller prefill probe (one whole period of the model's layer pattern)
## and the step-timeout row (run as root: it raises its ranks' priority while its prompt runs).
.PHONY: rehearse-prefill
rehearse-prefill: packages $(DEV)
	$(PY) -m tools.rehearse --prefill --stack $(STACK)

## gemma-4-26B-A4B-it's MoE layers beside gemma-4-12B-it's on this CPU, real vLLM, bf16 and int8:
## decode per token at 1 and 4 streams, prefill, bytes read per token, the MoE/dense ratio
## (tools/rehearse/measure/moe_probe.py; ~15 minutes on 2 cores, a 3.1 GB slice built once).
.PHONY: rehearse-moe
rehearse-moe: packages $(DEV)
	$(PY) -m tools.rehearse.measure.moe_probe --stack $(STACK) $(ARGS)

## llama.cpp beside vLLM on the same gemma-4-12B-it slices on this CPU: llama.cpp (llama-cpp-python
## 0.3.36's sdist, built once into .rehearsal/llamacpp) in bf16, Q8_0 and Q4_0 against vLLM's bf16
## and int8, ms a layer at 1 and 4 streams and prefill, and llama.cpp/vLLM (moe_probe.py --peer).
.PHONY: rehearse-peer
rehearse-peer: packages $(DEV)
	$(PY) -m tools.rehearse.measure.moe_probe --peer --stack $(STACK) $(ARGS)

## A tiny random-weight Gemma 4 mixture of experts (gemma-4-26B-A4B-it's attention layout, 4
## experts, top-2) served by real vLLM behind the gatekeeper, one rank and two, bf16 and int8:
## the MoE kernels vLLM logged, KV tokens against the planner's, a completion and lm-eval through
## the gatekeeper (tools/rehearse/measure/moe_group.py; int8 says why where vLLM has no kernel).
.PHONY: rehearse-moe-group
rehearse-moe-group: packages $(DEV)
	$(PY) -m tools.rehearse.measure.moe_group --stack $(STACK) $(ARGS)
