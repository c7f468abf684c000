# Tasks for this template. Each target installs what it needs into .venv first.
#   make demo                 render the backend "foo", build it, and put a tensor on the device
#   make test                 the whole test suite (the README's command, run by CI): rendering, validation,
#                             lint, docs, copier update, and building and testing rendered projects
#   make test-fast            the same without the builds
#   make test-lint, make test-render, make test-build NAME=foo
#                             `make test` in the parts that CI runs as parallel jobs (.github/workflows/ci.yml):
#                             lint, docs and CI checks; the other fast tests; the builds of one device name
#   make render NAME=npu      render a backend into .work/NAME (DATA="benchmarks=false ci=none" for other answers)
#   make build-test NAME=npu  render, build in its own venv and run its test suite (DATA as for render)
#   make lint                 ruff on scripts/ and tests/, formatting of renders, actionlint on both CI workflows
#   make docs                 build the documentation site into site/ in strict mode (make docs-serve: live)
#   make example              regenerate example_generated/ after changing template/ (example-check: compare)
#   make variants             list the feature variants the tests cover and which share a build
#   make torch-spec           print the torch the tasks install (torch-releases: every supported release)
#   make venv                 only install the tools and torch into .venv
# TORCH_SPEC chooses the torch to build and test against (default: the default release of
# copier/torch.yml, the one list of supported releases), TORCH_INDEX_URL the index it comes from
# (default: PyTorch's CPU index where it is reachable, else the package index: scripts/install_torch.py
# says which; CI's workflow: https://download.pytorch.org/whl/cpu, whose plain `torch` is the newest CPU build).

PYTHON ?= python3
TORCH_VERSION := $(shell sed -n 's/^default: *"\([^"]*\)".*/\1/p' copier/torch.yml)
TORCH_RELEASES := $(shell sed -n 's/^  - *"\([^"]*\)".*/\1/p' copier/torch.yml)
TORCH_SPEC ?= torch==$(TORCH_VERSION)
TORCH_INDEX_URL ?=
NAME ?= npu
# The test targets run the tests on this many processes (pytest-xdist; 0: in one process). A build of a
# rendered project runs 2 compiler jobs; on 2 cores, 2 workers keep both busy while the other worker
# runs a generated test suite, which is mostly one thread.
TEST_WORKERS ?= 2
# --durations: the log of every run (CI's too) lists the slowest tests, the builds of rendered projects
# among them, so that where `make test`'s time goes is read, not guessed.
PYTEST = $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder --durations=25
DATA ?=
DATA_ARGS := $(foreach item,$(DATA),--data $(item))
VENV := .venv
BIN := $(VENV)/bin
# Tools the tasks call (ruff, clang-format, actionlint, mkdocs) come from the same environment.
export PATH := $(abspath $(BIN)):$(PATH)
STAMP := $(VENV)/.installed-$(shell echo '$(strip $(TORCH_SPEC) $(TORCH_INDEX_URL))' | tr -c 'A-Za-z0-9.\n' '_')
# The tests that `make test-lint` runs; `make test-render` runs every other test that builds nothing.
LINT_TESTS := tests/test_lint.py tests/test_docs.py tests/test_format.py tests/test_ci.py

.PHONY: torch-spec torch-releases demo test test-fast test-lint test-render test-build render build-test example example-check \
	lint docs docs-serve variants reserved-names venv clean

$(STAMP): requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python scripts/install_torch.py "$(TORCH_SPEC)" $(if $(TORCH_INDEX_URL),--index-url "$(TORCH_INDEX_URL)")
	$(BIN)/python -m pip install --quiet -r requirements-dev.txt
	rm -f $(VENV)/.installed-* && touch $@

torch-spec:
	@echo '$(TORCH_SPEC)'

torch-releases:
	@echo '$(TORCH_RELEASES)'

venv: $(STAMP)

demo: $(STAMP)
	$(BIN)/python scripts/project.py demo

test: $(STAMP)
	$(PYTEST) tests

test-fast: $(STAMP)
	$(PYTEST) tests -m "not slow"

# `make test` in parts for CI's parallel jobs; together they run every test (tests/test_ci.py checks it).
test-lint: $(STAMP)
	$(PYTEST) $(LINT_TESTS)

test-render: $(STAMP)
	$(PYTEST) tests -m "not slow" $(addprefix --ignore=,$(LINT_TESTS))

test-build: $(STAMP)
	$(PYTEST) tests -m slow --backend $(NAME)

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
