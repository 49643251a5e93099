#!/usr/bin/env bash
# Installs what vmsched needs, runs the linters (rustfmt check, clippy with warnings as errors,
# ruff, rustdoc's link checks) and the whole test suite: Rust (unit, conformance, engine and scenario tests), the fuzz
# targets for a short fixed count (scripts/fuzz.sh; installs nightly and cargo-fuzz if missing),
# and Python last (API, CLI, reproductions in their short form), so pytest's count closes the log.
# VMSCHED_SLOW=1 also runs the full-length reproductions.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== Xen's trace readers for the xentrace tests (Debian's xen-utils-common: xenalyze, xentrace_format) =="
# tests/test_xentrace.py reads vmsched's xentrace files with them; it skips without them
# locally, and fails under CI, so CI installs them here.
if ! command -v xenalyze >/dev/null || ! command -v xentrace_format >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
            --no-install-recommends xen-utils-common >/dev/null \
            || echo "warning: could not install xen-utils-common"
    else
        echo "note: xen-utils-common is not installed (needs root and apt-get); the xentrace reader tests will skip"
    fi
fi

echo "== a browser for the HTML report's test (Debian's chromium) =="
# tests/test_report.py opens `vmsched report`'s page in headless Chromium; it skips without it
# locally, and fails under CI: so under CI a failed install stops here.
if ! command -v chromium >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
                --no-install-recommends chromium >/dev/null; }; then
            echo "error: could not install chromium"
            if [ "${CI:-}" = true ]; then exit 1; fi
        fi
    elif [ "${CI:-}" = true ]; then
        echo "error: chromium is not installed and cannot be (needs root and apt-get)"
        exit 1
    else
        echo "note: chromium is not installed (needs root and apt-get); the report's browser test will skip"
    fi
fi

echo "== rt-tests for vmsched validate (Debian's rt-tests: cyclictest, hackbench) =="
# tests/test_validate.py runs cyclictest and hackbench on this machine beside the model; its rows
# say "not installed" without them locally, and under CI a failed install stops here.
if ! command -v cyclictest >/dev/null || ! command -v hackbench >/dev/null; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
                --no-install-recommends rt-tests >/dev/null; }; then
            echo "error: could not install rt-tests"
            if [ "${CI:-}" = true ]; then exit 1; fi
        fi
    elif [ "${CI:-}" = true ]; then
        echo "error: rt-tests is not installed and cannot be (needs root and apt-get)"
        exit 1
    else
        echo "note: rt-tests is not installed (needs root and apt-get); validate's rows will say so"
    fi
fi

echo "== installing vmsched (builds the Rust core with maturin) =="
# With the optional extras Ray and Optuna, whose tests (test_ray.py, test_tune.py) fail under CI
# without them; a plain `pip install vmsched` stays without both.
python3 -m pip install --quiet --disable-pip-version-check ".[test,ray,tune]"

echo "== lint: rustfmt, clippy, ruff =="
cargo fmt --all --check
cargo clippy --workspace --exclude vmsched-py --all-targets --quiet -- -D warnings
python3 -m ruff check python tests
# The API docs build without a broken or private link (`cargo doc` warns; CI refuses).
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --exclude vmsched-py --no-deps --quiet

echo "== Rust tests =="
cargo test --workspace --exclude vmsched-py --quiet

echo "== fuzz: each cargo-fuzz target for a short fixed count (scripts/fuzz.sh) =="
scripts/fuzz.sh

echo "== Python tests =="
# Run from tests/ so that `import vmsched` is the installed package, not the source folder.
cd tests
python3 -m pytest -q -p no:cacheprovider .
