#!/usr/bin/env bash
# run_replay_atari.sh: the replay store with Atari-shaped rows in frame mode (issue #27),
# build/bench/bench_replay_atari: 2 M rows of 84x84 uint8 frames stacked by 4, n = 3, each
# frame stored once, in one invocation:
#   1. raw frames with the default spare frames (capacity + capacity / 256 + 4096, what
#      apex-replay allocates): replay.atari.bytes_per_transition (and .whole_stacks, today's
#      layout sized), rss_gb_2m, insert_frames_per_s, sample_stacks_per_s;
#   2. raw frames with exactly one frame per row (--frame-capacity = capacity: the least a
#      store of single frames can hold), its lines suffixed .frames_eq_rows;
#   3-6. compressed, zstd and LZ4 at their default levels, on MinAtar Breakout's 84x84 renders
#      and on the classic-control fixture (tests/fixtures/frames: Gymnasium's pygame drawings,
#      anti-aliased): replay.atari.<codec>.<minatar_render|classic_control>.*, with the
#      compression ratio and the frames/s one core compresses (the actors' cost).
# The raw runs need ~15 GB free: the store really holds the 2 M rows (REPLAY_ATARI_CAPACITY
# to change); the compressed ones well under 1 GB.
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
for codec in zstd lz4; do
  for frames in breakout fixture; do
    echo "# apex:  $bin --capacity $CAP --compress $codec --frames $frames"
    "$bin" --capacity "$CAP" --compress "$codec" --frames "$frames"
  done
done
