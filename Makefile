# Two entry points: `make demo` and `make test`. Both build their own virtualenv.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo console test install bench media clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# the CPU build of torch first (a local wheel here); unpinned, sentence-transformers would pull a CUDA build
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/cyberjurors demo examples/cases examples/incremental
	@echo "To look at these cases in the web console: make console (then open http://127.0.0.1:8080/)"

# the demo's cases judged again beside the web console (embedded broker + one worker); Ctrl-C stops all
console: $(STAMP)
	$(BIN)/cyberjurors console --embedded examples/cases examples/incremental

test: $(STAMP)
	# Prometheus 2.42 (server + promtool) from Debian for the alert-rule and live Prometheus tests;
	# apt-get needs root, and the package starts no service
	command -v promtool >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null) \
	  || echo "WARNING: could not install Debian's prometheus (apt-get needs root): the promtool and live Prometheus tests will be skipped"
	# Debian's Chromium for the console's browser tests (Playwright drives it; never `playwright install`)
	command -v chromium >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	  || echo "WARNING: could not install Debian's chromium (apt-get needs root): the console's browser tests will be skipped"
	# four test files at a time (each on one process: --dist loadfile), each with its own broker; most
	# tests wait on a broker or a worker rather than the CPU, so four run well on two cores
	$(BIN)/python -m pytest -q -n 4 --dist loadfile

bench: $(STAMP)
	$(BIN)/python bench/broker_hop.py
	$(BIN)/python bench/pipeline_latency.py
	$(BIN)/python bench/precedent_search.py
	$(BIN)/python bench/token_economy.py
	$(BIN)/python bench/scaling.py
	$(BIN)/python bench/throughput.py
	$(BIN)/python bench/rebalance.py
	$(BIN)/python bench/soak.py
	$(BIN)/python bench/frame_recall.py

media: $(STAMP)
	$(BIN)/python examples/make_media.py

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
