# cachelab: `make demo` and `make test` do everything on a fresh Debian machine,
# installing what is missing (Debian packages, the Python virtualenv, the Rust build).

SHELL := /bin/bash
.DEFAULT_GOAL := help

VENV      := .venv
PY        := $(VENV)/bin/python
STAMP     := $(VENV)/.installed
SUDO      := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)
# Debian packages the tests, the demo and the benchmarks run against (chromium: the
# report's browser test opens a generated report headless; tcpdump: the capture-to-trace
# test records loopback).
APT_PKGS  := memcached redis-server nutcracker libmemcached-tools iperf3 openssh-server chromium \
             tcpdump valgrind
# Commands that tell whether each package above is installed.
APT_CMDS  := memcached redis-server nutcracker memcaslap iperf3 sshd chromium tcpdump valgrind

.PHONY: help deps system-deps rust-deps build test lint test-rust test-python demo bench pgo fuzz clean

help:
	@echo "make demo   build and run a short real experiment, print where its report is"
	@echo "make test   build and run every test (Rust and Python) and the linters"
	@echo "make bench  measure against the peer tools (see README: Performance)"
	@echo "make fuzz   fuzz the request and reply parsers (FUZZ_SECONDS each, default 60)"
	@echo "make build  release build of the Rust binaries"
	@echo "make pgo    profile-guided build of the proxy (target/pgo/release; see docs/performance.md)"

deps: system-deps rust-deps $(STAMP)

system-deps:
	@missing=0; for c in $(APT_CMDS); do command -v $$c >/dev/null || missing=1; done; \
	if [ $$missing -eq 1 ]; then \
	  echo "installing $(APT_PKGS) from Debian's packages"; \
	  $(SUDO) apt-get update -q && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -q $(APT_PKGS); \
	fi
	@# Debian starts the packaged services; our tests start their own on free ports.
	@-$(SUDO) systemctl disable --now memcached redis-server nutcracker ssh >/dev/null 2>&1 || true

rust-deps:
	@command -v cargo >/dev/null || { echo "cargo not found: install Rust with rustup"; exit 1; }
	@rustup component list --installed 2>/dev/null | grep -q clippy || rustup component add clippy rustfmt

$(STAMP): pyproject.toml constraints.txt
	python3 -m venv $(VENV)
	PIP_CONSTRAINT=constraints.txt $(PY) -m pip install -q --upgrade pip
	PIP_CONSTRAINT=constraints.txt $(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

build: rust-deps
	cargo build --release --workspace

lint: deps
	cargo fmt --all --check
	cargo clippy --workspace --all-targets -- -D warnings
	$(VENV)/bin/ruff check python bench
	$(VENV)/bin/mypy

# Release profile: the same binaries serve the Rust integration tests, the Python tests
# and the demo, so the workspace is compiled once.
test-rust: deps
	cargo test --release --workspace

test-python: deps
	cargo build --release --workspace
	@# Two at a time (pytest-xdist), then the tests marked serial (they measure rates on
	@# shared links and CPUs) alone.
	$(VENV)/bin/pytest -q -n 2 -m "not serial" python/tests
	$(VENV)/bin/pytest -q -m serial python/tests

test: lint test-rust test-python

demo: deps build
	$(VENV)/bin/cachelab run experiments/demo.toml --out demo-out --again

# The profile-guided build of the proxy and the floor (bench/pgo.py, about 5 minutes):
# target/pgo/release. It needs rustc's own llvm-profdata (rustup's llvm-tools).
pgo: deps build
	@rustup component list --installed 2>/dev/null | grep -q llvm-tools || rustup component add llvm-tools
	$(PY) bench/pgo.py

# proxy_bench.py measures the profile-guided build when one could be made, else the plain one.
bench: deps build
	cargo build --release --workspace --examples
	@ls bench/*_bench.py >/dev/null 2>&1 || { echo "no benchmarks yet"; exit 1; }
	@# A line of its own: `make -n bench` runs lines that name $(MAKE), and only those.
	@$(MAKE) --no-print-directory pgo || { rm -f target/pgo/release/cachelab-proxy target/pgo/release/cachelab-floor; \
	  echo "no profile-guided build: proxy_bench.py measures target/release"; }
	@for b in bench/*_bench.py; do echo "== $$b"; \
	  if [ $$b = bench/proxy_bench.py ] && [ -x target/pgo/release/cachelab-proxy ]; then $(PY) $$b --pgo || exit 1; \
	  else $(PY) $$b || exit 1; fi; done

# cargo-fuzz needs nightly; each target runs for a bounded time and fails on any crash.
# Then the differential fuzz: memcached, then redis-server (one, and three shards),
# directly vs through the proxy, fresh seeds for FUZZ_SECONDS per test, failing on
# the replies that differ.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS := parse_request parse_reply parse_command
fuzz: deps
	@rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
	@command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --version 0.13.2 --locked
	cd crates/cachelab-protocol && for t in $(FUZZ_TARGETS); do \
	  cargo +nightly fuzz run $$t -- -max_total_time=$(FUZZ_SECONDS) || exit 1; done
	CACHELAB_DIFF_SECONDS=$(FUZZ_SECONDS) cargo test --release -p cachelab-proxy \
	  --test differential -- --nocapture
	CACHELAB_DIFF_SECONDS=$(FUZZ_SECONDS) cargo test --release -p cachelab-proxy \
	  --test differential_resp -- --nocapture

clean:
	cargo clean
	rm -rf $(VENV) demo-out .pytest_cache .ruff_cache
