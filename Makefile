# Tasks for this template. Each target installs what it needs into .venv first.
#   make demo                 render the backend "foo", build it, and put a tensor on the device
#   make test                 the whole test suite (the README's command, run by CI): rendering, validation,
#                             lint, docs, copier update, and building and testing rendered projects
#   make test-fast            the same without the builds
#   make render NAME=npu      render a backend into .work/NAME (DATA="benchmarks=false ci=none" for other answers)
#   make build-test NAME=npu  render, build in its own venv and run its test suite (DATA as for render)
#   make lint                 ruff on scripts/ and tests/, formatting of renders, actionlint on the generated CI
#   make docs                 build the documentation site into site/ in strict mode (make docs-serve: live)
#   make example              regenerate example_generated/ after changing template/ (example-check: compare)
#   make variants             list the feature variants the tests cover and which share a build
#   make torch-spec           print the torch the tasks install
# TORCH_SPEC chooses the torch to build and test against (default: the release in copier/torch.yml,
# the one source of the version pin).

PYTHON ?= python3
TORCH_VERSION := $(shell sed -n 's/^version: *"\([^"]*\)".*/\1/p' copier/torch.yml)
TORCH_SPEC ?= torch==$(TORCH_VERSION)
NAME ?= npu
DATA ?=
DATA_ARGS := $(foreach item,$(DATA),--data $(item))
VENV := .venv
BIN := $(VENV)/bin
# Tools the tasks call (ruff, clang-format, actionlint, mkdocs) come from the same environment.
export PATH := $(abspath $(BIN)):$(PATH)
STAMP := $(VENV)/.installed-$(shell echo '$(TORCH_SPEC)' | tr -c 'A-Za-z0-9.\n' '_')

.PHONY: torch-spec demo test test-fast render build-test example example-check lint docs docs-serve variants reserved-names clean

$(STAMP): requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH_SPEC)" -r requirements-dev.txt
	rm -f $(VENV)/.installed-* && touch $@

torch-spec:
	@echo '$(TORCH_SPEC)'

demo: $(STAMP)
	$(BIN)/python scripts/project.py demo

test: $(STAMP)
	$(BIN)/python -m pytest tests

test-fast: $(STAMP)
	$(BIN)/python -m pytest tests -m "not slow"

render: $(STAMP)
	$(BIN)/python scripts/project.py render $(NAME) $(DATA_ARGS)

build-test: $(STAMP)
	$(BIN)/python scripts/project.py build-test $(NAME) $(DATA_ARGS)

example: $(STAMP)
	$(BIN)/python scripts/project.py example

example-check: $(STAMP)
	$(BIN)/python scripts/project.py example --check

lint: $(STAMP)
	$(BIN)/python scripts/checks.py lint

docs: $(STAMP)
	$(BIN)/python scripts/checks.py docs

docs-serve: $(STAMP)
	$(BIN)/mkdocs serve

variants: $(STAMP)
	$(BIN)/python scripts/checks.py variants

reserved-names: $(STAMP)
	$(BIN)/python scripts/update_reserved_names.py

clean:
	rm -rf .work .pytest_cache site
