# Two commands do all the set-up: `make run` serves on embedded defaults, `make test` runs the whole suite.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint bench clean

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints.txt -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/engram migrate
	$(BIN)/engram serve

test: $(STAMP)
	scripts/ensure-browser
	$(BIN)/pytest $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check app tests bench migrations
	$(BIN)/ruff format --check app tests bench migrations
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python bench/memory.py

clean:
	rm -rf $(VENV) data .pytest_cache .mypy_cache .ruff_cache
