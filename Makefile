# The README's two commands: `make demo` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed

.PHONY: install lint test test-slow demo bench clean sandbox-image sandbox-ready

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

# The sandbox tests need a daemon and the image. Where neither can be had (no root),
# they are skipped, unless GAFFER_REQUIRE_DOCKER=1 (as in CI) makes that a failure.
sandbox-ready: install
	@if bash sandbox_image/ensure-docker.sh; then PYTHON=$(BIN)/python bash sandbox_image/build-image.sh; \
	else echo "no Docker here: sandbox tests and benchmarks will be skipped"; fi

test: lint sandbox-ready
	$(BIN)/pytest -q

# The worker sandbox image, built from Debian's packages with no registry (idempotent).
sandbox-image: install
	PYTHON=$(BIN)/python bash sandbox_image/build-image.sh

test-slow: install
	$(BIN)/pytest -q -m slow

# Until gaffer ships its local model, the demo needs an endpoint.
DEMO_TASK := Survey this repository: what are its top-level folders for, and where is the agent loop? Answer in under 15 lines.
demo: install
	@if [ -z "$$OPENAI_BASE_URL" ]; then \
		echo "make demo: set OPENAI_BASE_URL (and OPENAI_API_KEY, GAFFER_MODEL) to an OpenAI-compatible endpoint"; exit 1; fi
	$(BIN)/gaffer run --max-steps 15 "$(DEMO_TASK)"
	$(BIN)/gaffer stats last

bench: sandbox-ready
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
