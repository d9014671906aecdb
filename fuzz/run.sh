#!/bin/sh
# Runs one fuzz target for SECONDS (default 630) at the lowest priority, logging to
# fuzz/logs/<target>.log. Usage: fuzz/run.sh <target> [seconds]
set -eu
cd "$(dirname "$0")"
t=$1; secs=${2:-630}
mkdir -p logs corpus/"$t" artifacts/"$t"
RUSTC_BOOTSTRAP=1 exec nice -n 19 cargo fuzz run "$t" corpus/"$t" -- \
    -max_total_time="$secs" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
    -malloc_limit_mb=512 -print_final_stats=1 >logs/"$t".log 2>&1
