# The two set-up commands of the README: `make demo` and `make test`.
# Both create .venv with Python 3.11 (or $(PYTHON)) and install the package.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_DIR ?= demo

.PHONY: demo test test-all lint bench-convert clean

$(STAMP): setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip setuptools wheel
	$(BIN)/pip install -e ".[dev]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/tfr-convert --input synthetic --output $(DEMO_DIR)/synthetic \
		--simulate-clicks --seed 0 --overwrite
	@echo "ELWC shards and manifest: $(DEMO_DIR)/synthetic"

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/pytest -m "not slow"

test-all: $(STAMP)
	$(BIN)/pytest

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

bench-convert: $(STAMP)
	$(BIN)/python -m pipelines.benchmarks.convert_bench

clean:
	rm -rf $(VENV) $(DEMO_DIR) .pytest_cache
