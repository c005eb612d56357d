#!/bin/sh
# Runs every fuzz target for SECONDS (default 660) of wall time, one after
# another, and prints libFuzzer's final statistics for each. Needs the
# nightly toolchain and cargo-fuzz (cargo install --locked cargo-fuzz).
#   sh fuzz/run-all.sh [SECONDS]
set -eu
cd "$(dirname "$0")"
secs=${1:-660}
for t in descriptor index_page codec bounded open_read mutate merge segy; do
    echo "== $t ($secs s) $(date -u +%FT%TZ)"
    start=$(date +%s)
    cargo +nightly fuzz run -O "$t" "corpus/$t" -- -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 \
        -print_final_stats=1 2>&1 | grep -E "^(stat::|Done|==[0-9]+== ERROR|SUMMARY|artifact_prefix|Test unit written)" || true
    echo "wall $(( $(date +%s) - start )) s; crash files: $(ls artifacts/$t 2>/dev/null | wc -l)"
done
