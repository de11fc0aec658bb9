#!/usr/bin/env bash
# run_replay_shards.sh: one learner sampling from K = 1 and K = 2 replay shards over TCP
# loopback, side by side in one invocation (build/bench/bench_replay_shards: K real
# replay_server_t threads, capacity 2^20 in all, pre-filled; pusher i inserts into shard
# i mod K; the learner thread is learner/shards.h, 4 requests of 4 x 512 in flight).
#   default      4 unpaced pushers      -> replay.shards<K>.sample512_batches_per_s,
#                                          replay.shards<K>.insert_transitions_per_s
#   no inserts   sampling alone         -> replay.shards<K>.pushers0.sample512_batches_per_s
# Everything (K servers, pushers, learner, libzmq I/O threads) shares this machine's cores:
# on 2 cores a second shard adds a server thread and two I/O threads to the same CPUs, so
# this measures the sharding's cost and its insert capacity, not a cluster's scaling.
# Usage: bash bench/run_replay_shards.sh   env: BUILD (default build), SHARDS_ARGS (extra flags)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
bin="$BUILD/bench/bench_replay_shards"
[ -x "$bin" ] || make --no-print-directory "$bin" >&2
status=0
# shellcheck disable=SC2086 # SHARDS_ARGS is a list of flags
for args in "" "--pushers 0"; do
  echo "# apex:  $bin $args ${SHARDS_ARGS:-}"
  "$bin" $args ${SHARDS_ARGS:-} || { echo "run_replay_shards: '$bin $args' failed" >&2; status=1; }
done
exit $status
