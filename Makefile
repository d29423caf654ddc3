# The README's two commands: `make demo` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed
DEV_INSTALLED := $(VENV)/.dev-installed

.PHONY: install dev lint test test-slow demo bench bench-agent bench-delegation clean sandbox-image sandbox-ready browser-ready

# Just the `gaffer` command and what it runs on, and `gaffer` on your PATH (a link in
# ~/.local/bin, said in one line); `make dev` adds the test and lint tools.
install: $(INSTALLED)
	@$(BIN)/python -m supervisor.on_path $(abspath $(BIN))/gaffer

$(INSTALLED): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
	@# Bytecode now, so every start reads it even where PYTHONDONTWRITEBYTECODE is set
	@# (gaffer's own modules compiled from source cost a tenth of a second each start).
	$(BIN)/python -m compileall -q supervisor workers profiles >/dev/null
	touch $@

dev: $(DEV_INSTALLED)

$(DEV_INSTALLED): $(INSTALLED)
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

lint: dev
	$(BIN)/ruff check supervisor workers tests bench
	$(BIN)/ruff format --check supervisor workers tests bench
	$(BIN)/mypy supervisor workers

# The sandbox tests need a daemon and the image. Where neither can be had (no root),
# they are skipped, unless GAFFER_REQUIRE_DOCKER=1 (as in CI) makes that a failure.
sandbox-ready: $(INSTALLED)
	@if bash sandbox_image/ensure-docker.sh; then PYTHON=$(BIN)/python bash sandbox_image/build-image.sh; \
	else echo "no Docker here: sandbox tests and benchmarks will be skipped"; fi

# The timeline page is checked in a real headless Chromium: Debian's, installed here as
# root when missing (without it, those tests are skipped, or fail under CI).
browser-ready:
	@if ! command -v chromium >/dev/null && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; fi

test: dev lint sandbox-ready browser-ready
	$(BIN)/pytest -q

# The worker sandbox image, built from Debian's packages with no registry (idempotent).
sandbox-image: $(INSTALLED)
	PYTHON=$(BIN)/python bash sandbox_image/build-image.sh

test-slow: dev
	$(BIN)/pytest -q -m slow

# The main job on a fresh machine: a survey of this repository by a real model, asked as
# a newcomer would ask. With OPENAI_BASE_URL set it uses that endpoint; otherwise the
# local model (fetched once, about 1.1 GB, then served by llama.cpp on 127.0.0.1).
# Its time limit is the run's own: gaffer paces the agents to answer within it
# (workers/guards/time_left.py), so the demo, set up, ends inside 3 minutes (95 to
# 126 s on 2 cores with the model's check, the server's start and the stats).
DEMO_TASK := Survey this repository for a newcomer: what each top-level folder is for, where the agent loop lives, how a worker is sandboxed.
DEMO_SECONDS := 150
demo: install
	$(BIN)/gaffer local pull
	$(BIN)/gaffer run --read-only --max-seconds $(DEMO_SECONDS) "$(DEMO_TASK)"
	$(BIN)/gaffer stats last

# The agent task set: small Python exercises solved by the local model as a coder, against
# the same model answering in one shot with no tools (bench/agent_tasks.py).
bench-agent: sandbox-ready
	$(BIN)/python -m bench.agent_tasks $(BENCH_ARGS)

# Delegating against one agent, on code nobody here wrote: a survey of two installed
# dependencies' sources and a refactor of a generated project (bench/delegation.py).
# BENCH_ARGS="--base-url URL --model NAME" measures another endpoint.
bench-delegation: sandbox-ready
	$(BIN)/python -m bench.delegation $(BENCH_ARGS)

bench: dev sandbox-ready
	$(BIN)/python -m bench

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
