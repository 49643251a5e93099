#!/usr/bin/env bash
# Runs vmsched's cargo-fuzz targets (fuzz/, docs/fuzzing.md) for a fixed number of executions
# each, one at a time on one core: `scenario` and `overrides` (the loader), `run` (the core on
# scenarios that validate) and `xlcfg`, `sysctl`, `rtapp` (the readers of `vmsched import`). Installs cargo-fuzz and the nightly toolchain if they are missing and
# seeds the corpora from the shipped scenarios. A crash fails the script and leaves its input in
# fuzz/artifacts/<target>/.
#
#   scripts/fuzz.sh                    the short CI run
#   FUZZ_SEED=0 FUZZ_RUNS=1000000 FUZZ_RUN_RUNS=-1 FUZZ_RUN_SECONDS=900 scripts/fuzz.sh   the long run
#   scripts/fuzz.sh scenario           one target
set -euo pipefail
cd "$(dirname "$0")/../fuzz"

PARSER_RUNS="${FUZZ_RUNS:-20000}"      # scenario, overrides and the import readers
RUN_RUNS="${FUZZ_RUN_RUNS:-3000}"      # run (-1: until FUZZ_RUN_SECONDS)
RUN_SECONDS="${FUZZ_RUN_SECONDS:-0}"   # 0: no time limit
targets=("${@:-scenario overrides run xlcfg sysctl rtapp}")
read -r -a targets <<<"${targets[*]}"

if ! rustup toolchain list | grep -q '^nightly'; then
    rustup toolchain install nightly --profile minimal
fi
if ! command -v cargo-fuzz >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi

# No sanitizer: the project forbids unsafe code, and panics are what the targets look for.
# Debug assertions on, so integer overflow panics too.
BUILD=(cargo +nightly fuzz build -s none -a)
"${BUILD[@]}"  # every target

# Seed corpora (generated, not committed): for the import targets, the files of fuzz/seeds/<target>;
# the shipped scenarios as they are for `scenario`,
# behind a 0 byte for `run` (its text form, with generator inputs beside them), and behind each selector byte with a few overrides
# for `overrides`.
seed() {
    local t="$1" i=0
    mkdir -p "corpus/$t"
    if [ -d "seeds/$t" ]; then
        cp seeds/"$t"/* "corpus/$t/"
        return
    fi
    for f in ../python/vmsched/scenarios/*.toml; do
        case "$t" in
            scenario) cp "$f" "corpus/scenario/$(basename "$f")" ;;
            run)
                { printf '\0'; cat "$f"; } >"corpus/run/$(basename "$f")"
                # and 64 fixed pseudo-random byte strings for the generator (empty bytes give
                # a scenario with no workload)
                python3 -c 'import random, sys
r = random.Random(int(sys.argv[1]))
for k in range(64):
    with open(f"corpus/run/gen-{sys.argv[1]}-{k}", "wb") as f:
        f.write(bytes([1 + r.randrange(255)]) + r.randbytes(600))' "$i"
                ;;
            overrides)
                # the selector: bits 0-1, 5 and 6 pick the scenario, bit 2 the typed form
                sel=$(( (i & 3) | ((i & 12) << 3) ))
                printf "\\x$(printf %02x "$sel")run.duration_ms=5\nmachine.pcpus=4\n" >"corpus/overrides/cli-$i"
                printf "\\x$(printf %02x "$sel")domain.0.vcpus=2\ndomain.0.workload.0.copies=3\nhost.ratelimit_us=0\n" >"corpus/overrides/cli2-$i"
                printf "\\x$(printf %02x $((sel + 4)))\\x00\\x03\\x02\\x05" >"corpus/overrides/typed-$i"
                ;;
        esac
        i=$((i + 1))
    done
}

for t in "${targets[@]}"; do
    seed "$t"
    if [ "$t" = run ]; then
        runs="$RUN_RUNS"
    else
        runs="$PARSER_RUNS"
    fi
    # A fixed seed (docs/fuzzing.md): the short CI run mutates alike on every machine.
    args=(-runs="$runs" -timeout=20 -rss_limit_mb=2048 -max_len=8192
          -print_final_stats=1 -seed="${FUZZ_SEED:-1}")
    if [ "$t" = run ] && [ "$RUN_SECONDS" != 0 ]; then
        args+=(-max_total_time="$RUN_SECONDS")
    fi
    case "$t" in
        overrides) args+=(-dict=overrides.dict) ;;
        xlcfg | sysctl | rtapp) args+=(-dict=import.dict) ;;
    esac
    echo "== fuzz $t: ${args[*]} =="
    cargo +nightly fuzz run -s none -a "$t" -- "${args[@]}" 2>&1 |
        grep -E '^#[0-9]+ *DONE|Done [0-9]+ runs|stat::number_of_executed_units|ERROR|panicked|SUMMARY|Test unit written|^(thread|==)' || true
    # cargo fuzz exits non-zero on a crash; grep hides that status, so look for artifacts.
    # A slow unit (over 10 s) is reported, not failed: the time-out (20 s) fails.
    if compgen -G "artifacts/$t/slow-unit-*" >/dev/null; then
        echo "fuzz $t: slow inputs (over 10 s) in fuzz/artifacts/$t/slow-unit-*" >&2
    fi
    if compgen -G "artifacts/$t/[a-rt-z]*-*" >/dev/null; then
        echo "fuzz $t: crash, time-out or out-of-memory inputs in fuzz/artifacts/$t/" >&2
        exit 1
    fi
done
