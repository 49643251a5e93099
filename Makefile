# Developer commands. `make help` lists them.
.PHONY: help install test rust-test py-test fmt lint bench bench-scale reproduce callgrind

help:              ## list the developer commands
	@grep -E '^[a-z-]+:.*##' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

install:           ## build and install the package (release build of the Rust core)
	python3 -m pip install ".[test]"

test:              ## the whole test suite (what CI runs)
	bash scripts/test.sh

rust-test:         ## Rust tests only
	cargo test --workspace --exclude vmsched-py

py-test: install   ## Python tests only
	cd tests && python3 -m pytest -q .

fmt:               ## format Rust code and fix what ruff can fix (imports order) in Python
	cargo fmt --all
	python3 -m ruff check --fix python tests

lint:              ## the checks CI runs: rustfmt check, clippy (warnings are errors), ruff
	cargo fmt --all --check
	cargo clippy --workspace --exclude vmsched-py --all-targets -- -D warnings
	python3 -m ruff check python tests

bench:             ## engine throughput on fixed scenarios (events/s, simulated s per wall s)
	cargo run --release -p vmsched-bench -- all --seconds 10

callgrind:         ## instruction counts of the seed000 benchmark (Ir / events = instructions per event)
	cargo build --release -p vmsched-bench && valgrind --tool=callgrind --callgrind-out-file=/tmp/callgrind.out target/release/vmsched-bench seed000 --seconds 1

bench-scale:       ## the 1,024- and 4,096-pCPU scenarios for a short simulated time
	cargo run --release -p vmsched-bench -- x1024 --seconds 0.1
	cargo run --release -p vmsched-bench -- x4096 --seconds 0.02

reproduce:         ## the headline experiment
	vmsched reproduce seed000
