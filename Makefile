# The README's two commands: `make demo` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed

.PHONY: install lint test test-slow demo bench clean

install: $(INSTALLED)

$(INSTALLED): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

lint: install
	$(BIN)/ruff check supervisor workers tests bench
	$(BIN)/ruff format --check supervisor workers tests bench
	$(BIN)/mypy supervisor workers

test: lint
	$(BIN)/pytest -q

test-slow: install
	$(BIN)/pytest -q -m slow

# Until gaffer ships its local model, the demo needs an endpoint.
DEMO_TASK := Survey this repository: what are its top-level folders for, and where is the agent loop? Answer in under 15 lines.
demo: install
	@if [ -z "$$OPENAI_BASE_URL" ]; then \
		echo "make demo: set OPENAI_BASE_URL (and OPENAI_API_KEY, GAFFER_MODEL) to an OpenAI-compatible endpoint"; exit 1; fi
	$(BIN)/gaffer run --max-steps 15 "$(DEMO_TASK)"
	$(BIN)/gaffer stats last

bench: install
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
