# imid: `make run` builds the module and serves it; `make test` runs every test.
# Both install what is missing first (scripts/deps.sh).
SHELL := /bin/bash
MODULE := $(CURDIR)/target/release/libimid.so
PORT ?= 6379

.PHONY: deps build build-test-hooks run test unit integration soak lint bench bench-smoke cluster clean

deps:
	@bash scripts/deps.sh

build: deps
	cargo build --release

# The module with test-only hooks (IMID.TEST-CLOCK, IMID.TEST-PANIC), in its own target dir.
build-test-hooks: deps
	cargo build --release --features test-hooks --target-dir target/test-hooks

# Foreground redis-server on 127.0.0.1:$(PORT) with the module loaded, data under ./data.
run: build
	mkdir -p data
	redis-server --port $(PORT) --bind 127.0.0.1 --dir $(CURDIR)/data --loadmodule $(MODULE)

# Unit tests (Redis-free core), then integration tests against real redis-server processes.
test: build build-test-hooks
	cargo test --release --all-targets

# Criterion benches, server-level throughput (redis-benchmark) and memory per key; writes
# bench/RESULTS.md. Takes minutes; run on a quiet machine.
bench: build
	bash bench/run.sh

# A tiny run of the same scripts for CI: checks that every command runs without errors and the
# table is produced (no timing is asserted). Writes target/bench-smoke/RESULTS.md.
bench-smoke: build
	bash bench/run.sh --smoke

lint:
	cargo fmt --check
	cargo clippy --release --all-targets -- -D warnings

clean:
	cargo clean
	rm -rf data
