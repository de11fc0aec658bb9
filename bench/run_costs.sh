#!/usr/bin/env bash
# run_costs.sh: what durability and CurveZMQ cost, measured side by side in one run with
# build/bench/bench_replay_tcp (the real replay server over TCP loopback; 4 pushers with
# the actors' default window of 256 unacknowledged batches of 50; one learner thread with 4
# sample requests of 512 in flight). Set-ups, back to back:
#   baseline               durability none, security none      -> replay.tcp.*
#   --durability snapshot  background snapshots                -> replay.tcp.snapshot.*
#   --durability wal       write-ahead log, acks after fsync   -> replay.tcp.wal.*
#   ... --wal-sync-ms 10   the same with a 10 ms group commit  -> replay.tcp.wal10ms.*
#   --curve 1              every connection CurveZMQ-encrypted -> replay.tcp.curve.*
# and prints each one's insert and sample throughput as a fraction of the baseline
# (BENCH cost.<setup>.insert_ratio, cost.<setup>.sample_ratio). Goals: wal costs <= 15 % of
# insert throughput; CURVE <= 25 % slower.
# Usage: bash bench/run_costs.sh   env: BUILD, COSTS_ARGS (extra flags, e.g. "--windows 7")
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
bin="$BUILD/bench/bench_replay_tcp"
[ -x "$bin" ] || make --no-print-directory "$bin" >&2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# Unpaced pushers: each set-up's maximum insert throughput on this machine.
common="${COSTS_ARGS:-}"
# shellcheck disable=SC2086
for args in "" "--durability snapshot" "--durability wal" "--durability wal --wal-sync-ms 10" \
            "--curve 1"; do
  echo "# apex:  $bin $common $args"
  "$bin" $common $args | tee -a "$out"
done
awk '
  /^BENCH replay\.tcp\./ {
    name = $2
    sub(/^replay\.tcp\./, "", name)
    sub(/^paced[0-9]+k\./, "", name)
    kind = (name ~ /insert/) ? "insert" : "sample"
    setup = name
    sub(/\.?(sample512_batches_per_s|insert_transitions_per_s)$/, "", setup)
    if (setup == "") setup = "baseline"
    v[setup, kind] = $3; seen[setup] = 1
  }
  END {
    for (s in seen) if (s != "baseline" && v["baseline", "insert"] > 0) {
      printf "BENCH cost.%s.insert_ratio %.3f x\n", s, v[s, "insert"] / v["baseline", "insert"]
      printf "BENCH cost.%s.sample_ratio %.3f x\n", s, v[s, "sample"] / v["baseline", "sample"]
    }
  }' "$out"
