# `make run` and `make test` work on a fresh machine with Python 3.11+ only.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000
STAMP := $(VENV)/.installed
# The listen queue: twisted's default of 50 drops the connections of a burst of opens (200
# SSE clients reconnecting at once waited out a 1 s SYN retry each).
BACKLOG ?= 1024
# daphne processes of the full mode's web server, one per core (config/serve.py). The
# embedded mode serves with one: that process also runs the ingestion.
WEB_PROCESSES ?= 2
# Celery worker processes of the full mode, each running one ingestion loop: one per core.
INGEST_PROCESSES ?= $(shell nproc 2>/dev/null || echo 2)
SERVE = $(BIN)/python -m config.serve --host $(HOST) --port $(PORT) --backlog $(BACKLOG)

.PHONY: install run run-full run-recorded test bench check migrate clean

$(STAMP): pyproject.toml clients/python/pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@# uv installs the versions pip resolves in under half its time (docs/DECISIONS.md)
	$(BIN)/python -m pip install --quiet 'uv>=0.5'
	$(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python -e '.[dev]' -e './clients/python[pandas,polars,mcp]'
	@# nothing compiles an editable project: every process we start (servers, staff commands,
	@# test processes) would compile our modules again where bytecode is not written
	$(BIN)/python -m compileall -q -j 0 -x '/(\.venv|var|build)/' .
	touch $(STAMP)

install: $(STAMP)

migrate: install
	@mkdir -p var
	$(BIN)/python manage.py migrate --noinput

run: migrate
	$(BIN)/python manage.py seed_demo --base-url http://$(HOST):$(PORT)
	@echo "  Serving on http://$(HOST):$(PORT)/ (Ctrl-C to stop)"
	$(SERVE)

# The full mode in one command: the web process, a Celery worker (ingestion) and beat (the
# supervisor), against DATABASE_URL (PostgreSQL) and REDIS_URL, with the same seeded demo.
run-full: install
	@test -n "$(DATABASE_URL)" -a -n "$(REDIS_URL)" || { echo "run-full needs DATABASE_URL=postgres://... and REDIS_URL=redis://..."; exit 2; }
	@mkdir -p var
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py seed_demo --base-url http://$(HOST):$(PORT)
	@echo "  Serving on http://$(HOST):$(PORT)/ with $(INGEST_PROCESSES) Celery workers (ingestion) and beat (Ctrl-C stops them all)"
	HOST=$(HOST) PORT=$(PORT) BACKLOG=$(BACKLOG) WEB_PROCESSES=$(WEB_PROCESSES) $(BIN)/honcho start -f Procfile -c worker=$(INGEST_PROCESSES)

# The demo served from real recorded Binance traffic (data/realdata), played in a loop.
RECORDINGS := var/recordings/binance
run-recorded: migrate
	@mkdir -p $(RECORDINGS)
	$(BIN)/python manage.py import_recording data/realdata/binance-spot/btcusdt_20240808.gz $(RECORDINGS)/btcusdt.jsonl.gz --venue binance --symbol BTCUSDT --pair binance/BTC/USDT
	$(BIN)/python manage.py import_recording data/realdata/binance-spot/ethusdt_20240808.gz $(RECORDINGS)/ethusdt.jsonl.gz --venue binance --symbol ETHUSDT --pair binance/ETH/USDT
	$(BIN)/python manage.py seed_demo --base-url http://$(HOST):$(PORT) --recording binance=$(RECORDINGS)
	@echo "  Serving on http://$(HOST):$(PORT)/ (binance/BTC/USDT and ETH/USDT from the recording; Ctrl-C to stop)"
	$(SERVE)

# pytest-xdist processes. The embedded suite in 5, a file at a time in the order collected
# (tests/conftest.py puts the slow files and those that start servers first, so their waits
# overlap the rest; a fifth process keeps both cores busy while four wait on servers):
# 3.9 min of pytest on 2 cores, against 4.2 min in 4. The full mode (CI) one at a time, as
# its timing-bound fault tests were proven. TEST_WORKERS=N sets either.
TEST_WORKERS ?= $(if $(DATABASE_URL),0,5)
test: install
	@mkdir -p var
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

bench: install
	@command -v wrk >/dev/null || (apt-get install -y -q wrk >/dev/null 2>&1 || echo "wrk not installed: load comes from Python threads")
	$(BIN)/python bench/run_all.py

check: install
	$(BIN)/python manage.py check
	DJANGO_SETTINGS_MODULE=config.settings.production SECRET_KEY=$$($(BIN)/python -c 'import secrets;print(secrets.token_urlsafe(50))') \
	  ALLOWED_HOSTS=api.example.com $(BIN)/python manage.py check --deploy --fail-level WARNING

clean:
	rm -rf $(VENV) var build staticfiles
