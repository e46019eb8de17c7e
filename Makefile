# The two commands of the README: `make demo` (the CPU demo) and `make test` (everything CI runs).
# Both create .venv and install what they need; the CPU build of torch is pinned first so that
# pip never resolves the multi-GB CUDA build on a CPU machine.
PY      ?= python3
VENV    ?= .venv
BIN     := $(VENV)/bin
TORCH   ?= torch==2.13.0
STAMP   := $(VENV)/.installed

.PHONY: install demo test lint typecheck docs pytest clean

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
	$(BIN)/python -m pytest -q

# The built site carries MathJax; a page is then opened in headless Chromium with no network and
# must show typeset formulas (skipped with a message when Chromium is not installed).
docs: $(STAMP)
	$(BIN)/sphinx-build -W --keep-going -q -b html docs docs/_build/html
	$(BIN)/python docs/check_offline_math.py docs/_build/html/theory.html

test: lint typecheck pytest docs

clean:
	rm -rf docs/_build .pytest_cache .mypy_cache .ruff_cache
