# Tasks for this template. Each target installs what it needs into .venv first.
#   make demo     render the backend "foo", build it, and put a tensor on the device
#   make test     the whole test suite, including building rendered projects (the README's command)
# TORCH_SPEC chooses the torch to build and test against (default: the 2.13 CPU wheel).

PYTHON ?= python3
TORCH_SPEC ?= torch==2.13.0
NAME ?= npu
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell echo '$(TORCH_SPEC)' | tr -c 'A-Za-z0-9.\n' '_')

.PHONY: demo test test-fast render build-test example example-check reserved-names clean

$(STAMP): requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH_SPEC)" -r requirements-dev.txt
	rm -f $(VENV)/.installed-* && touch $@

demo: $(STAMP)
	$(BIN)/python scripts/project.py demo

test: $(STAMP)
	$(BIN)/python -m pytest tests

test-fast: $(STAMP)
	$(BIN)/python -m pytest tests -m "not slow"

render: $(STAMP)
	$(BIN)/python scripts/project.py render $(NAME)

build-test: $(STAMP)
	$(BIN)/python scripts/project.py build-test $(NAME)

example: $(STAMP)
	$(BIN)/python scripts/project.py example

example-check: $(STAMP)
	$(BIN)/python scripts/project.py example --check

reserved-names: $(STAMP)
	$(BIN)/python scripts/update_reserved_names.py

clean:
	rm -rf .work .pytest_cache
