#!/usr/bin/env bash
# run_replay_atari.sh: the replay store with Atari-shaped rows in frame mode (issue #27),
# build/bench/bench_replay_atari: 2 M rows of 84x84 uint8 frames stacked by 4, n = 3, each
# frame stored once. Twice: with the default spare frames (capacity + capacity / 256 + 4096,
# what apex-replay allocates) and with exactly one frame per row (--frame-capacity = capacity:
# the least a store of single frames can hold). Prints replay.atari.bytes_per_transition (and
# .whole_stacks, today's layout sized), rss_gb_2000k, insert_frames_per_s and
# sample_stacks_per_s; the second run's lines carry the suffix .frames_eq_rows.
# It needs ~15 GB free: the store really holds the 2 M rows (REPLAY_ATARI_CAPACITY to change).
# Usage: bash bench/run_replay_atari.sh   env: BUILD (default build), REPLAY_ATARI_CAPACITY
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
CAP=${REPLAY_ATARI_CAPACITY:-2000000}
bin="$BUILD/bench/bench_replay_atari"
[ -x "$bin" ] || make --no-print-directory "$bin" >&2
echo "# apex:  $bin --capacity $CAP"
"$bin" --capacity "$CAP"
echo "# apex:  $bin --capacity $CAP --frame-capacity $CAP"
"$bin" --capacity "$CAP" --frame-capacity "$CAP" | sed -E 's/^(BENCH [^ ]+) /\1.frames_eq_rows /'
