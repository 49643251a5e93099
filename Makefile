# Developer commands. `make help` lists them.
.PHONY: help install test rust-test py-test fmt lint bench reproduce callgrind

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

fmt:               ## format Rust code
	cargo fmt --all

lint:              ## clippy on the workspace
	cargo clippy --workspace --exclude vmsched-py --all-targets

bench:             ## engine throughput on fixed scenarios (events/s, simulated s per wall s)
	cargo run --release -p vmsched-bench -- all --seconds 10

callgrind:         ## instruction counts of the seed000 benchmark (repeatable, unlike wall time)
	cargo build --release -p vmsched-bench && valgrind --tool=callgrind --callgrind-out-file=/tmp/callgrind.out target/release/vmsched-bench seed000 --seconds 1

reproduce:         ## the headline experiment
	vmsched reproduce seed000
