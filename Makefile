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

# Another port or address: `make run PORT=8001` (or ENGRAM_PORT / ENGRAM_HOST in the environment).
ifdef PORT
export ENGRAM_PORT := $(PORT)
endif

run: $(STAMP)
	$(BIN)/engram migrate
	@echo "Engram: serving http://$${ENGRAM_HOST:-127.0.0.1}:$${ENGRAM_PORT:-8000} (another port: make run PORT=8001)"
	$(BIN)/engram serve

# The suite runs on PYTEST_WORKERS processes (pytest-xdist); PYTEST_WORKERS=0 runs it in this one.
PYTEST_WORKERS ?= 2

test: $(STAMP)
	scripts/ensure-browser
	$(BIN)/pytest -n $(PYTEST_WORKERS) $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check app tests bench migrations
	$(BIN)/ruff format --check app tests bench migrations
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python bench/memory.py

clean:
	rm -rf $(VENV) data .pytest_cache .mypy_cache .ruff_cache
