#!/usr/bin/env bash
# make bench: runs every bench/run_*.sh in turn. Each prints BENCH lines for apex and its
# peer measured back to back, plus ratio lines. BUILD and BIN point at the build tree.
set -euo pipefail
cd "$(dirname "$0")/.."
export BUILD=${BUILD:-build} BIN=${BIN:-bin}
APEX_BENCH_DEPS=1 scripts/install-deps.sh
status=0
for s in bench/run_*.sh; do
  [ -e "$s" ] || continue
  echo "== $s"
  bash "$s" || { echo "bench: $s failed" >&2; status=1; }
done
exit $status
