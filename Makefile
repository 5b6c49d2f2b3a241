# The two commands: `make demo` and `make test`. Both install what is missing first.
VENV := .venv
PY := $(VENV)/bin/python
DEMO ?= experiments/demo.yaml

.PHONY: install demo test lint clean vm-check

install:
	@bash scripts/install.sh

demo: install
	$(VENV)/bin/fabriclab run $(DEMO)

test:
	@bash scripts/install.sh --test
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports
	$(PY) -m pytest

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports

clean: install
	$(VENV)/bin/fabriclab clean

# The fresh-machine check in a throwaway stock-kernel Debian 12 VM (root; testbed/vm).
vm-check:
	@bash scripts/install.sh --vm
	$(VENV)/bin/fabriclab vm check
