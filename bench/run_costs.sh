#!/usr/bin/env bash
# run_costs.sh: what durability and CurveZMQ cost, measured side by side in one run with
# build/bench/bench_replay_tcp (the real replay server over TCP loopback; 4 pushers with
# the actors' default window of 256 unacknowledged batches of 50; one learner thread with 4
# sample requests of 4 batches of 512 in flight, the learner's defaults). Set-ups, back to
# back:
#   baseline               durability none, security none      -> replay.tcp.*
#   --durability snapshot  background snapshots                -> replay.tcp.snapshot.*
#   --durability wal       write-ahead log, acks after fsync   -> replay.tcp.wal.*
#   ... --wal-sync-ms 10   the same with a 10 ms group commit  -> replay.tcp.wal10ms.*
#   --curve 1              every connection CurveZMQ-encrypted -> replay.tcp.curve.*
# and prints each one's insert and sample throughput as a fraction of the baseline
# (BENCH cost.<setup>.max_insert_ratio, cost.<setup>.paced_sample_ratio, and
# cost.<setup>.server_insert_capacity_ratio, below). Goals: wal costs <= 15 % of insert
# throughput; CURVE <= 25 % slower.
# Usage: bash bench/run_costs.sh   env: BUILD, COSTS_ARGS (extra flags, e.g. "--windows 7")
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/machine.sh
BUILD=${BUILD:-build}
bin="$BUILD/bench/bench_replay_tcp"
[ -x "$bin" ] || make --no-print-directory "$bin" >&2
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# Two passes: unpaced pushers (each set-up's maximum insert throughput; on 2 shared cores this
# is as much about who wins the CPU as about the set-up), and pushers paced to 400 k
# transitions/s, a realistic actor load, where the question is whether each set-up keeps up.
# (The cpu_us_per_1k_inserts lines count the whole process, the sampling learner thread
# included, so they are not a per-insert cost by themselves.)
# A third pass isolates the server: no sampler, pushers paced to the same 400 k/s, and the
# replay server's own CPU per insert (its loop thread, its libzmq I/O threads, the log writer,
# snapshot children) for each set-up. Its ratio to the baseline is the set-up's cost on a
# host where the replay does not share its cores with the load generators:
#   cost.<setup>.server_insert_capacity_ratio = baseline CPU per insert / set-up's.
# shellcheck disable=SC2086
for pace in "" "--insert-rate 400000" "--insert-rate 400000 --inflight 0"; do
  for args in "" "--durability snapshot" "--durability wal" "--durability wal --wal-sync-ms 10" \
              "--curve 1"; do
    echo "# apex:  $bin $pace $args ${COSTS_ARGS:-}"
    "$bin" $pace $args ${COSTS_ARGS:-} | tee -a "$out"
  done
done
awk '
  /^BENCH replay\.tcp\./ {
    name = $2
    sub(/^replay\.tcp\./, "", name)
    paced = (name ~ /^paced/)
    sub(/^paced[0-9]+k\.?/, "", name)
    alone = (name ~ /^nosampler/)
    sub(/^nosampler\.?/, "", name)
    kind = (name ~ /insert_transitions/) ? "insert" : (name ~ /server_cpu_us/) ? "server" : (name ~ /cpu_us/) ? "cpu" : "sample"
    setup = name
    sub(/\.?(sample512_batches_per_s|insert_transitions_per_s|server_cpu_us_per_1k_inserts|cpu_us_per_1k_inserts)$/, "", setup)
    if (setup == "") setup = "baseline"
    if (paced && kind == "cpu") cpu[setup] = $3
    if (!paced && kind == "insert") ins[setup] = $3
    if (alone && kind == "server") srv[setup] = $3
    if (paced && !alone && kind == "sample") smp[setup] = $3
    seen[setup] = 1
  }
  END {
    for (s in seen) if (s != "baseline") {
      if (ins["baseline"] > 0 && ins[s] > 0)
        printf "BENCH cost.%s.max_insert_ratio %.3f x\n", s, ins[s] / ins["baseline"]
      if (smp["baseline"] > 0 && smp[s] > 0)
        printf "BENCH cost.%s.paced_sample_ratio %.3f x\n", s, smp[s] / smp["baseline"]
      if (srv["baseline"] > 0 && srv[s] > 0)
        printf "BENCH cost.%s.server_insert_capacity_ratio %.3f x\n", s, srv["baseline"] / srv[s]
    }
  }' "$out"
