#!/bin/sh
# Runs one fuzz target for SECONDS (default 630) at the lowest priority, logging to
# fuzz/logs/<target>.log. Usage: fuzz/run.sh <target> [seconds]
# NO_BUILD=1 runs the binary already built by `cargo fuzz build` (same flags), skipping cargo's
# rebuild when src/ changes under a long series of runs.
set -eu
cd "$(dirname "$0")"
t=$1; secs=${2:-630}
mkdir -p logs corpus/"$t" artifacts/"$t"
set -- -max_total_time="$secs" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
    -malloc_limit_mb=512 -print_final_stats=1
if [ -n "${NO_BUILD:-}" ]; then
    exec nice -n 19 target/x86_64-unknown-linux-gnu/release/"$t" \
        -artifact_prefix="$PWD/artifacts/$t/" "$@" corpus/"$t" >logs/"$t".log 2>&1
fi
RUSTC_BOOTSTRAP=1 exec nice -n 19 cargo fuzz run "$t" corpus/"$t" -- "$@" >logs/"$t".log 2>&1
